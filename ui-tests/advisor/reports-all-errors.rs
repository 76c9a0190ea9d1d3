// One build reports every mistake: the bad target, the unknown key and both mutating tools.
use capability::{advisor_agent, Capability};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

/// Delete a pod.
#[derive(Capability)]
#[capability(destructive)]
struct DeletePod;

#[advisor_agent(tools(RestartPod, DeletePod), target = "analytics", nmae = "x")]
struct Analyst;

fn main() {}
