use capability::Capability;

#[derive(Capability)]
#[capability(read_only, name = "list pods")]
struct ListPods;

fn main() {}
