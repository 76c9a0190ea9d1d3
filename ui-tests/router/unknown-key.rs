use capability::tool_capabilities;
use rmcp::{tool, tool_router};

struct OpsServer;

// Every mistake is reported in one build.
#[tool_capabilities(modul = ops)]
#[tool_router]
impl OpsServer {
    /// List the pods.
    #[tool(annotations(read_only_hint = true))]
    #[capability(scope = ["k8s:read"], read_only)]
    fn list_pods(&self) -> String {
        String::new()
    }

    /// Restart a pod.
    #[tool(annotations(read_only_hint = true, destructive_hint = true))]
    #[capability(provider = "k 8 s")]
    fn restart_pod(&self) -> String {
        String::new()
    }
}

fn main() {}
