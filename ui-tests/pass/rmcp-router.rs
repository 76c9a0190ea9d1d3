//! An rmcp server with read-only and mutating tools: an advisor binds and runs the read-only one,
//! an operator binds both.
#![allow(
    dead_code,
    reason = "the forms are declared to show they are accepted, not used"
)]
use capability::{AdvisorSession, Agent, Capability, Run, advisor_agent, agent, tool_capabilities};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct PodRef {
    name: String,
}

struct OpsServer;

#[tool_capabilities]
#[tool_router]
impl OpsServer {
    /// List the pods.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    #[capability(scopes = ["k8s:read"], provider = "k8s")]
    fn list_pods(&self) -> String {
        "web-1".to_owned()
    }

    /// Restart a pod.
    #[tool(name = "restart-pod", annotations(destructive_hint = true))]
    #[capability(scopes = ["k8s:write"], provider = "k8s")]
    async fn restart(&self, Parameters(pod): Parameters<PodRef>) -> String {
        pod.name
    }
}

impl Run for ops_server_tools::ListPods {
    type Output = String;
    fn run(self) -> String {
        OpsServer.list_pods()
    }
}

#[advisor_agent(tools(ops_server_tools::ListPods), target = "analysis")]
struct Viewer;

#[agent(tools(ops_server_tools::ListPods, ops_server_tools::RestartPod))]
struct Operator;

fn main() {
    let session = AdvisorSession::<Viewer>::new().expect("an advisor");
    assert_eq!(
        session.run(ops_server_tools::ListPods).expect("runs"),
        "web-1"
    );
    assert!(ops_server_tools::RestartPod::manifest().destructive());
    assert_eq!(Operator::spec().tools().len(), 2);
    assert_eq!(OpsServer::tool_router().list_all().len(), 2);
}
