use capability::{agent, Capability};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

#[agent(tools(RestartPod), name = "night shift")]
struct Operator;

fn main() {}
