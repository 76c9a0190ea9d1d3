use capability::{advisor_agent, Capability};

/// Tag a ticket.
#[derive(Capability)]
#[capability(read_only = false, destructive = false)]
struct TagTicket;

#[advisor_agent(tools(TagTicket))]
struct Triage;

fn main() {}
