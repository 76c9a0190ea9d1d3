//! The governed server (feature `rmcp-server`): any rmcp [`ServerHandler`] wrapped so that
//! each caller lists only the tools its role may call, and every other call is refused and
//! never reaches the handler. See [`GovernedServer`].

mod handler;
mod refusal;
mod resolve;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ::rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
    Tool,
};
use ::rmcp::service::RequestContext;
use ::rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::{Serialize, Serializer};
use serde_json::Value;

use capability_audit::{AuditedDispatch, Caller, Outcome};
use capability_core::authz::{Authorize, Decision, DenyReason, Policy, ToolContext};
use capability_core::manifest::CapabilityManifest;

use crate::lock::Lockfile;
use crate::server::Server;
use crate::visibility::{Visibility, WithheldReason};

use super::convert::tool_json;
use refusal::Refusal;

pub use refusal::{REFUSED_CODE, www_authenticate};
pub use resolve::{BearerRoles, FixedRole, RoleResolver, TokenHashError, bearer_token, http_parts};

/// The most pages of the inner handler's tool list that are followed.
const MAX_PAGES: usize = 1000;
/// The role recorded for a caller the resolver gave none.
const NO_ROLE: &str = "(none)";
/// The tool recorded for a call naming a tool that is not a valid tool name.
const INVALID_NAME: &str = "invalid_tool_name";

/// An rmcp server that shows each caller only the tools its role may call, refuses every other
/// call before it reaches the inner handler, and audits every call.
///
/// Per request, the caller's role comes from the [`RoleResolver`] (a bearer token of a
/// Streamable HTTP request: [`BearerRoles`]; a stdio server's fixed role: [`FixedRole`]) and
/// its grant from the policy ([`Policy::context`], session `mcp:<server>/<role>`, or
/// `mcp:<server>/<role>/<session>` when the resolver names one: by default the
/// `Mcp-Session-Id` of a Streamable HTTP request). Then:
///
/// - **`tools/list`** lists every page of the inner handler's tools and returns, in one page,
///   those [`Visibility::of`] (the one visibility function) shows the role, with `cacheScope:
///   "private"` (rmcp 3's `ListToolsResult::cache_scope`): the list depends on who asks, so no
///   shared cache may serve it to anyone else. A caller without a role gets an empty list.
/// - **`tools/call`** of a visible tool runs the inner handler's `call_tool` through
///   [`AuditedDispatch::call_async`], which decides again, records, runs and records the
///   outcome. Any other call (hidden by the policy, drift against the lockfile, a duplicate
///   name, a tool not listed, a caller without a role) is recorded as denied and refused with a
///   JSON-RPC error (code [`REFUSED_CODE`]) whose `data` holds `tool`, `role` and every
///   `reasons` entry; the inner handler is never called. When the only obstacle is missing
///   scopes, `data` also carries the step-up challenge of the MCP authorization spec, all
///   missing scopes at once: `error: "insufficient_scope"`, `scope` (every scope the tool
///   needs, space-separated), `missingScopes`, `error_description` and `wwwAuthenticate` (the
///   ready `WWW-Authenticate` header value). Sending that header with an HTTP 403 is the
///   transport's business: rmcp's Streamable HTTP server answers JSON-RPC errors with 200.
///
/// Every other request goes to the inner handler unchanged. rmcp's `get_tool` (asked without a
/// request context, only to validate request headers against a tool's input schema) is the
/// inner handler's.
///
/// The audited dispatch applies its per-session budget: a server usually wants one with room
/// for denials ([`capability_audit::Budget`]), since by default the first denial degrades the
/// session.
pub struct GovernedServer<H> {
    inner: H,
    server: Server,
    policy: Arc<Policy>,
    resolver: Arc<dyn RoleResolver>,
    dispatch: Arc<AuditedDispatch>,
    lock: Option<Arc<Lockfile>>,
    resource_metadata: Option<String>,
    /// The last tool list of the inner handler and what anyone may see of it before the
    /// decision (drift, duplicate names): read again only when the list changes.
    view: Arc<Mutex<Option<View>>>,
}

/// A tool list and its caller-independent visibility.
struct View {
    tools: Vec<Tool>,
    seen: Arc<Visibility>,
}

impl<H: Clone> Clone for GovernedServer<H> {
    fn clone(&self) -> Self {
        GovernedServer {
            inner: self.inner.clone(),
            server: self.server.clone(),
            policy: Arc::clone(&self.policy),
            resolver: Arc::clone(&self.resolver),
            dispatch: Arc::clone(&self.dispatch),
            lock: self.lock.clone(),
            resource_metadata: self.resource_metadata.clone(),
            view: Arc::clone(&self.view),
        }
    }
}

impl<H> fmt::Debug for GovernedServer<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GovernedServer")
            .field("server", &self.server)
            .field("lockfile", &self.lock.is_some())
            .finish_non_exhaustive()
    }
}

/// Who asks: the role (if any), the session and the agent to record.
struct Who {
    role: Option<String>,
    session: String,
    agent: String,
}

impl<H: ServerHandler> GovernedServer<H> {
    /// Governs `inner`, whose tools are those of `server` (the operator's name for it: the
    /// provider the policy's patterns and the lockfile see; its trust says whether the tools'
    /// annotations are believed, usually [`Server::trusted`] for your own handler).
    pub fn new(
        inner: H,
        server: Server,
        policy: Arc<Policy>,
        resolver: impl RoleResolver,
        dispatch: Arc<AuditedDispatch>,
    ) -> Self {
        GovernedServer {
            inner,
            server,
            policy,
            resolver: Arc::new(resolver),
            dispatch,
            lock: None,
            resource_metadata: None,
            view: Arc::default(),
        }
    }

    /// Reviews the inner handler's tools against a lockfile: a tool that drifted from its pin
    /// is hidden from everyone.
    pub fn with_lockfile(mut self, lock: Arc<Lockfile>) -> Self {
        self.lock = Some(lock);
        self.view = Arc::default();
        self
    }

    /// The protected resource metadata URL (RFC 9728) named in the step-up challenge's
    /// `resource_metadata`.
    pub fn with_resource_metadata(mut self, url: impl Into<String>) -> Self {
        self.resource_metadata = Some(url.into());
        self
    }

    /// The inner handler.
    pub fn inner(&self) -> &H {
        &self.inner
    }

    /// The server, as given to [`new`](Self::new).
    pub fn server(&self) -> &Server {
        &self.server
    }

    fn who(&self, context: &RequestContext<RoleServer>) -> Who {
        let role = self.resolver.role(context);
        // The role is part of the session, so that callers of one role never spend (or
        // degrade) the budget of another, even when they name the same session id.
        let server = self.server.name();
        let role_name = role.as_deref().unwrap_or(NO_ROLE);
        let session = match self.resolver.session(context) {
            Some(id) => format!("mcp:{server}/{role_name}/{id}"),
            None => format!("mcp:{server}/{role_name}"),
        };
        let agent = context
            .peer
            .peer_info()
            .map(|info| info.client_info.name.clone())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "mcp-client".to_owned());
        Who {
            role,
            session,
            agent,
        }
    }

    /// Every tool of the inner handler, following its cursors.
    async fn inner_tools(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Vec<Tool>, ErrorData> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let request = (cursor.is_some())
                .then(|| PaginatedRequestParams::default().with_cursor(cursor.clone()));
            let page = self.inner.list_tools(request, context.clone()).await?;
            tools.extend(page.tools);
            match page.next_cursor {
                Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
                Some(_) => {
                    return Err(ErrorData::internal_error(
                        "the tool list repeats its cursor",
                        None,
                    ));
                }
                None => return Ok(tools),
            }
        }
        Err(ErrorData::internal_error(
            format!("the tool list has more than {MAX_PAGES} pages"),
            None,
        ))
    }

    /// The inner handler's tools and what anyone may see of them before the decision: read
    /// from the tools (manifests, the lockfile's review) only when the list differs from the
    /// last one.
    async fn visibility(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<(Vec<Tool>, Arc<Visibility>), ErrorData> {
        let tools = self.inner_tools(context).await?;
        if let Some(view) = lock(&self.view).as_ref()
            && view.tools == tools
        {
            return Ok((tools, Arc::clone(&view.seen)));
        }
        let invalid = |error: capability_core::manifest::ManifestError| {
            ErrorData::internal_error(format!("the server lists an invalid tool: {error}"), None)
        };
        let json = tools
            .iter()
            .map(tool_json)
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let seen = Arc::new(
            Visibility::of(&self.server, &json, self.lock.as_deref(), &Undecided)
                .map_err(invalid)?,
        );
        *lock(&self.view) = Some(View {
            tools: tools.clone(),
            seen: Arc::clone(&seen),
        });
        Ok((tools, seen))
    }

    async fn governed_list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if request.and_then(|r| r.cursor).is_some() {
            return Err(ErrorData::invalid_params(
                "the governed tool list has one page; it takes no cursor",
                None,
            ));
        }
        let who = self.who(&context);
        let decider = who
            .role
            .as_deref()
            .and_then(|role| self.policy.context(role, who.session.clone()));
        let visible = match decider {
            None => Vec::new(),
            Some(decider) => {
                let (tools, seen) = self.visibility(&context).await?;
                let seen = seen.for_decider(&decider);
                tools
                    .into_iter()
                    .zip(seen.tools())
                    .filter(|(_, listed)| listed.is_visible())
                    .map(|(tool, _)| tool)
                    .collect()
            }
        };
        let mut result = ListToolsResult::with_all_items(visible);
        result.cache_scope = Some(CacheScope::Private);
        Ok(result)
    }

    async fn governed_call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let who = self.who(&context);
        let caller = Caller::new(&who.agent);
        let decider = who
            .role
            .as_deref()
            .and_then(|role| self.policy.context(role, who.session.clone()));
        let Some(decider) = decider else {
            let role = who.role.clone().unwrap_or_else(|| NO_ROLE.to_owned());
            let reason = DenyReason::UnknownRole { role: role.clone() };
            let nobody = Nobody {
                role,
                session: who.session.clone(),
            };
            let manifest = self.placeholder(&name)?;
            let outcome = self
                .dispatch
                .call_async(&nobody, caller, &manifest, &input, never())
                .await;
            return Err(self.refusal(
                &name,
                &who,
                vec![WithheldReason::Policy(reason)],
                &[],
                outcome,
            ));
        };
        let (_, seen) = self.visibility(&context).await?;
        let listed = seen.tool_for_decider(&name, &decider);
        let (manifest, withheld) = match &listed {
            Some(listed) if listed.is_visible() => (listed.manifest().clone(), Vec::new()),
            Some(listed) => (listed.manifest().clone(), listed.reasons().to_vec()),
            None => (self.placeholder(&name)?, vec![WithheldReason::NotListed]),
        };
        if !withheld.is_empty() {
            let withholding = Withholding {
                inner: &decider,
                reasons: &withheld,
            };
            let outcome = self
                .dispatch
                .call_async(&withholding, caller, &manifest, &input, never())
                .await;
            let scopes = manifest.required_scopes();
            return Err(self.refusal(&name, &who, withheld.clone(), scopes, outcome));
        }
        let run = async { self.inner.call_tool(request, context).await.map(Response) };
        match self
            .dispatch
            .call_async(&decider, caller, &manifest, &input, run)
            .await
        {
            Outcome::Done(Response(response)) => Ok(response),
            Outcome::Failed(error) => Err(error),
            outcome => {
                let reasons = decider
                    .decide(&manifest)
                    .into_reasons()
                    .into_iter()
                    .map(WithheldReason::Policy)
                    .collect();
                let scopes = manifest.required_scopes();
                Err(self.refusal(&name, &who, reasons, scopes, outcome))
            }
        }
    }

    /// The manifest recorded for a call of a tool the server does not list.
    fn placeholder(&self, name: &str) -> Result<CapabilityManifest, ErrorData> {
        CapabilityManifest::builder(name)
            .provider(self.server.name())
            .build()
            .or_else(|_| CapabilityManifest::builder(INVALID_NAME).build())
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    fn refusal<O>(
        &self,
        tool: &str,
        who: &Who,
        reasons: Vec<WithheldReason>,
        required_scopes: &[String],
        outcome: Outcome<O, ErrorData>,
    ) -> ErrorData {
        let dispatch = match outcome {
            Outcome::Degrade(reason) => Some(reason.to_string()),
            Outcome::AuditFailed(error) => Some(format!(
                "the call was not run: its audit record could not be written: {error}"
            )),
            _ => None,
        };
        Refusal {
            tool,
            role: who.role.as_deref(),
            reasons,
            required_scopes,
            resource_metadata: self.resource_metadata.as_deref(),
            dispatch,
        }
        .into_error()
    }
}

/// What the dispatch runs for a call it must refuse: never polled, since its decider denies.
fn never() -> std::future::Ready<Result<Response, ErrorData>> {
    std::future::ready(Err(ErrorData::internal_error("refused", None)))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The decider of the caller-independent view: allows every tool, so that the view carries
/// only drift and duplicate names, and each caller's decision is added to it.
struct Undecided;

impl Authorize for Undecided {
    fn decide(&self, _tool: &CapabilityManifest) -> Decision {
        Decision::from_reasons(Vec::new())
    }

    fn principal(&self) -> &str {
        ""
    }

    fn session(&self) -> &str {
        ""
    }
}

/// A caller without a role: every tool is denied.
struct Nobody {
    role: String,
    session: String,
}

impl Authorize for Nobody {
    fn decide(&self, _tool: &CapabilityManifest) -> Decision {
        Decision::deny(DenyReason::UnknownRole {
            role: self.role.clone(),
        })
    }

    fn principal(&self) -> &str {
        &self.role
    }

    fn session(&self) -> &str {
        &self.session
    }
}

/// The role's decider, for a tool the visibility function withholds for reasons of its own
/// (drift, a duplicate name, not listed): each is recorded as [`DenyReason::Withheld`] (the
/// audit trail's reasons are the decision's), next to any reason of the policy.
struct Withholding<'a> {
    inner: &'a ToolContext,
    reasons: &'a [WithheldReason],
}

impl Authorize for Withholding<'_> {
    fn decide(&self, tool: &CapabilityManifest) -> Decision {
        let mut reasons = self.inner.decide(tool).into_reasons();
        reasons.extend(
            self.reasons
                .iter()
                .filter(|r| !matches!(r, WithheldReason::Policy(_)))
                .map(|r| DenyReason::Withheld { why: r.to_string() }),
        );
        Decision::from_reasons(reasons)
    }

    fn principal(&self) -> &str {
        self.inner.principal()
    }

    fn session(&self) -> &str {
        self.inner.session()
    }

    fn policy_version(&self) -> Option<&str> {
        self.inner.policy_version()
    }
}

/// The inner handler's answer, written to the audit trail as the result it is sent as.
struct Response(CallToolResponse);

impl Serialize for Response {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            CallToolResponse::Complete(result) => result.serialize(serializer),
            CallToolResponse::InputRequired(result) => result.serialize(serializer),
            CallToolResponse::Task(result) => result.serialize(serializer),
            _ => serializer.serialize_none(),
        }
    }
}
