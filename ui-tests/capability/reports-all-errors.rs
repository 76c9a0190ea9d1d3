// One build reports every mistake, each at its own token.
use capability::Capability;

#[derive(Capability)]
#[capability(read_only, readonly, name = "list pods")]
#[capability(scopes = ["k8s:read", "", "k8s:delete"], read_only, destructive = true)]
struct ListPods;

fn main() {}
