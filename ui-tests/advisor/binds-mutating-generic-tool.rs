use capability::{advisor_agent, Capability};

/// Upload a payload.
#[derive(Capability)]
#[capability(destructive = false)]
struct Upload<T> {
    payload: T,
}

#[advisor_agent(tools(Upload<String>))]
struct Researcher;

fn main() {}
