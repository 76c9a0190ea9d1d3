//! The governed client: a caller is shown only the tools it may call, and every other call is
//! refused before anything reaches the server. What it is shown is decided by
//! [`Visibility::of`], the one visibility function.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use ::rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use ::rmcp::{Peer, RoleClient, ServiceError};
use serde_json::Value;

use capability_core::authz::{Authorize, Policy};
use capability_core::manifest::{CapabilityManifest, ManifestError};

use crate::lock::Lockfile;
use crate::server::Server;
use crate::visibility::{HiddenTool, Visibility, WithheldReason, write_reasons};

use super::connect::{ListError, list_tools};
use super::convert::tool_json;

/// A decider the governed client can keep and share: any [`Authorize`] that is `Send + Sync`.
pub type SharedDecider = Arc<dyn Authorize + Send + Sync>;

/// What went wrong with a [`GovernedClient`].
#[derive(Debug)]
#[non_exhaustive]
pub enum GovernedError {
    /// The role is not in the policy. An unknown role is refused, never defaulted to another.
    UnknownRole {
        /// The role asked for.
        role: String,
    },
    /// An MCP request failed: the transport closed, the server answered with an error, ...
    Service {
        /// The request: `tools/list`, or ``tools/call `name` ``.
        request: String,
        /// rmcp's error.
        error: ServiceError,
    },
    /// The server listed something else than a valid tool list: a cursor loop, a result that
    /// is not a tool list.
    Listing {
        /// What was wrong.
        message: String,
    },
    /// The server listed a tool that is not a valid MCP tool; the error names it.
    MalformedTool(ManifestError),
    /// The call was refused and nothing was sent to the server: the tool is unknown, hidden
    /// (drift, a duplicate name) or denied to the role.
    Denied {
        /// The tool, as the call named it.
        tool: String,
        /// Every reason.
        reasons: Vec<WithheldReason>,
    },
}

impl fmt::Display for GovernedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GovernedError::UnknownRole { role } => {
                write!(f, "role `{role}` is not in the policy")
            }
            GovernedError::Service { request, error } => write!(f, "`{request}` failed: {error}"),
            GovernedError::Listing { message } => write!(f, "`tools/list` failed: {message}"),
            GovernedError::MalformedTool(error) => {
                write!(f, "the server listed an invalid tool: {error}")
            }
            GovernedError::Denied { tool, reasons } => {
                write!(f, "call of `{tool}` refused (nothing was sent): ")?;
                write_reasons(f, reasons)
            }
        }
    }
}

impl std::error::Error for GovernedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GovernedError::Service { error, .. } => Some(error),
            GovernedError::MalformedTool(error) => Some(error),
            _ => None,
        }
    }
}

impl From<ListError> for GovernedError {
    fn from(failure: ListError) -> Self {
        match failure {
            ListError::Service(error) => GovernedError::Service {
                request: "tools/list".to_owned(),
                error,
            },
            ListError::Malformed(error) => GovernedError::MalformedTool(error),
            ListError::Answer(message) => GovernedError::Listing { message },
        }
    }
}

/// Where a listed tool stands for the caller.
#[derive(Clone, Copy, Debug)]
enum Access {
    Visible,
    /// Position in `hidden`.
    Hidden(usize),
}

/// An rmcp client that shows a caller only the tools it may call, and refuses every other call
/// before anything reaches the server.
///
/// [`connect_with`](Self::connect_with) lists every tool of the server once (all pages) and
/// decides with [`Visibility::of`] what the caller (any [`Authorize`]: a role of a policy, an
/// authority grant, ...) is shown; [`call_tool`](Self::call_tool) authorizes each call with the
/// same decider first. [`connect`](Self::connect) does the same for a role of a [`Policy`]. The
/// tool list is not refreshed: after the server announces a change, connect again.
///
/// The [`Server`] is the operator's: its name selects policy patterns, operator assertions and
/// lockfile pins, so take it from your own configuration, never from the server's handshake
/// (`serverInfo.name`), which any server can set to a name you trust.
#[derive(Clone)]
pub struct GovernedClient {
    peer: Peer<RoleClient>,
    server: Server,
    decider: SharedDecider,
    visible: Vec<Tool>,
    hidden: Vec<HiddenTool>,
    /// The first manifest per listed name.
    manifests: HashMap<String, CapabilityManifest>,
    access: HashMap<String, Access>,
}

impl fmt::Debug for GovernedClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let visible: Vec<&str> = self.visible.iter().map(|t| t.name.as_ref()).collect();
        f.debug_struct("GovernedClient")
            .field("server", &self.server)
            .field("principal", &self.decider.principal())
            .field("visible", &visible)
            .field("hidden", &self.hidden)
            .finish_non_exhaustive()
    }
}

impl GovernedClient {
    /// [`connect_with`](Self::connect_with) for a role of a policy: the decider is the role's
    /// grant ([`Policy::context`]) for the session `mcp:<server name>`.
    ///
    /// A role the policy does not have is an error ([`GovernedError::UnknownRole`]), checked
    /// before anything is sent; it is never defaulted to another role.
    pub async fn connect(
        peer: Peer<RoleClient>,
        server: Server,
        policy: Arc<Policy>,
        role: impl Into<String>,
        lock: Option<&Lockfile>,
    ) -> Result<GovernedClient, GovernedError> {
        let role = role.into();
        let Some(context) = policy.context(&role, format!("mcp:{}", server.name())) else {
            return Err(GovernedError::UnknownRole { role });
        };
        GovernedClient::connect_with(peer, server, Arc::new(context), lock).await
    }

    /// Lists every tool of the server behind `peer` (following `nextCursor` to the last page)
    /// and decides with [`Visibility::of`] what `decider` is shown:
    ///
    /// - Without a lockfile, each manifest is read with the server's trust. With one, a tool
    ///   whose descriptor (and recorded flags) match its pin has its claims believed, as pinned
    ///   claims; new, renamed and changed tools are hidden with a [`WithheldReason::Drift`]. A
    ///   server the lockfile does not know has no approved tool, so the caller sees nothing of it.
    /// - Tools that share a name are all hidden ([`WithheldReason::DuplicateName`]).
    /// - A tool the decider denies is hidden with the decision's reasons.
    ///
    /// A tool that is not a valid MCP tool fails the whole connection with
    /// [`GovernedError::MalformedTool`], which names it. A server whose handshake declared no
    /// `tools` capability has no tools, and is not asked.
    pub async fn connect_with(
        peer: Peer<RoleClient>,
        server: Server,
        decider: SharedDecider,
        lock: Option<&Lockfile>,
    ) -> Result<GovernedClient, GovernedError> {
        let declares_tools = peer
            .peer_info()
            .is_none_or(|info| info.capabilities.tools.is_some());
        let tools = if declares_tools {
            list_tools(&peer, &server).await?
        } else {
            Vec::new()
        };
        let values = tools
            .iter()
            .map(tool_json)
            .collect::<Result<Vec<Value>, ManifestError>>()
            .map_err(GovernedError::MalformedTool)?;
        let seen = Visibility::of(&server, &values, lock, &*decider)
            .map_err(GovernedError::MalformedTool)?;

        // `seen.hidden()` lists the hidden tools in the server's order, as this loop meets them.
        let hidden = seen.hidden();
        let mut visible = Vec::new();
        let mut hidden_so_far = 0;
        let mut access = HashMap::new();
        let mut manifests = HashMap::new();
        for (tool, listed) in tools.into_iter().zip(seen.tools()) {
            let name = listed.manifest().name().to_owned();
            if listed.is_visible() {
                // Visible means the name is listed once, so nothing else claims it.
                access.insert(name.clone(), Access::Visible);
                visible.push(tool);
            } else {
                access
                    .entry(name.clone())
                    .or_insert(Access::Hidden(hidden_so_far));
                hidden_so_far += 1;
            }
            manifests
                .entry(name)
                .or_insert_with(|| listed.manifest().clone());
        }
        Ok(GovernedClient {
            peer,
            server,
            decider,
            visible,
            hidden,
            manifests,
            access,
        })
    }

    /// The tools the caller may be shown (give these to the model), as the server listed them,
    /// in the server's order.
    pub fn visible_tools(&self) -> &[Tool] {
        &self.visible
    }

    /// The tools the server lists that the caller is not shown, in the server's order, each
    /// with every reason.
    pub fn hidden(&self) -> &[HiddenTool] {
        &self.hidden
    }

    /// The manifest of a tool the server lists, visible or hidden (of the first one, when
    /// several share the name); `None` for a name it does not list.
    pub fn manifest(&self, name: &str) -> Option<&CapabilityManifest> {
        self.manifests.get(name)
    }

    /// Whether the caller is shown the tool.
    pub fn is_visible(&self, name: &str) -> bool {
        matches!(self.access.get(name), Some(Access::Visible))
    }

    /// Who is asking: the role, or the grant's holder ([`Authorize::principal`]).
    pub fn role(&self) -> &str {
        self.decider.principal()
    }

    /// The decider that decides what is shown and what may be called.
    pub fn decider(&self) -> &(dyn Authorize + Send + Sync) {
        &*self.decider
    }

    /// The server, as given to [`connect`](Self::connect).
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Calls a tool, after authorizing the call with the decider. A tool the server does not
    /// list, one that is hidden (drift, a duplicate name) and one the decider denies give
    /// [`GovernedError::Denied`], and nothing is sent to the server.
    pub async fn call_tool(
        &self,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, GovernedError> {
        let name = params.name.as_ref();
        let denied = |reasons| GovernedError::Denied {
            tool: name.to_owned(),
            reasons,
        };
        let manifest = match (self.access.get(name), self.manifests.get(name)) {
            (Some(Access::Visible), Some(manifest)) => manifest,
            (Some(Access::Hidden(i)), _) => {
                let reasons = self
                    .hidden
                    .get(*i)
                    .map(|h| h.reasons().to_vec())
                    .unwrap_or_default();
                return Err(denied(reasons));
            }
            _ => return Err(denied(vec![WithheldReason::NotListed])),
        };
        let decision = self.decider.decide(manifest);
        if !decision.is_allowed() {
            let reasons = decision
                .into_reasons()
                .into_iter()
                .map(WithheldReason::Policy)
                .collect();
            return Err(denied(reasons));
        }
        let request = format!("tools/call `{name}`");
        self.peer
            .call_tool(params)
            .await
            .map_err(|error| GovernedError::Service { request, error })
    }
}
