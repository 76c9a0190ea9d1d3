//! The governed MCP gateway as a library: one engine in front of one to many MCP servers.
//!
//! Each server is spawned (stdio) or reached (Streamable HTTP); their tools, resources and
//! prompts are served as one MCP server to one client over standard input and output, or to
//! any number over Streamable HTTP behind [`capability_http`]'s edge. Every request is decided
//! by the policy for the caller's role, recorded in the audit trail (intent before it is
//! passed on, outcome after), and what the policy allows passes as if the gateway were not
//! there: a server's log messages and its requests during a call reach the client of that
//! call, and the revisions of the protocol are bridged.
//!
//! `capability gateway` serves the policy's `[servers]` with it; `capability proxy` is a
//! gateway of one server given on its command line. A program embeds it the same way:
//!
//! ```no_run
//! # async fn run() -> Result<(), capability_gateway::GatewayError> {
//! use std::sync::Arc;
//! use capability::audit::AuditedDispatch;
//! use capability_gateway::{Front, GatewayError, Servers};
//!
//! let policy = capability::Policy::from_toml_file("policy.toml")
//!     .map_err(|e| GatewayError::Config(e.to_string()))?;
//! // The trail: a JSON Lines file, or a SQLite or PostgreSQL store.
//! let sink = capability_gateway::trail::open("audit.jsonl", "gateway", "reader", None)?;
//! let dispatch = Arc::new(AuditedDispatch::new(sink.clone()));
//! let ended = capability_gateway::builder(policy, "policy.toml", dispatch)
//!     .servers(Servers::Policy)
//!     .store("audit.jsonl")
//!     .serve(Front::Stdio("reader".to_owned()))
//!     .await?;
//! sink.close().map_err(|e| GatewayError::Config(e.to_string()))?;
//! # let _ = ended; Ok(()) }
//! ```
//!
//! What it says to its operator (a server that died, a reload, a drift) are `tracing` events of
//! target `capability_gateway`; why it could not serve is a [`GatewayError`]. It prints
//! nothing. Process supervision lives here: no other library of the workspace enables
//! `tokio/process`.
//!
//! Its parts, each depending only on those before it: `wire/` (bounded lines, the outbox of a
//! stdio client), `spec/` (what a server of the fleet is), `process.rs` (one spawn-and-stop
//! helper), `protocol.rs` (the revisions spoken), `upstream/` (one connection to a server,
//! stdio or HTTP, its forwarding pipe, and what the server asks back), `serve/` (the fleet as
//! one MCP server: tools, items, held calls and approvals), `lane/` (the forwarding path of
//! `tools/call` below rmcp's typed model: route, decide, record, forward, settle), `front/`
//! (the client's side: stdio, Streamable HTTP), `fleet/` (the servers: start, restart,
//! reload, tool versions, what a check reports and what would show a hidden tool), `run.rs`
//! (one run, from the builder), [`init`] (a fleet from an `mcpServers` JSON: its policy and
//! lockfile written, checked).

//!
#![doc = include_str!("../../docs/gateway.md")]
#![forbid(unsafe_code)]

mod builder;
mod error;
pub mod escape;
pub mod evidence;
pub mod files;
mod fleet;
mod front;
pub mod init;
mod lane;
pub mod live;
pub mod metrics;
pub mod pins;
mod process;
mod protocol;
mod run;
mod serve;
mod spec;
pub mod trail;
mod upstream;
mod wire;
pub mod witness;

pub use builder::{Builder, builder};
pub use error::GatewayError;
pub use fleet::check::{
    Checked, CheckedItem, CheckedServer, CheckedTool, ItemCollision, NameCollision, RoleView, check,
};
pub use fleet::tools_file::parse_tools;
pub use fleet::{FleetServer, read_fleet};
pub use front::http::credentials::check_credentials;
pub use init::servers_json::provider_name;
pub use process::{fresh_log_in, log_servers_to};
pub use run::{DRAIN, Ended, Front};
pub use serve::clients::PROXY_NAME;
pub use serve::gateway::GATEWAY_NAME;
pub use spec::source::ServerSource;
pub use spec::{Exchange, Secret, ServerSpec, Servers, read_secret};
pub use upstream::secrets;
pub use wire::lines;

pub(crate) use upstream::relay::at_or_above;

/// What the engine says to its operator: a `tracing` event (target `capability_gateway`,
/// `info`), which `capability` prints on standard error as `<who>: <message>`.
pub(crate) fn note(message: std::fmt::Arguments<'_>) {
    tracing::info!(target: "capability_gateway", "{message}");
}
