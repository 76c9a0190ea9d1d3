use capability::{advisor_agent, Capability};

/// Read a metric.
#[derive(Capability)]
#[capability(read_only)]
struct PromQuery;

#[advisor_agent(tools(PromQuery))]
struct Analyst<T> {
    state: T,
}

fn main() {}
