//! A crate that renames the facade tells the macros with `crate = ".."`.
#![allow(
    dead_code,
    reason = "the forms are declared to show they are accepted, not used"
)]
extern crate capability as cap;

use cap::{Agent, Capability, advisor_agent};

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
