// The agent is local, so the orphan rule would allow this for another crate's tool.
use capability::advisor_agent;
use capability::agent::AdvisorBindable;

#[advisor_agent(tools(toolkit::DeleteUser), target = "selection")]
struct Picker;

impl AdvisorBindable<Picker, false> for toolkit::DeleteUser {}

fn main() {}
