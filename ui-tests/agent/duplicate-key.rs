use capability::{agent, Capability};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

#[agent(tools(RestartPod), name = "ops", name = "operator")]
struct Operator;

fn main() {}
