use capability::Capability;

#[derive(Capability)]
#[capability(readonly)]
struct ListPods;

fn main() {}
