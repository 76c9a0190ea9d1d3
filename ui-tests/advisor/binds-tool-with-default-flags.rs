// A tool that says nothing about its effects is mutating: fail-closed.
use capability::{advisor_agent, Capability};

/// Tag a ticket.
#[derive(Capability)]
#[capability(scopes = ["tickets:tag"])]
struct TagTicket;

#[advisor_agent(tools(TagTicket))]
struct Triage;

fn main() {}
