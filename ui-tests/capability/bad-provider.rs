use capability::Capability;

#[derive(Capability)]
#[capability(read_only, provider = "k8s/core")]
struct ListPods;

fn main() {}
