use capability::Capability;

#[derive(Capability)]
#[capability(read_only, destructive = true)]
struct ListPods;

fn main() {}
