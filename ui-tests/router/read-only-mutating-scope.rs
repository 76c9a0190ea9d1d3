use capability::tool_capabilities;
use rmcp::{tool, tool_router};

struct OpsServer;

#[tool_capabilities]
#[tool_router]
impl OpsServer {
    /// List the pods.
    #[tool(annotations(read_only_hint = true))]
    #[capability(scopes = ["k8s:read", "k8s:write"])]
    fn list_pods(&self) -> String {
        String::new()
    }
}

fn main() {}
