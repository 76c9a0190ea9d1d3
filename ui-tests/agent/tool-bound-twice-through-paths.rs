use capability::{agent, Capability};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

type Restart = RestartPod;

#[agent(tools(RestartPod, Restart))]
struct Operator;

fn main() {}
