use capability::{advisor_agent, tool_capabilities};
use rmcp::{tool, tool_router};

struct OpsServer;

#[tool_capabilities]
#[tool_router]
impl OpsServer {
    /// List the pods.
    #[tool(annotations(read_only_hint = true))]
    fn list_pods(&self) -> String {
        String::new()
    }

    /// Restart a pod.
    #[tool(annotations(destructive_hint = true))]
    #[capability(scopes = ["k8s:write"])]
    fn restart_pod(&self) -> String {
        String::new()
    }
}

#[advisor_agent(tools(ops_server_tools::ListPods, ops_server_tools::RestartPod))]
struct Viewer;

fn main() {}
