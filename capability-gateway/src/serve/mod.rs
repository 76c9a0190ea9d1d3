//! The fleet as one MCP server to its clients ([`handler`]): the role's union of the fleet's
//! tools, each call routed, decided, recorded and passed on (`called.rs`, held for approval in
//! `held.rs` and `approvals.rs` (what the approvals page does to them in `approving.rs`), the approval asked of a client of 2026-07-28 in `asked.rs`);
//! resources and prompts across servers (`items.rs`, `served.rs`); what a server asks back during a call and the revisions bridged
//! (`bridge.rs`, `logging.rs`); the clients told of list changes (`clients.rs`).

pub(crate) mod approvals;
pub(crate) mod approving;
pub(crate) mod asked;
pub(crate) mod bridge;
pub(crate) mod called;
pub(crate) mod clients;
pub(crate) mod completed;
pub(crate) mod gateway;
pub(crate) mod handler;
pub(crate) mod held;
pub(crate) mod items;
pub(crate) mod logging;
pub(crate) mod refusal;
pub(crate) mod served;
pub(crate) mod who;
