// A hand-written proof that `Analyst` binds `ListNodes`, a read-only tool its attribute does not
// list: the library's gate function needs the agent's binding token, which the attribute alone
// can make.
use capability::__private::{bind_advisor_tool, AdvisorBinding};
use capability::agent::AdvisorBound;
use capability::{advisor_agent, Capability};

/// List pods.
#[derive(Capability)]
#[capability(read_only)]
struct ListPods;

/// List nodes.
#[derive(Capability)]
#[capability(read_only)]
struct ListNodes;

#[advisor_agent(tools(ListPods), target = "analysis")]
struct Analyst;

impl AdvisorBound<Analyst> for ListNodes {
    const BINDING: AdvisorBinding<ListNodes, Analyst> =
        bind_advisor_tool::<ListNodes, Analyst, true>();
}

fn main() {}
