use capability::Capability;

#[derive(Capability)]
#[capability(scopes = ["k8s:read"], provider = "k8s")]
#[capability(read_only, scopes = ["k8s:list"])]
struct ListPods;

fn main() {}
