//! MCP through [rmcp](https://docs.rs/rmcp) (feature `rmcp`): conversions between
//! `CapabilityManifest` and `rmcp::model::Tool`, [`list_tools`], which lists every tool of a
//! connected server, and a [`GovernedClient`] that shows a role only the tools it may call and
//! refuses every other call before it is sent. (Spawning and supervising a server process is
//! the command line's job, not this library's.) With the feature `rmcp-server`,
//! `GovernedServer` does the same on the server side: it wraps any rmcp `ServerHandler` and
//! shows each caller (its role resolved per request: `FixedRole` for stdio, `BearerRoles` for
//! Streamable HTTP) only the tools it may call, refuses the others and audits every call.
//!
//! The conversions apply this crate's rules, not rmcp's defaults: a server's annotations count
//! only when the [`Server`](crate::Server) is trusted, and a read-only tool is never destructive (rmcp's
//! `ToolAnnotations::is_destructive` says `true` for a read-only tool that has no
//! `destructiveHint`).
//!
//! ```
//! use capability::rmcp::{manifest_from_rmcp, to_rmcp_tool};
//! use capability::{CapabilityManifest, Server};
//!
//! // A tool as an MCP server lists it.
//! let tool: rmcp::model::Tool = serde_json::from_value(serde_json::json!({
//!     "name": "list_pods",
//!     "inputSchema": { "type": "object" },
//!     "annotations": { "readOnlyHint": true }
//! }))?;
//! assert!(tool.annotations.as_ref().is_some_and(|a| a.is_destructive()), "rmcp's default");
//!
//! let manifest = manifest_from_rmcp(&tool, &Server::trusted("k8s"))?;
//! assert!(manifest.read_only() && !manifest.destructive());
//! assert_eq!(manifest.provider(), Some("k8s"));
//!
//! // And back, with all four effective hints spelled out.
//! let annotations = to_rmcp_tool(&manifest).annotations.expect("always set");
//! assert_eq!(annotations.destructive_hint, Some(false));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The governed client wraps a connected rmcp client (over any transport; [`connect_client`]
//! starts one that speaks both protocol generations):
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use capability::rmcp::{GovernedClient, GovernedError, connect_client};
//! use capability::{Policy, Server};
//! use capability::mcp::Lockfile;
//! use rmcp::model::CallToolRequestParams;
//!
//! # async fn example(
//! #     transport: tokio::io::DuplexStream,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! let policy = Arc::new(Policy::from_toml_file("policy.toml")?);
//! let lock = Lockfile::load("capability.lock")?;
//! // Keep `running` alive: dropping it closes the connection.
//! let running = connect_client(transport).await?;
//! let client = GovernedClient::connect(
//!     running.peer().clone(),
//!     Server::untrusted("everything"),
//!     policy,
//!     "monitor",
//!     lock.as_ref(),
//! )
//! .await?;
//! for tool in client.visible_tools() {
//!     println!("shown to the model: {}", tool.name);
//! }
//! for hidden in client.hidden() {
//!     println!("hidden: {hidden}");
//! }
//! match client.call_tool(CallToolRequestParams::new("echo")).await {
//!     Ok(result) => println!("{:?}", result.content),
//!     Err(GovernedError::Denied { tool, reasons }) => println!("`{tool}` refused: {reasons:?}"),
//!     Err(other) => return Err(other.into()),
//! }
//! # Ok(())
//! # }
//! ```

mod client;
mod connect;
mod convert;
#[cfg(feature = "rmcp-server")]
mod server;
pub mod traced;

pub use crate::visibility::{HiddenTool, WithheldReason};
pub use client::{GovernedClient, GovernedError, SharedDecider};
pub use connect::{ListError, connect_client, list_tools};
pub use convert::{manifest_from_rmcp, to_rmcp_annotations, to_rmcp_tool, tool_json};
#[cfg(feature = "rmcp-server")]
pub use server::{
    BearerRoles, ByTable, FixedRole, GovernedServer, REFUSED_CODE, RoleResolver, TokenHashError,
    ToolListings, bearer_token, http_parts, not_found, www_authenticate,
};
