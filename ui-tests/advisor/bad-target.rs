use capability::{advisor_agent, Capability};

/// Read a metric.
#[derive(Capability)]
#[capability(read_only)]
struct PromQuery;

#[advisor_agent(tools(PromQuery), target = "analytics")]
struct Analyst;

fn main() {}
