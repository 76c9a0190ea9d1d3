use capability::{advisor_agent, Capability};

/// Read a metric.
#[derive(Capability)]
#[capability(read_only, scopes = ["metrics:read"])]
struct PromQuery;

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive, scopes = ["k8s:write"])]
struct RestartPod;

#[advisor_agent(tools(PromQuery, RestartPod), target = "analysis")]
struct Analyst;

fn main() {}
