// An advisor runs only the tools its attribute binds, even read-only ones.
use capability::{advisor_agent, AdvisorSession, Capability, Run};

/// List pods.
#[derive(Capability)]
#[capability(read_only)]
struct ListPods;

/// List nodes.
#[derive(Capability)]
#[capability(read_only)]
struct ListNodes;

impl Run for ListNodes {
    type Output = ();
    fn run(self) {}
}

#[advisor_agent(tools(ListPods), target = "analysis")]
struct Analyst;

fn main() {
    if let Ok(session) = AdvisorSession::<Analyst>::new() {
        let _ = session.run(ListNodes);
    }
}
