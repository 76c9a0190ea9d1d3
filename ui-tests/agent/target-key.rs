use capability::{agent, Capability};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

#[agent(tools(RestartPod), target = "analysis")]
struct Operator;

fn main() {}
