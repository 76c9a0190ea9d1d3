// The binding token can be named through the agent (`<Analyst as AdvisorTokens>::Token`), but
// not made: its field's type is declared inside the attribute's expansion, out of reach.
use capability::__private::{bind_advisor_tool, AdvisorBinding, AdvisorTokens};
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

type Stolen = <Analyst as AdvisorTokens>::Token;

impl AdvisorBound<Analyst> for ListNodes {
    const BINDING: AdvisorBinding<ListNodes, Analyst> =
        bind_advisor_tool::<ListNodes, Analyst, true>(&Stolen {});
}

fn main() {}
