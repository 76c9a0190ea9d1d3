use capability::Capability;

#[derive(Capability)]
#[capability(read_only, scopes = ["k8s:read", "k8s:write"])]
struct ListPods;

fn main() {}
