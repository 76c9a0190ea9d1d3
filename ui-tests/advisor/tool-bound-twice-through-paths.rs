use capability::{advisor_agent, Capability};

/// Read a pod.
#[derive(Capability)]
#[capability(read_only)]
struct ReadPod;

#[advisor_agent(tools(ReadPod, crate::ReadPod, self::ReadPod), target = "analysis")]
struct Analyst;

fn main() {}
