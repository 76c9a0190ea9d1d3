// What rustc's `help:` line used to suggest: implementing the gate's bound by hand.
use capability::agent::AdvisorBindable;
use capability::{advisor_agent, Capability};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

#[advisor_agent(tools(RestartPod), target = "analysis")]
struct Analyst;

impl AdvisorBindable<Analyst, false> for RestartPod {}

fn main() {}
