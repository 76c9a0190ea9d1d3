use capability::Capability;

#[derive(Capability)]
#[capability(read_only = "yes")]
struct ListPods;

fn main() {}
