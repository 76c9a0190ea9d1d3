use capability::Capability;

#[derive(Capability)]
#[capability(destructive)]
#[capability(read_only)]
struct ListPods;

fn main() {}
