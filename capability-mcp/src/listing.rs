//! A server's tool list read once: what does not depend on who asks (manifests, drift against
//! the lockfile, duplicate names), with a change token, decided per caller afterwards.
//!
//! [`Listing::read`] does the work that is the same for every caller; [`Listing::for_caller`]
//! adds one caller's decision and gives the [`Visibility`] (the one visibility function:
//! [`Visibility::of`] is exactly these two steps). A governed edge reads a listing when the
//! server's list changes, never per call: a call looks its tool up by name
//! ([`Listing::tool`]) and is decided once, by the audited dispatch.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use capability_core::authz::Authorize;
use capability_core::manifest::{CapabilityManifest, ManifestError};
use serde_json::Value;

use crate::lock::Lockfile;
use crate::server::Server;
use crate::visibility::{ListedTool, Visibility};

/// The change tokens of listings: each listing read gets the next.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// One server's tool list, read once (see the module docs).
///
/// ```
/// use capability::authz::{Ceiling, ToolContext};
/// use capability::mcp::{Listing, WithheldReason};
/// use capability::Server;
/// use serde_json::json;
///
/// let tools = vec![
///     json!({"name": "peek", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}),
///     json!({"name": "twin", "inputSchema": {"type": "object"}}),
///     json!({"name": "twin", "inputSchema": {"type": "object"}}),
/// ];
/// let listing = Listing::read(&Server::trusted("notes"), &tools, None)?;
/// assert_eq!(listing.tool("twin").unwrap().reasons(), [WithheldReason::DuplicateName]);
/// assert!(listing.tool("peek").unwrap().is_visible(), "nobody has decided yet");
/// assert!(listing.tool("gone").is_none());
///
/// let reader = ToolContext::new("reader", "s-1", Ceiling::ReadOnly);
/// let seen = listing.for_caller(&reader);
/// let shown: Vec<&str> = seen.visible().map(|m| m.name()).collect();
/// assert_eq!(shown, ["peek"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Listing {
    /// Every tool, visible or hidden for a reason that does not depend on the caller.
    seen: Visibility,
    /// Name to the first tool of that name.
    by_name: HashMap<String, usize>,
    token: u64,
    server: String,
}

impl Listing {
    /// Reads `server`'s list: each tool's manifest (claims believed as far as the server is
    /// trusted, or as pinned claims when it matches its pin), drift against `lock`, duplicate
    /// names. A tool that is not a valid MCP tool, or a server name that is not a provider
    /// name, is an error naming it.
    pub fn read(
        server: &Server,
        tools: &[Value],
        lock: Option<&Lockfile>,
    ) -> Result<Listing, ManifestError> {
        let seen = Visibility::undecided(server, tools, lock)?;
        let mut by_name = HashMap::with_capacity(seen.tools().len());
        for (i, tool) in seen.tools().iter().enumerate() {
            by_name
                .entry(tool.manifest().name().to_owned())
                .or_insert(i);
        }
        Ok(Listing {
            seen,
            by_name,
            token: NEXT_TOKEN.fetch_add(1, Ordering::Relaxed),
            server: server.name().to_owned(),
        })
    }

    /// What `decider` may see: each tool with the reasons of the listing and the decider's.
    pub fn for_caller(&self, decider: &(impl Authorize + ?Sized)) -> Visibility {
        self.seen.for_decider(decider)
    }

    /// The tool named `name` (the first, when the server lists the name twice), with the
    /// reasons it is withheld from everyone (drift, a duplicate name); `None` when the server
    /// does not list it.
    pub fn tool(&self, name: &str) -> Option<&ListedTool> {
        self.by_name.get(name).map(|&i| &self.seen.tools()[i])
    }

    /// Every tool, in the server's order, with the reasons that do not depend on the caller.
    pub fn tools(&self) -> &[ListedTool] {
        self.seen.tools()
    }

    /// The manifests of the tools no caller-independent reason withholds.
    pub fn manifests(&self) -> impl Iterator<Item = &CapabilityManifest> {
        self.seen.visible()
    }

    /// The server's name (the operator's).
    pub fn server(&self) -> &str {
        &self.server
    }

    /// This listing's change token: listings read at different times have different tokens,
    /// so a front can tell that the list it serves was read again.
    pub fn token(&self) -> u64 {
        self.token
    }
}
