use capability::{advisor_agent, tool_capabilities};
use rmcp::{tool, tool_router};

struct OpsServer;

// No annotations: the MCP defaults, a mutating tool.
#[tool_capabilities]
#[tool_router]
impl OpsServer {
    /// Scale a deployment.
    #[tool]
    fn scale(&self) -> String {
        String::new()
    }
}

#[advisor_agent(tools(ops_server_tools::Scale))]
struct Viewer;

fn main() {}
