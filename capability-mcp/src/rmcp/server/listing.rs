//! The governed server's tool listing: the inner handler's tools read once into a [`Listing`]
//! (manifests, drift against the lockfile, duplicate names), kept until the tools change.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ::rmcp::ErrorData;
use ::rmcp::model::Tool;

use crate::listing::Listing;
use crate::lock::Lockfile;
use crate::rmcp::convert::tool_json;
use crate::server::Server;

/// The tools of a listing read once, in the inner handler's order, with their listing.
#[derive(Debug)]
pub(super) struct ToolListing {
    pub(super) tools: Vec<Tool>,
    pub(super) listing: Listing,
}

impl ToolListing {
    fn read(server: &Server, lock: Option<&Lockfile>, tools: Vec<Tool>) -> Result<Self, ErrorData> {
        let invalid = |error: capability_core::manifest::ManifestError| {
            ErrorData::internal_error(format!("the server lists an invalid tool: {error}"), None)
        };
        let json = tools
            .iter()
            .map(tool_json)
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let listing = Listing::read(server, &json, lock).map_err(invalid)?;
        Ok(ToolListing { tools, listing })
    }
}

/// The tool listing a [`GovernedServer`](super::GovernedServer) serves: read from the inner
/// handler's `tools/list` on first use, and again after [`invalidate`](Self::invalidate); or set
/// by whoever knows the tools first ([`set`](Self::set): a proxy that listed its server). Every
/// clone is the same listing.
///
/// Nothing per call copies or compares a tool list: a call looks its tool up in the listing.
/// So when your handler's tools change, call `invalidate` (where you send
/// `notifications/tools/list_changed`): until then, a new tool is refused as not listed, and a
/// changed one is decided on the manifest listed before.
#[derive(Clone)]
pub struct ToolListings {
    current: Arc<Mutex<Option<Arc<ToolListing>>>>,
    server: Server,
    lock: Option<Arc<Lockfile>>,
}

impl std::fmt::Debug for ToolListings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolListings")
            .field("server", &self.server)
            .field("read", &self.guard().is_some())
            .finish_non_exhaustive()
    }
}

impl ToolListings {
    /// An empty listing of `server`'s tools, reviewed against `lock` when there is one; read
    /// on first use, or [`set`](Self::set).
    pub fn new(server: Server, lock: Option<Arc<Lockfile>>) -> Self {
        ToolListings {
            current: Arc::default(),
            server,
            lock,
        }
    }

    fn guard(&self) -> MutexGuard<'_, Option<Arc<ToolListing>>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The listing now, if one was read.
    pub(super) fn get(&self) -> Option<Arc<ToolListing>> {
        self.guard().clone()
    }

    /// Reads `tools` (reviewed against the lockfile) as the listing served from now on.
    /// `Ok(true)` when they differ from the listing before (the clients should be told),
    /// `Ok(false)` when they are the same tools; an error for a tool that is not a valid MCP
    /// tool (the listing before stays).
    pub fn set(&self, tools: Vec<Tool>) -> Result<bool, ErrorData> {
        if let Some(now) = self.get()
            && now.tools == tools
        {
            return Ok(false);
        }
        let listing = Arc::new(ToolListing::read(
            &self.server,
            self.lock.as_deref(),
            tools,
        )?);
        *self.guard() = Some(listing);
        Ok(true)
    }

    /// The tools as last set or read (all of them, governed or not), for a handler that
    /// answers `tools/list` from what its server listed.
    pub fn tools(&self) -> Vec<Tool> {
        self.get().map(|l| l.tools.clone()).unwrap_or_default()
    }

    /// The manifest of the tool `name` as listed, when a listing was read and has it (drifted
    /// or duplicate tools included: this says what the tool is, not whether it may be used).
    /// For an edge in front of the server that wants a tool's required scopes before the
    /// request reaches it.
    pub fn manifest(&self, name: &str) -> Option<capability_core::manifest::CapabilityManifest> {
        let listing = self.get()?;
        listing.listing.tool(name).map(|t| t.manifest().clone())
    }

    /// The server whose tools these are.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Forgets the listing: the next request reads the inner handler's tools again.
    pub fn invalidate(&self) {
        *self.guard() = None;
    }

    /// The listing's change token (see [`Listing::token`]), if one was read.
    pub fn token(&self) -> Option<u64> {
        self.get().map(|l| l.listing.token())
    }
}
