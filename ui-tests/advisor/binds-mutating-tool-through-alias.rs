use capability::{advisor_agent, Capability};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive, scopes = ["k8s:write"])]
struct RestartPod;

type Harmless = RestartPod;

#[advisor_agent(tools(Harmless))]
struct Researcher;

fn main() {}
