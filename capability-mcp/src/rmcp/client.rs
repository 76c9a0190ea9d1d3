//! The governed client: a role is shown only the tools it may call, and every other call is
//! refused before anything reaches the server.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use ::rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use ::rmcp::{Peer, RoleClient, ServiceError};
use serde_json::Value;

use capability_core::authz::{DenyReason, Policy};
use capability_core::manifest::{CapabilityManifest, ManifestError};

use crate::import::from_mcp_tool;
use crate::lock::{DriftStatus, Lockfile};
use crate::server::Server;

use super::connect::{ListError, list_tools};
use super::convert::tool_json;

/// Why a tool is withheld from a role: hidden from its tool list, and its calls refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WithheldReason {
    /// The policy denies it to the role ([`Policy::decide`]).
    Policy(DenyReason),
    /// A lockfile is in use and the tool does not match an approved pin: it is new, renamed,
    /// or its descriptor changed. It stays hidden until it is pinned again.
    Drift(DriftStatus),
    /// The server lists more than one tool with this name, so a call could reach either.
    DuplicateName,
    /// The server does not list a tool with this name.
    NotListed,
}

impl fmt::Display for WithheldReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WithheldReason::Policy(reason) => write!(f, "{reason}"),
            WithheldReason::Drift(DriftStatus::Changed { parts }) => {
                let parts: Vec<&str> = parts.iter().map(|p| p.as_str()).collect();
                write!(
                    f,
                    "its descriptor changed since it was pinned ({}); pin it again to approve it",
                    parts.join(", ")
                )
            }
            WithheldReason::Drift(DriftStatus::Added) => {
                f.write_str("it is not in the lockfile; pin it to approve it")
            }
            WithheldReason::Drift(DriftStatus::Renamed { from }) => write!(
                f,
                "it is the pinned tool `{from}` under a new name; pin it again to approve it"
            ),
            WithheldReason::Drift(status) => write!(f, "lockfile: {status}"),
            WithheldReason::DuplicateName => {
                f.write_str("the server lists more than one tool with this name")
            }
            WithheldReason::NotListed => f.write_str("the server does not list it"),
        }
    }
}

/// A tool the server lists that the role is not shown, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HiddenTool {
    name: String,
    reasons: Vec<WithheldReason>,
}

impl HiddenTool {
    /// The tool's name, as the server lists it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every reason it is withheld.
    pub fn reasons(&self) -> &[WithheldReason] {
        &self.reasons
    }
}

impl fmt::Display for HiddenTool {
    /// `name: reason; reason`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.name)?;
        write_reasons(f, &self.reasons)
    }
}

fn write_reasons(f: &mut fmt::Formatter<'_>, reasons: &[WithheldReason]) -> fmt::Result {
    for (i, reason) in reasons.iter().enumerate() {
        if i > 0 {
            f.write_str("; ")?;
        }
        write!(f, "{reason}")?;
    }
    Ok(())
}

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

/// Where a listed tool stands for the role.
#[derive(Clone, Copy, Debug)]
enum Access {
    Visible,
    /// Position in `hidden`.
    Hidden(usize),
}

/// An rmcp client that shows a role only the tools it may call, and refuses every other call
/// before anything reaches the server.
///
/// [`connect`](Self::connect) lists every tool of the server once (all pages) and decides, with
/// the policy's one decision function, what the role is shown; [`call_tool`](Self::call_tool)
/// authorizes each call with the same decision first. The tool list is not refreshed: after the
/// server announces a change, connect again.
#[derive(Clone)]
pub struct GovernedClient {
    peer: Peer<RoleClient>,
    server: Server,
    policy: Arc<Policy>,
    role: String,
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
            .field("role", &self.role)
            .field("visible", &visible)
            .field("hidden", &self.hidden)
            .finish_non_exhaustive()
    }
}

impl GovernedClient {
    /// Lists every tool of the server behind `peer` (following `nextCursor` to the last page),
    /// builds each tool's manifest and decides what `role` is shown.
    ///
    /// - A role the policy does not have is an error ([`GovernedError::UnknownRole`]), checked
    ///   before anything is sent; it is never defaulted to another role.
    /// - A tool that is not a valid MCP tool fails the whole connection with
    ///   [`GovernedError::MalformedTool`], which names it.
    /// - Without a lockfile, each manifest is read with the server's trust
    ///   ([`manifest_from_rmcp`](super::manifest_from_rmcp)). With one, the live list is reviewed against it
    ///   ([`Lockfile::review`]): only tools whose descriptor matches their pin are candidates
    ///   (their claims are then believed, as pinned claims); new, renamed and changed tools are
    ///   hidden with a [`WithheldReason::Drift`]. A server the lockfile does not know has no
    ///   approved tool, so the role sees nothing of it.
    /// - Tools that share a name are all hidden ([`WithheldReason::DuplicateName`]).
    /// - Of the candidates, the role is shown [`Policy::visible_tools`]; the others are hidden
    ///   with the decision's reasons.
    ///
    /// A server whose handshake declared no `tools` capability has no tools, and is not asked.
    pub async fn connect(
        peer: Peer<RoleClient>,
        server: Server,
        policy: Arc<Policy>,
        role: impl Into<String>,
        lock: Option<&Lockfile>,
    ) -> Result<GovernedClient, GovernedError> {
        let role = role.into();
        if !policy.roles().any(|known| known == role) {
            return Err(GovernedError::UnknownRole { role });
        }
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

        // Each tool's manifest, and its drift when a lockfile is in use.
        let mut manifests = Vec::with_capacity(tools.len());
        let mut drift = Vec::with_capacity(tools.len());
        match lock {
            Some(lock) => {
                let review = lock
                    .review(&server, &values)
                    .map_err(GovernedError::MalformedTool)?;
                for reviewed in review.tools() {
                    manifests.push(reviewed.manifest().clone());
                    drift.push(
                        (*reviewed.status() != DriftStatus::Unchanged)
                            .then(|| reviewed.status().clone()),
                    );
                }
            }
            None => {
                for value in &values {
                    manifests
                        .push(from_mcp_tool(value, &server).map_err(GovernedError::MalformedTool)?);
                    drift.push(None);
                }
            }
        }

        let duplicate: Vec<bool> = {
            let mut count: HashMap<&str, usize> = HashMap::new();
            for manifest in &manifests {
                *count.entry(manifest.name()).or_default() += 1;
            }
            manifests
                .iter()
                .map(|m| count.get(m.name()).is_some_and(|n| *n > 1))
                .collect()
        };

        // The candidates, and which of them the policy shows the role (`visible_tools` keeps
        // their order and returns references into the slice it is given).
        let candidates: Vec<usize> = (0..manifests.len())
            .filter(|&i| drift[i].is_none() && !duplicate[i])
            .collect();
        let candidate_manifests: Vec<CapabilityManifest> =
            candidates.iter().map(|&i| manifests[i].clone()).collect();
        let shown = policy.visible_tools(&role, &candidate_manifests);
        let mut is_shown = vec![false; manifests.len()];
        let mut next_shown = shown.iter().peekable();
        for (position, &i) in candidates.iter().enumerate() {
            if next_shown
                .peek()
                .is_some_and(|m| std::ptr::eq(**m, &candidate_manifests[position]))
            {
                is_shown[i] = true;
                next_shown.next();
            }
        }

        let mut visible = Vec::new();
        let mut hidden = Vec::new();
        let mut access = HashMap::new();
        let mut by_name = HashMap::new();
        for (i, (tool, manifest)) in tools.into_iter().zip(manifests).enumerate() {
            let name = manifest.name().to_owned();
            if is_shown[i] {
                access.insert(name.clone(), Access::Visible);
                visible.push(tool);
            } else {
                let reasons = if duplicate[i] {
                    vec![WithheldReason::DuplicateName]
                } else if let Some(status) = drift[i].take() {
                    vec![WithheldReason::Drift(status)]
                } else {
                    policy
                        .decide(&role, &manifest)
                        .reasons()
                        .iter()
                        .cloned()
                        .map(WithheldReason::Policy)
                        .collect()
                };
                access
                    .entry(name.clone())
                    .or_insert(Access::Hidden(hidden.len()));
                hidden.push(HiddenTool {
                    name: name.clone(),
                    reasons,
                });
            }
            by_name.entry(name).or_insert(manifest);
        }
        Ok(GovernedClient {
            peer,
            server,
            policy,
            role,
            visible,
            hidden,
            manifests: by_name,
            access,
        })
    }

    /// The tools the role may be shown (give these to the model), as the server listed them,
    /// in the server's order.
    pub fn visible_tools(&self) -> &[Tool] {
        &self.visible
    }

    /// The tools the server lists that the role is not shown, in the server's order, each with
    /// every reason.
    pub fn hidden(&self) -> &[HiddenTool] {
        &self.hidden
    }

    /// The manifest of a tool the server lists, visible or hidden (of the first one, when
    /// several share the name); `None` for a name it does not list.
    pub fn manifest(&self, name: &str) -> Option<&CapabilityManifest> {
        self.manifests.get(name)
    }

    /// Whether the role is shown the tool.
    pub fn is_visible(&self, name: &str) -> bool {
        matches!(self.access.get(name), Some(Access::Visible))
    }

    /// The role.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The server, as given to [`connect`](Self::connect).
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Calls a tool, after authorizing the call with [`Policy::decide`] for the role. A tool
    /// the server does not list, one that is hidden (drift, a duplicate name) and one the
    /// policy denies give [`GovernedError::Denied`], and nothing is sent to the server.
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
                    .map(|h| h.reasons.clone())
                    .unwrap_or_default();
                return Err(denied(reasons));
            }
            _ => return Err(denied(vec![WithheldReason::NotListed])),
        };
        let decision = self.policy.decide(&self.role, manifest);
        if !decision.is_allowed() {
            let reasons = decision
                .reasons()
                .iter()
                .cloned()
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
