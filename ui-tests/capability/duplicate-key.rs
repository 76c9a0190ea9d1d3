use capability::Capability;

#[derive(Capability)]
#[capability(read_only, idempotent, read_only)]
struct ListPods;

fn main() {}
