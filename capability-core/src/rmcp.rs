//! MCP through [rmcp](https://docs.rs/rmcp) (feature `rmcp`): conversions between
//! [`CapabilityManifest`] and `rmcp::model::Tool`, a [`GovernedClient`] that shows a role only
//! the tools it may call and refuses every other call before it is sent, and
//! [`list_server_tools`], which lists a live stdio server's tools.
//!
//! The conversions apply this crate's rules, not rmcp's defaults: a server's annotations count
//! only when the [`Server`] is trusted, and a read-only tool is never destructive (rmcp's
//! [`ToolAnnotations::is_destructive`] says `true` for a read-only tool that has no
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
//! starts one with the same protocol negotiation as [`list_server_tools`]):
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use capability::rmcp::{GovernedClient, GovernedError, connect_client};
//! use capability::{Lockfile, Policy, Server};
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

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ::rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ClientRequest,
    CustomResult, Implementation, ListToolsRequest, PaginatedRequestParams, ProtocolVersion,
    ServerResult, Tool, ToolAnnotations,
};
use ::rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RunningService,
};
use ::rmcp::transport::IntoTransport;
use ::rmcp::{Peer, RoleClient, ServiceError};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};
use tokio::time::Instant;

use crate::{CapabilityManifest, DenyReason, DriftStatus, HintKind, Lockfile, ManifestError};
use crate::{Policy, Server};

// ---------------------------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------------------------

/// The manifest of a tool an rmcp client received, read exactly like
/// [`CapabilityManifest::from_mcp_tool`] reads the tool's JSON: annotations count only when
/// `server` is trusted, a read-only tool is never destructive, and the provider is the server's
/// name. A tool that breaks the MCP rules (a bad name, an input schema whose root is not an
/// object schema, ...) gives an error naming the tool and every bad field.
pub fn manifest_from_rmcp(
    tool: &Tool,
    server: &Server,
) -> Result<CapabilityManifest, ManifestError> {
    CapabilityManifest::from_mcp_tool(&tool_json(tool)?, server)
}

/// The tool as rmcp serializes it: the JSON its descriptor hash and manifest are computed from.
fn tool_json(tool: &Tool) -> Result<Value, ManifestError> {
    serde_json::to_value(tool).map_err(|error| {
        let mut problem = ManifestError::new(tool.name.as_ref());
        problem.push("(tool)", format!("cannot be written as JSON: {error}"));
        problem
    })
}

/// This tool as an rmcp `Tool`, for a server's `tools/list`: the same object as
/// [`CapabilityManifest::to_mcp_tool`] (name, title, description, the input schema
/// `{"type": "object"}`, and [`to_rmcp_annotations`]). It is built with rmcp's own constructors,
/// so it cannot fail.
pub fn to_rmcp_tool(manifest: &CapabilityManifest) -> Tool {
    let mut input_schema = serde_json::Map::new();
    input_schema.insert("type".to_owned(), Value::String("object".to_owned()));
    let description = manifest
        .description()
        .map(|text| Cow::Owned(text.to_owned()));
    let mut tool = Tool::new_with_raw(
        manifest.name().to_owned(),
        description,
        Arc::new(input_schema),
    );
    if let Some(title) = manifest.title() {
        tool = tool.with_title(title);
    }
    tool.with_annotations(to_rmcp_annotations(manifest))
}

/// The manifest's effective hints as rmcp annotations, all four set explicitly (so no client
/// falls back to its own defaults: a read-only tool says `destructiveHint: false`), with the
/// title when there is one.
pub fn to_rmcp_annotations(manifest: &CapabilityManifest) -> ToolAnnotations {
    let annotations = match manifest.title() {
        Some(title) => ToolAnnotations::with_title(title),
        None => ToolAnnotations::new(),
    };
    let hint = |kind: HintKind| manifest.hint(kind).effective();
    annotations
        .read_only(hint(HintKind::ReadOnly))
        .destructive(hint(HintKind::Destructive))
        .idempotent(hint(HintKind::Idempotent))
        .open_world(hint(HintKind::OpenWorld))
}

// ---------------------------------------------------------------------------------------------
// Connecting and listing
// ---------------------------------------------------------------------------------------------

/// The identity this crate's clients give servers: `capability` and the crate version.
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("capability", env!("CARGO_PKG_VERSION")),
    )
}

/// `server/discover` first (2026-07-28, else 2025-11-25 per request), and the `initialize`
/// handshake (2025-11-25; the server may answer with an older version) for a server that
/// rejects `server/discover` or leaves it unanswered for rmcp's 10 s probe.
fn client_lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// Starts an rmcp client on a transport with the negotiation [`list_server_tools`] uses, so a
/// server of either protocol generation works: `server/discover` (protocol 2026-07-28, or
/// 2025-11-25 with per-request metadata), falling back to the `initialize` handshake
/// (2025-11-25, or whatever older version the server answers with) when the server rejects
/// `server/discover`. A server that neither answers nor rejects `server/discover` is given
/// rmcp's 10 s probe before the fallback. The client calls itself `capability`.
///
/// Pass `running.peer().clone()` to [`GovernedClient::connect`], and keep `running`: dropping
/// it closes the connection.
pub async fn connect_client<T, E, A>(
    transport: T,
) -> Result<RunningService<RoleClient, ClientConfig>, ClientInitializeError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    client_config()
        .serve_with_lifecycle(transport, client_lifecycle())
        .await
}

/// At most this many `tools/list` pages are read; a server that keeps returning new cursors
/// beyond it is treated as broken.
const MAX_PAGES: usize = 10_000;

/// Why listing a server's tools failed.
enum ListFailure {
    /// The request failed (transport closed, error reply, ...).
    Service(ServiceError),
    /// A tool that is not a valid MCP tool.
    Malformed(ManifestError),
    /// Something else about the answer: a cursor loop, a result that is not a tool list.
    Answer(String),
}

/// Every tool of the server, following `nextCursor` to the last page, in the server's order.
/// A repeated cursor (a pagination loop) and a page rmcp cannot read are errors; for the
/// latter, the raw page is examined to name the bad tool. `server` names the provider when a
/// bad tool is checked against the manifest rules.
async fn list_every_tool(
    peer: &Peer<RoleClient>,
    server: &Server,
) -> Result<Vec<Tool>, ListFailure> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = HashSet::new();
    for _ in 0..MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        let page = match peer
            .send_request(request)
            .await
            .map_err(ListFailure::Service)?
        {
            ServerResult::ListToolsResult(page) => page,
            ServerResult::CustomResult(CustomResult(raw)) => return Err(diagnose(&raw, server)),
            _ => {
                return Err(ListFailure::Answer(
                    "the server answered with something other than a tool list".to_owned(),
                ));
            }
        };
        tools.extend(page.tools);
        match page.next_cursor {
            None => return Ok(tools),
            Some(next) => {
                if !seen.insert(next.clone()) {
                    return Err(ListFailure::Answer(format!(
                        "the server returned the cursor {next:?} twice (a pagination loop)"
                    )));
                }
                cursor = Some(next);
            }
        }
    }
    Err(ListFailure::Answer(format!(
        "the server still had more pages after {MAX_PAGES}"
    )))
}

/// Why rmcp could not read a `tools/list` page: the first tool it rejects, with every problem
/// the manifest rules find in it (or rmcp's own complaint when they find none).
fn diagnose(page: &Value, server: &Server) -> ListFailure {
    let Some(tools) = page.get("tools").and_then(Value::as_array) else {
        return ListFailure::Answer("the server answered without a `tools` array".to_owned());
    };
    for tool in tools {
        if let Err(rmcp_error) = serde_json::from_value::<Tool>(tool.clone()) {
            return ListFailure::Malformed(match CapabilityManifest::from_mcp_tool(tool, server) {
                Err(error) => error,
                Ok(manifest) => {
                    let mut error = ManifestError::new(manifest.name());
                    error.push("(tool)", format!("not a valid MCP tool: {rmcp_error}"));
                    error
                }
            });
        }
    }
    ListFailure::Answer(
        "the server's tool list is not a valid `tools/list` result (rmcp cannot read it)"
            .to_owned(),
    )
}

// ---------------------------------------------------------------------------------------------
// The governed client
// ---------------------------------------------------------------------------------------------

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

impl From<ListFailure> for GovernedError {
    fn from(failure: ListFailure) -> Self {
        match failure {
            ListFailure::Service(error) => GovernedError::Service {
                request: "tools/list".to_owned(),
                error,
            },
            ListFailure::Malformed(error) => GovernedError::MalformedTool(error),
            ListFailure::Answer(message) => GovernedError::Listing { message },
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
    ///   ([`manifest_from_rmcp`]). With one, the live list is reviewed against it
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
            list_every_tool(&peer, &server).await?
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
                    manifests.push(
                        CapabilityManifest::from_mcp_tool(value, &server)
                            .map_err(GovernedError::MalformedTool)?,
                    );
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

// ---------------------------------------------------------------------------------------------
// Listing a live server
// ---------------------------------------------------------------------------------------------

/// A live server's tools, from [`list_server_tools`].
#[derive(Clone, Debug, PartialEq)]
pub struct LiveTools {
    /// The name the server gives itself (`serverInfo.name`); empty when it gives none (a
    /// `server/discover` answer need not).
    pub server_name: String,
    /// The protocol version in use: `2026-07-28`, `2025-11-25`, or an older one the server
    /// answered `initialize` with.
    pub protocol_version: String,
    /// Every tool, all pages, in the server's order, each as JSON. This is the tool as rmcp
    /// read it, written back: the fields the descriptor hash covers (`name`, `title`,
    /// `description`, `inputSchema`, `outputSchema`, `annotations`) are kept, except that an
    /// explicit `null` is dropped and `annotations` keeps only `title` and the four hints.
    pub tools: Vec<Value>,
}

/// Why [`list_server_tools`] failed. The `stderr` fields hold the last lines the server wrote
/// to its standard error (empty when it wrote nothing); [`Display`](fmt::Display) shows them
/// after the first line.
#[derive(Debug)]
#[non_exhaustive]
pub enum LiveError {
    /// The command could not be started (not found, not executable, ...).
    Spawn {
        /// The program.
        command: String,
        /// Why.
        error: std::io::Error,
    },
    /// The server exited, or closed its standard output, before it answered.
    Exited {
        /// The program.
        command: String,
        /// How it exited; `None` when it closed its output but was still running (it was then
        /// killed).
        status: Option<ExitStatus>,
        /// The end of its standard error.
        stderr: String,
    },
    /// The server wrote something that is not JSON-RPC to its standard output, and never
    /// anything that is: it does not speak MCP over stdio.
    NotMcp {
        /// The program.
        command: String,
        /// The first line it wrote (at most 200 bytes).
        stdout: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// No complete answer within the timeout (the server was then killed).
    Timeout {
        /// The program.
        command: String,
        /// The timeout.
        timeout: Duration,
        /// The end of its standard error.
        stderr: String,
    },
    /// The server speaks JSON-RPC but the exchange failed: the handshake was rejected, no
    /// protocol version is shared, `tools/list` answered with an error, a pagination loop, ...
    Protocol {
        /// The program.
        command: String,
        /// What went wrong.
        message: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// The server listed a tool that is not a valid MCP tool; the error names it.
    MalformedTool {
        /// The program.
        command: String,
        /// The tool and its problems.
        error: ManifestError,
    },
}

impl fmt::Display for LiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LiveError::Spawn { command, error } => {
                write!(f, "cannot start `{command}`: {}", io_message(error))
            }
            LiveError::Exited {
                command,
                status,
                stderr,
            } => {
                match status {
                    Some(status) => write!(f, "`{command}` exited before answering ({status})")?,
                    None => write!(f, "`{command}` closed its standard output before answering")?,
                }
                write_stderr(f, stderr)
            }
            LiveError::NotMcp {
                command,
                stdout,
                stderr,
            } => {
                write!(
                    f,
                    "`{command}` does not speak MCP over stdio: it wrote {stdout:?} to its \
                     standard output instead of JSON-RPC"
                )?;
                write_stderr(f, stderr)
            }
            LiveError::Timeout {
                command,
                timeout,
                stderr,
            } => {
                write!(
                    f,
                    "no answer from `{command}` within {}",
                    format_duration(*timeout)
                )?;
                write_stderr(f, stderr)
            }
            LiveError::Protocol {
                command,
                message,
                stderr,
            } => {
                write!(f, "`{command}`: {message}")?;
                write_stderr(f, stderr)
            }
            LiveError::MalformedTool { command, error } => {
                write!(f, "`{command}` listed an invalid tool: {error}")
            }
        }
    }
}

impl std::error::Error for LiveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LiveError::Spawn { error, .. } => Some(error),
            LiveError::MalformedTool { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// An I/O error's message without the `(os error N)` suffix.
fn io_message(error: &std::io::Error) -> String {
    let text = error.to_string();
    match error.raw_os_error() {
        Some(code) => text
            .strip_suffix(&format!(" (os error {code})"))
            .map_or_else(|| text.clone(), str::to_owned),
        None => text,
    }
}

fn write_stderr(f: &mut fmt::Formatter<'_>, stderr: &str) -> fmt::Result {
    if stderr.is_empty() {
        return Ok(());
    }
    f.write_str("\nits standard error ended with:")?;
    for line in stderr.lines() {
        write!(f, "\n  {line}")?;
    }
    Ok(())
}

/// `10 s`, `500 ms`, `1.5 s`.
fn format_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 && duration.as_secs() > 0 {
        format!("{} s", duration.as_secs())
    } else if duration < Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

/// How long a server that closed its output gets to exit before it counts as still running, and
/// how long one gets to exit after its input is closed before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How much of a server's standard error is kept for error messages.
const STDERR_TAIL_BYTES: usize = 4096;
/// How many lines of it an error shows.
const STDERR_TAIL_LINES: usize = 20;
/// How long to wait for the end of the server's output once it is gone.
const OUTPUT_SETTLE: Duration = Duration::from_millis(500);
/// How much of a line that is not JSON-RPC is kept.
const NOT_MCP_BYTES: usize = 200;

/// Spawns `program args...` with `env` added to the inherited environment, speaks MCP to it over
/// stdio and returns every tool it lists (all pages), then shuts it down: its standard input is
/// closed, and it is killed if it has not exited shortly after.
///
/// The connection is negotiated like [`connect_client`]: `server/discover` (2026-07-28), else
/// the `initialize` handshake (2025-11-25 or older). A server that neither answers nor rejects
/// `server/discover` costs rmcp's 10 s probe before the fallback, so give such servers a
/// timeout above 10 s.
///
/// `timeout` bounds the whole exchange, start to last page; then the server is killed. Its
/// standard error is captured, not shown: the end of it comes with a [`LiveError`]. Lines on its
/// standard output that are not JSON-RPC are ignored, as other MCP clients do; a server that
/// writes only such lines fails with [`LiveError::NotMcp`].
///
/// This is an `async fn` on tokio: call it inside a tokio runtime with the I/O and time drivers
/// enabled (`tokio::runtime::Builder::new_current_thread().enable_all().build()`).
///
/// ```no_run
/// use std::ffi::OsString;
/// use std::time::Duration;
///
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// let args = [OsString::from("-y"), OsString::from("@modelcontextprotocol/server-memory")];
/// let live = runtime.block_on(capability::rmcp::list_server_tools(
///     "npx".as_ref(),
///     &args,
///     &[],
///     Duration::from_secs(30),
/// ))?;
/// println!("{} ({}): {} tools", live.server_name, live.protocol_version, live.tools.len());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub async fn list_server_tools(
    program: &OsStr,
    args: &[OsString],
    env: &[(String, String)],
    timeout: Duration,
) -> Result<LiveTools, LiveError> {
    let deadline = Instant::now() + timeout;
    let command = program.to_string_lossy().into_owned();
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(key, value)| (key, value)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| LiveError::Spawn {
            command: command.clone(),
            error,
        })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        // Cannot happen: all three are piped above.
        let _ = child.kill().await;
        return Err(LiveError::Spawn {
            command,
            error: std::io::Error::other("its standard streams could not be captured"),
        });
    };
    let (mut output, stdout) = Output::watch(stdout, stderr);

    let outcome = tokio::time::timeout_at(deadline, session((stdout, stdin))).await;
    let result = match outcome {
        Ok(Ok((mut running, live))) => {
            // Close its input, give it a moment to exit, then kill it.
            let grace = deadline
                .saturating_duration_since(Instant::now())
                .min(EXIT_GRACE);
            let _ = tokio::time::timeout(grace, running.close()).await;
            drop(running);
            if tokio::time::timeout(grace, child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
            Ok(live)
        }
        Ok(Err(failure)) => Err(failed(command, failure, &mut child, &mut output).await),
        Err(_elapsed) => {
            let _ = child.kill().await;
            output.settle().await;
            Err(match output.not_mcp() {
                Some(stdout) => LiveError::NotMcp {
                    command,
                    stdout,
                    stderr: output.stderr(),
                },
                None => LiveError::Timeout {
                    command,
                    timeout,
                    stderr: output.stderr(),
                },
            })
        }
    };
    output.stop();
    result
}

/// Why the session with a live server failed.
enum SessionFailure {
    Handshake(Box<ClientInitializeError>),
    Listing(ListFailure),
    Json(ManifestError),
}

impl SessionFailure {
    /// Whether the failure is the connection closing under us (the server exited, or closed its
    /// output), rather than an answer.
    fn is_closed(&self) -> bool {
        fn closed(error: &ClientInitializeError) -> bool {
            match error {
                ClientInitializeError::ConnectionClosed(_)
                | ClientInitializeError::TransportError { .. } => true,
                ClientInitializeError::LegacyFallbackFailed { fallback, .. } => closed(fallback),
                _ => false,
            }
        }
        match self {
            SessionFailure::Handshake(error) => closed(error),
            SessionFailure::Listing(ListFailure::Service(
                ServiceError::TransportClosed | ServiceError::TransportSend(_),
            )) => true,
            _ => false,
        }
    }
}

/// Connects over the child's stdio and lists every tool.
async fn session<T, E, A>(
    transport: T,
) -> Result<(RunningService<RoleClient, ClientConfig>, LiveTools), SessionFailure>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = connect_client(transport)
        .await
        .map_err(|error| SessionFailure::Handshake(Box::new(error)))?;
    let info = running.peer().peer_info();
    let server_name = info
        .as_ref()
        .and_then(|info| info.server_info.as_ref())
        .map(|implementation| implementation.name.clone())
        .unwrap_or_default();
    let protocol_version = info
        .as_ref()
        .map(|info| info.protocol_version.to_string())
        .unwrap_or_default();
    let declares_tools = info
        .as_ref()
        .is_none_or(|info| info.capabilities.tools.is_some());
    let tools = if declares_tools {
        // Only the names of bad tools are checked against the rules here, so any valid provider
        // name does.
        list_every_tool(running.peer(), &Server::untrusted("server"))
            .await
            .map_err(SessionFailure::Listing)?
    } else {
        Vec::new()
    };
    let tools = tools
        .iter()
        .map(tool_json)
        .collect::<Result<Vec<Value>, ManifestError>>()
        .map_err(SessionFailure::Json)?;
    Ok((
        running,
        LiveTools {
            server_name,
            protocol_version,
            tools,
        },
    ))
}

/// The error for a failed session; kills the server if it is still running.
async fn failed(
    command: String,
    failure: SessionFailure,
    child: &mut Child,
    output: &mut Output,
) -> LiveError {
    // Closing the connection closed the server's input, so it may be exiting now whatever went
    // wrong; its status tells something only when it went away first (`is_closed`).
    let closed = failure.is_closed();
    let status = if closed {
        // It closed its output: most likely it is exiting.
        tokio::time::timeout(EXIT_GRACE, child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    } else {
        child.try_wait().ok().flatten()
    };
    if status.is_none() {
        let _ = child.kill().await;
    }
    output.settle().await;
    if let Some(stdout) = output.not_mcp() {
        return LiveError::NotMcp {
            command,
            stdout,
            stderr: output.stderr(),
        };
    }
    if closed {
        return LiveError::Exited {
            command,
            status,
            stderr: output.stderr(),
        };
    }
    let message = match failure {
        SessionFailure::Handshake(error) => handshake_message(&error),
        SessionFailure::Listing(ListFailure::Service(ServiceError::McpError(error))) => format!(
            "`tools/list` answered with an error: {} (code {})",
            error.message, error.code.0
        ),
        SessionFailure::Listing(ListFailure::Service(error)) => {
            format!("`tools/list` failed: {error}")
        }
        SessionFailure::Listing(ListFailure::Answer(message)) => {
            format!("`tools/list` failed: {message}")
        }
        SessionFailure::Listing(ListFailure::Malformed(error)) | SessionFailure::Json(error) => {
            return LiveError::MalformedTool { command, error };
        }
    };
    LiveError::Protocol {
        command,
        message,
        stderr: output.stderr(),
    }
}

fn handshake_message(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::JsonRpcError(data) => format!(
            "the MCP handshake was rejected: {} (code {})",
            data.message, data.code.0
        ),
        ClientInitializeError::NoCompatibleProtocolVersion {
            client_supported,
            server_supported,
        } => {
            let list = |versions: &[ProtocolVersion]| {
                versions
                    .iter()
                    .map(ProtocolVersion::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            format!(
                "no protocol version in common: the server speaks {}, this client {}",
                list(server_supported),
                list(client_supported)
            )
        }
        ClientInitializeError::LegacyFallbackFailed { discover, fallback } => format!(
            "the MCP handshake failed: `server/discover`: {discover}; `initialize`: {}",
            handshake_message(fallback)
        ),
        other => format!("the MCP handshake failed: {other}"),
    }
}

/// What the server wrote on its standard output, as far as telling MCP from anything else goes.
#[derive(Default)]
struct StdoutSeen {
    /// Lines that start like JSON (`{` or `[`).
    json_lines: usize,
    /// The start of the first line that does not.
    first_other: Option<Vec<u8>>,
}

#[derive(Clone, Copy)]
enum LineState {
    /// At the start of a line (leading white space skipped).
    Start,
    /// In a line that starts like JSON.
    Json,
    /// In a line that does not; `capture` when it is the first such line.
    Other { capture: bool },
}

/// Sorts the server's standard output into lines that look like JSON and lines that do not.
struct LineWatcher {
    seen: StdoutSeen,
    line: LineState,
}

impl LineWatcher {
    fn new() -> Self {
        LineWatcher {
            seen: StdoutSeen::default(),
            line: LineState::Start,
        }
    }

    fn observe(&mut self, bytes: &[u8]) {
        let seen = &mut self.seen;
        for &byte in bytes {
            self.line = match (self.line, byte) {
                (_, b'\n') => LineState::Start,
                (LineState::Start, b' ' | b'\t' | b'\r') => LineState::Start,
                (LineState::Start, b'{' | b'[') => {
                    seen.json_lines += 1;
                    LineState::Json
                }
                (LineState::Start, _) => {
                    let capture = seen.first_other.is_none();
                    if capture {
                        seen.first_other = Some(vec![byte]);
                    }
                    LineState::Other { capture }
                }
                (LineState::Other { capture: true }, _) => {
                    if let Some(line) = seen.first_other.as_mut()
                        && line.len() < NOT_MCP_BYTES
                    {
                        line.push(byte);
                    }
                    self.line
                }
                (state, _) => state,
            };
        }
    }

    /// The first line that is not JSON-RPC, when no line was.
    fn not_mcp(&self) -> Option<String> {
        if self.seen.json_lines > 0 {
            return None;
        }
        let line = self.seen.first_other.as_ref()?;
        Some(String::from_utf8_lossy(line).trim_end().to_owned())
    }
}

/// The server's output, read as it comes, so that what it wrote is known even when rmcp stopped
/// reading (a failed write to a server that exited ends the session before its output is read),
/// and so that it never blocks on a full standard error pipe. Standard output is watched and
/// passed on to rmcp; the last few KiB of standard error are kept.
struct Output {
    watcher: Arc<Mutex<LineWatcher>>,
    stdout_pump: tokio::task::JoinHandle<()>,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    stderr_reader: tokio::task::JoinHandle<()>,
}

impl Output {
    /// Starts reading; returns the stream rmcp reads the server's standard output from.
    fn watch(mut stdout: ChildStdout, mut stderr: ChildStderr) -> (Output, DuplexStream) {
        let watcher = Arc::new(Mutex::new(LineWatcher::new()));
        let (for_rmcp, mut pipe) = tokio::io::duplex(64 * 1024);
        let watch = Arc::clone(&watcher);
        let stdout_pump = tokio::spawn(async move {
            let mut chunk = vec![0u8; 16 * 1024];
            let mut forwarding = true;
            while let Ok(n) = stdout.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                let bytes = &chunk[..n];
                watch
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .observe(bytes);
                // Once rmcp is gone, keep watching until the server closes its output.
                if forwarding && pipe.write_all(bytes).await.is_err() {
                    forwarding = false;
                }
            }
        });
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&stderr_tail);
        let stderr_reader = tokio::spawn(async move {
            let mut chunk = [0u8; 1024];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                let mut tail = keep.lock().unwrap_or_else(PoisonError::into_inner);
                tail.extend_from_slice(&chunk[..n]);
                if tail.len() > STDERR_TAIL_BYTES {
                    let excess = tail.len() - STDERR_TAIL_BYTES;
                    tail.drain(..excess);
                }
            }
        });
        let output = Output {
            watcher,
            stdout_pump,
            stderr_tail,
            stderr_reader,
        };
        (output, for_rmcp)
    }

    /// Waits a moment for the rest of what the server wrote (it has exited or been killed; a
    /// process it started may still hold the pipes open, hence the limit).
    async fn settle(&mut self) {
        let both = async {
            let _ = (&mut self.stdout_pump).await;
            let _ = (&mut self.stderr_reader).await;
        };
        let _ = tokio::time::timeout(OUTPUT_SETTLE, both).await;
    }

    /// The first line the server wrote that is not JSON-RPC, when it never wrote one that is.
    fn not_mcp(&self) -> Option<String> {
        self.watcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .not_mcp()
    }

    /// The last lines of its standard error, trimmed.
    fn stderr(&self) -> String {
        let tail = self
            .stderr_tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let text = String::from_utf8_lossy(&tail);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim_end)
            .filter(|line| !line.is_empty())
            .collect();
        let start = lines.len().saturating_sub(STDERR_TAIL_LINES);
        lines[start..].join("\n")
    }

    fn stop(self) {
        self.stdout_pump.abort();
        self.stderr_reader.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(Duration::from_secs(10)), "10 s");
        assert_eq!(format_duration(Duration::from_millis(500)), "500 ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(format_duration(Duration::ZERO), "0 ms");
    }

    #[test]
    fn the_watcher_tells_json_from_other_output() {
        let mut watcher = LineWatcher::new();
        watcher.observe(b"Server running on std");
        assert_eq!(watcher.not_mcp().as_deref(), Some("Server running on std"));
        watcher.observe(b"io\n  {\"jsonrpc\"");
        watcher.observe(b":\"2.0\"}\nanother line\n");
        assert_eq!(watcher.seen.json_lines, 1);
        assert_eq!(
            watcher.seen.first_other.as_deref(),
            Some(&b"Server running on stdio"[..])
        );
        assert_eq!(watcher.not_mcp(), None, "it also wrote JSON");
    }

    #[test]
    fn os_error_codes_are_left_out() {
        let error = std::io::Error::from_raw_os_error(2);
        assert_eq!(io_message(&error), "No such file or directory");
    }
}
