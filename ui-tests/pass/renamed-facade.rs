// A crate that renames the facade tells the macros with `crate = ".."`.
extern crate capability as cap;

use cap::{advisor_agent, Agent, Capability};

/// Read a metric.
#[derive(Capability)]
#[capability(read_only, crate = "::cap")]
struct PromQuery;

#[advisor_agent(tools(PromQuery), crate = "::cap")]
struct Analyst;

fn main() {
    assert!(PromQuery::manifest().read_only());
    assert_eq!(Analyst::spec().tools().len(), 1);
}
