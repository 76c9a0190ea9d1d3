//! Every accepted form of `#[advisor_agent]` and `#[agent]` builds.
#![allow(
    dead_code,
    reason = "the forms are declared to show they are accepted, not used"
)]
use capability::{Agent, Capability, Target, advisor_agent, agent};

/// Read a metric.
#[derive(Capability)]
#[capability(read_only)]
struct PromQuery;

/// Fetch a thing.
#[derive(Capability)]
#[capability(read_only)]
struct Fetch<T> {
    id: T,
}

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive)]
struct RestartPod;

mod nested {
    /// A tool in another module.
    #[derive(capability::Capability)]
    #[capability(read_only)]
    pub struct Describe;
}

type Alias = PromQuery;

#[advisor_agent(tools(PromQuery))]
struct Researcher;

#[advisor_agent(tools(Fetch<String>, nested::Describe, toolkit::ListUsers, Alias,), target = "selection")]
struct Picker;

#[advisor_agent(target = "analysis", name = "night-analyst", tools())]
enum Analyst {}

#[agent(tools(RestartPod, PromQuery, toolkit::DeleteUser))]
struct Operator;

#[advisor_agent(tools(PromQuery), crate = "::capability")]
pub(crate) struct Explicit;

fn main() {
    assert_eq!(Researcher::spec().target(), Target::Research);
    let picker = Picker::spec();
    assert_eq!(picker.name(), "picker");
    let names: Vec<&str> = picker.tools().iter().map(|t| t.name()).collect();
    assert_eq!(names, ["fetch", "describe", "list_users", "prom_query"]);
    assert_eq!(Analyst::spec().name(), "night-analyst");
    assert_eq!(Analyst::spec().target(), Target::Analysis);
    assert!(Analyst::spec().tools().is_empty());
    assert!(!Operator::spec().is_advisor());
    assert_eq!(Operator::spec().mutating_tools().count(), 2);
    assert_eq!(Explicit::spec().tools().len(), 1);
}
