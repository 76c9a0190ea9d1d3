use capability::tool_capabilities;
use rmcp::{tool, tool_router};

struct OpsServer;

#[tool_capabilities]
#[tool_router]
impl OpsServer {
    /// List the pods.
    #[tool(name = "list pods", annotations(read_only_hint = true))]
    fn list_pods(&self) -> String {
        String::new()
    }
}

fn main() {}
