//! The MCP side of `capability`: tools that arrive from MCP servers, and what a caller may see of
//! them.
//!
//! An MCP server lists its tools at run time, so the compiler never sees them. This crate reads
//! them into [`CapabilityManifest`]s (a server's annotations are claims, believed only as far as
//! the operator trusts the server), writes manifests back as MCP `Tool` objects, pins descriptors
//! in a lockfile so a changed tool is noticed, and decides with one function what a caller may
//! see of a server. With the `rmcp` feature it converts to and from rmcp's model and offers a
//! governed client; with `rmcp-server`, a governed server that wraps any rmcp `ServerHandler`.
//!
//! Use it through the facade, `capability::mcp` (and `capability::rmcp`). It has no process
//! supervision of its own: spawning servers is the command line's job.
//!
//! - [`server`]: `Server` and `Trust`, the operator's name for a server and how far it is believed.
//! - [`import`] and [`export`]: MCP `Tool` objects to and from manifests; [`hash`]: the
//!   descriptor hash of an MCP tool.
//! - [`lock`]: the lockfile and drift.
//! - [`listing`]: a server's tool list read once (manifests, drift, duplicate names) with a
//!   change token, decided per caller; [`methods`]: every MCP method and what the governed
//!   edge does with it, in one table.
//! - [`scan`]: what tool descriptors *say*, reviewed offline (hidden Unicode, injection
//!   phrases, files of secrets, encoded payloads, read-only claims that contradict the name,
//!   credentials, references across servers); a hard finding withholds the tool.
//! - [`visibility`]: what a caller may see of a server, decided by one function,
//!   [`Visibility::of`]: drift against the lock, then duplicate names, then the decision of any
//!   [`Authorize`](capability_core::authz::Authorize). The governed client and the command line's
//!   `check` both use it.
//! - [`rmcp`] (feature `rmcp`): conversions, listing, the governed client; with feature
//!   `rmcp-server`, the governed server (`GovernedServer`).
//! - Every exported tool carries its required scopes and descriptor hash in `_meta` under
//!   [`export::MANIFEST_META_KEY`] (`dev.capability/manifest`); [`import`] reads them back as
//!   claims (scopes from any server, as a restriction; the hash never as a pin).
//!
//! A server's name is the operator's, never the server's own: it selects policy patterns,
//! operator assertions and lockfile pins, so a server that calls itself by a trusted name
//! (`serverInfo.name` in its handshake) must not get them. Build a [`Server`] from your own
//! configuration.

//!
#![doc = include_str!("../../docs/mcp.md")]
#![forbid(unsafe_code)]

pub mod export;
pub mod fleet;
pub mod hash;
pub mod import;
pub mod listing;
pub mod lock;
pub mod methods;
#[cfg(feature = "rmcp")]
pub mod rmcp;
pub mod scan;
pub mod server;
pub mod telemetry;
pub mod visibility;

pub use fleet::{Collision, Fleet, FleetError, FleetTool, FleetView, Route};
pub use hash::{MCP_DESCRIPTOR_FIELDS, mcp_descriptor_hash};
pub use listing::Listing;
pub use lock::{
    DriftStatus, LOCKFILE_VERSION, LockError, LockedTool, Lockfile, Part, PartHashes, PinError,
    Repin, RepinCheck, Review, ReviewedTool,
};
pub use methods::{Destination, Direction, Handling, METHODS, McpMethod, REVISIONS, method};
pub use server::{Server, Trust};
pub use visibility::{HiddenTool, ListedTool, Visibility, WithheldReason};

#[cfg(feature = "schemars")]
pub use export::mcp_tool;

use capability_core::manifest::{CapabilityManifest, ManifestError};
use serde_json::Value;

/// MCP `Tool` objects to and from [`CapabilityManifest`]: bring it into scope to call
/// `CapabilityManifest::from_mcp_tool` and `manifest.to_mcp_tool()`.
///
/// ```
/// use capability::mcp::{McpManifest, Server};
/// use capability::CapabilityManifest;
/// use serde_json::json;
///
/// let tool = json!({"name": "echo", "inputSchema": {"type": "object"},
///                   "annotations": {"readOnlyHint": true}});
/// let m = CapabilityManifest::from_mcp_tool(&tool, &Server::untrusted("everything"))?;
/// assert!(!m.read_only(), "an untrusted server's claim is not believed");
/// assert_eq!(m.to_mcp_tool()["annotations"]["readOnlyHint"], false);
/// # Ok::<(), capability::ManifestError>(())
/// ```
pub trait McpManifest: Sized {
    /// The manifest of one tool of a server's `tools/list`; see [`import::from_mcp_tool`].
    fn from_mcp_tool(tool: &Value, server: &Server) -> Result<Self, ManifestError>;

    /// The MCP `Tool` object of this manifest; see [`export::to_mcp_tool`].
    fn to_mcp_tool(&self) -> Value;

    /// The MCP `Tool` object with this input schema; see [`export::to_mcp_tool_with_schema`].
    fn to_mcp_tool_with_schema(&self, input_schema: Value) -> Value;
}

impl McpManifest for CapabilityManifest {
    fn from_mcp_tool(tool: &Value, server: &Server) -> Result<Self, ManifestError> {
        import::from_mcp_tool(tool, server)
    }

    fn to_mcp_tool(&self) -> Value {
        export::to_mcp_tool(self)
    }

    fn to_mcp_tool_with_schema(&self, input_schema: Value) -> Value {
        export::to_mcp_tool_with_schema(self, input_schema)
    }
}
