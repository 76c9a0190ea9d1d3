//! The governed server (feature `rmcp-server`): any rmcp [`ServerHandler`] wrapped so that every
//! request is decided for its caller and recorded, and nothing refused reaches the handler. See
//! [`GovernedServer`].
//!
//! - `listing.rs`: the inner handler's tools, read once ([`ToolListings`]).
//! - `tools.rs`: `tools/list` and `tools/call`; `items.rs`: resources, prompts, completion,
//!   skills, tasks.
//! - `handler.rs`: the `ServerHandler` impl, one method per line of
//!   [`METHODS`](crate::methods::METHODS).
//! - `refusal.rs`: the JSON-RPC error of a refusal; `resolve.rs`: who is calling.
//! - `by_table.rs`: [`ByTable`], the method table as the door of any server.

mod by_table;
mod handler;
mod items;
mod listing;
mod refusal;
mod resolve;
mod tools;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ::rmcp::service::RequestContext;
use ::rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::Serialize;
use serde_json::Value;

use capability_audit::{AuditedDispatch, Caller, Outcome, Principal, Request, Subject};
use capability_core::authz::{DenyReason, Policy, ToolContext};

use crate::lock::Lockfile;
use crate::server::Server;
use crate::visibility::WithheldReason;

use refusal::{Asked, Refusal};

pub use by_table::{ByTable, not_found};
pub use listing::ToolListings;
pub use refusal::{REFUSED_CODE, www_authenticate};
pub use resolve::{BearerRoles, FixedRole, RoleResolver, TokenHashError, bearer_token, http_parts};

/// The role recorded for a caller the resolver gave none.
const NO_ROLE: &str = "(none)";

/// An rmcp server that decides every request of every caller, records it, and lets through to
/// the inner handler only what the caller's role may do.
///
/// Per request, the caller's role comes from the [`RoleResolver`] (a bearer token of a
/// Streamable HTTP request: [`BearerRoles`]; a stdio server's fixed role: [`FixedRole`]) and
/// its grant from the policy ([`Policy::context`], session `mcp:<server>/<role>`, or
/// `mcp:<server>/<role>/<session>` when the resolver names one: by default the
/// `Mcp-Session-Id` of a Streamable HTTP request). What happens to each MCP method is the table
/// [`METHODS`](crate::methods::METHODS) (docs/mcp.md prints it):
///
/// - **Lists** (`tools/list`, `resources/list`, `resources/templates/list`, `prompts/list`,
///   `skills/list`) hold only what the role may use, with `cacheScope: "private"`. The tool
///   list is the inner handler's, read once into a [`Listing`](crate::Listing) by the one
///   visibility function ([`ToolListings`]: drift against the lockfile, duplicate names), then
///   decided for each caller; it is returned in one page.
/// - **Calls, reads and gets** (`tools/call`, `resources/read`, `resources/subscribe` and
///   `unsubscribe`, `resources/directory/read`, `prompts/get`, `completion/complete`,
///   `skills/get`) are decided for the role (the tool; the URI, as sent and resolved; the
///   prompt's name) by [`AuditedDispatch::act_async`], which records the intent before the
///   inner handler runs and the outcome after. A refused request is recorded and answered
///   with a JSON-RPC error (code [`REFUSED_CODE`]) whose `data` names what was asked (`tool`,
///   `uri`, `prompt`), the `role` and every `reasons` entry; the inner handler is never
///   called. When the only obstacle is missing scopes, `data` also carries the step-up
///   challenge of the MCP authorization spec, all missing scopes at once: `error:
///   "insufficient_scope"`, `scope` (every scope the tool needs, space-separated),
///   `missingScopes`, `error_description` and `wwwAuthenticate` (the ready `WWW-Authenticate`
///   header value).
/// - **A caller without a role** gets empty lists, and every call, read and get is refused and
///   recorded (reason `no_role`); `logging/setLevel` and `subscriptions/listen` need a role too.
/// - **Tasks** (`tasks/get`, `update`, `cancel`) are served only to the session whose
///   `tools/call` created the task.
/// - **Anything else** (a custom method) is not passed on.
///
/// Requests the inner handler itself sends the client (sampling, elicitation, roots, through
/// `context.peer`) are your handler's own code and are not intercepted here; `capability proxy`
/// governs those of a server it does not trust.
///
/// **Budget.** The audited dispatch's per-session budget, if it has one, counts each
/// session's calls and denials. [`AuditedDispatch::new`] has none, which is what a server
/// wants: a stdio server has one session for its whole life, and a refused call refuses only
/// itself. Give one ([`AuditedDispatch::with_budget`], [`capability_audit::Budget`]) only to
/// cap a session, with room for denials: past it, every call of the session is refused until
/// [`AuditedDispatch::reset`].
pub struct GovernedServer<H> {
    inner: H,
    server: Server,
    policy: Arc<Policy>,
    resolver: Arc<dyn RoleResolver>,
    dispatch: Arc<AuditedDispatch>,
    resource_metadata: Option<String>,
    listings: ToolListings,
    /// The session that created each task a governed `tools/call` returned.
    tasks: Arc<Mutex<HashMap<String, String>>>,
}

impl<H: Clone> Clone for GovernedServer<H> {
    fn clone(&self) -> Self {
        GovernedServer {
            inner: self.inner.clone(),
            server: self.server.clone(),
            policy: Arc::clone(&self.policy),
            resolver: Arc::clone(&self.resolver),
            dispatch: Arc::clone(&self.dispatch),
            resource_metadata: self.resource_metadata.clone(),
            listings: self.listings.clone(),
            tasks: Arc::clone(&self.tasks),
        }
    }
}

impl<H> fmt::Debug for GovernedServer<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GovernedServer")
            .field("server", &self.server)
            .field("listings", &self.listings)
            .finish_non_exhaustive()
    }
}

/// Who asks: the role (if any), the principal the transport authenticated (if any), the
/// scopes its credentials carry (if they narrow the role's), the session and the agent to
/// record. Built once per request.
pub(super) struct Who {
    role: Option<String>,
    principal: Option<Principal>,
    scopes: Option<Vec<String>>,
    session: String,
    agent: String,
}

impl Who {
    fn role_name(&self) -> &str {
        self.role.as_deref().unwrap_or(NO_ROLE)
    }

    /// The caller to record: the agent, and the principal when there is one.
    fn caller(&self) -> Caller<'_> {
        let caller = Caller::new(&self.agent);
        match &self.principal {
            Some(principal) => caller.principal(principal),
            None => caller,
        }
    }
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
            listings: ToolListings::new(server.clone(), None),
            server,
            policy,
            resolver: Arc::new(resolver),
            dispatch,
            resource_metadata: None,
            tasks: Arc::default(),
        }
    }

    /// Reviews the inner handler's tools against a lockfile: a tool that drifted from its pin
    /// is hidden from everyone, unless the change is a rewording that the policy's `[servers]`
    /// entry of this server accepts (`accept_wording_drift = true`), as the gateway judges it.
    /// A re-pin (`capability pin --approve`) is taken only once its signature is checked: this
    /// crate checks none, so call [`Lockfile::check_repins`] (or
    /// `capability_gateway::pins::governed`) on the lockfile first; unchecked, it is refused.
    pub fn with_lockfile(mut self, lock: Arc<Lockfile>) -> Self {
        let accepts = self
            .policy
            .servers()
            .iter()
            .any(|entry| entry.name() == self.server.name() && entry.accepts_wording_drift());
        let lock = if accepts {
            let mut lock = Arc::unwrap_or_clone(lock);
            lock.accept_wording_drift(self.server.name(), true);
            Arc::new(lock)
        } else {
            lock
        };
        self.listings = ToolListings::new(self.server.clone(), Some(lock));
        self
    }

    /// Serves `listings` (shared with whoever sets it: a proxy that lists its server) instead
    /// of a listing of its own. Its server and lockfile are the listing's.
    pub fn with_listings(mut self, listings: ToolListings) -> Self {
        self.listings = listings;
        self
    }

    /// The protected resource metadata URL (RFC 9728) named in the step-up challenge's
    /// `resource_metadata`.
    pub fn with_resource_metadata(mut self, url: impl Into<String>) -> Self {
        self.resource_metadata = Some(url.into());
        self
    }

    /// The tool listing this server serves: [`invalidate`](ToolListings::invalidate) it when
    /// your handler's tools change, or [`set`](ToolListings::set) it to tools you listed.
    pub fn listings(&self) -> &ToolListings {
        &self.listings
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
        let principal = self.resolver.principal(context);
        // The role and the principal are part of the session, so that callers of one role, or
        // two principals of it, never spend (or degrade) each other's budget, even when they
        // name the same session id.
        let server = self.server.name();
        let role_name = role.as_deref().unwrap_or(NO_ROLE);
        let mut session = format!("mcp:{server}/{role_name}");
        if let Some(principal) = &principal {
            session.push('/');
            session.push_str(&principal.key());
        }
        if let Some(id) = self.resolver.session(context) {
            session.push('/');
            session.push_str(&id);
        }
        let agent = context
            .peer
            .peer_info()
            .map(|info| info.client_info.name.clone())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "mcp-client".to_owned());
        Who {
            scopes: role.as_ref().and_then(|_| self.resolver.scopes(context)),
            role,
            principal,
            session,
            agent,
        }
    }

    /// The decider of `who`'s role, or `None` when it has none (or one the policy does not
    /// know, which the resolver should not give).
    fn decider(&self, who: &Who) -> Option<ToolContext> {
        let role = who.role.as_deref()?;
        let decider = self.policy.context(role, who.session.clone())?;
        Some(match &who.scopes {
            Some(held) => decider.within_scopes(held),
            None => decider,
        })
    }

    /// Why a caller without a decider is refused: no role, or a role the policy does not know.
    fn no_decider(who: &Who) -> WithheldReason {
        WithheldReason::Policy(match &who.role {
            Some(role) => DenyReason::UnknownRole { role: role.clone() },
            None => DenyReason::NoRole,
        })
    }

    fn subject<'a>(&'a self, who: &'a Who) -> Subject<'a> {
        Subject::new(who.role_name(), &who.session).policy_version(self.policy.version())
    }

    /// Records `request` of `who` as refused before any decision, and the error to answer.
    fn refuse(
        &self,
        who: &Who,
        request: &Request<'_>,
        asked: Asked<'_>,
        reasons: Vec<WithheldReason>,
        required_scopes: &[String],
    ) -> ErrorData {
        let deny: Vec<DenyReason> = reasons.iter().map(WithheldReason::to_deny).collect();
        let degrade = self
            .dispatch
            .refuse(&self.subject(who), who.caller(), request, &deny);
        Refusal {
            asked,
            role: who.role.as_deref(),
            principal: who.principal.as_ref(),
            reasons,
            required_scopes,
            resource_metadata: self.resource_metadata.as_deref(),
            dispatch: degrade.map(|d| d.to_string()),
        }
        .into_error()
    }

    /// Decides `request` for `who`, records it, and runs `run` when it is allowed: the one
    /// path of every call, read and get. A caller without a role is refused without a
    /// decision.
    async fn act<O: Serialize, F>(
        &self,
        who: &Who,
        request: &Request<'_>,
        asked: Asked<'_>,
        required_scopes: &[String],
        run: F,
    ) -> Result<O, ErrorData>
    where
        F: std::future::Future<Output = Result<O, ErrorData>>,
    {
        let Some(decider) = self.decider(who) else {
            let reasons = vec![Self::no_decider(who)];
            return Err(self.refuse(who, request, asked, reasons, &[]));
        };
        let outcome = self
            .dispatch
            .act_async(&decider, who.caller(), request, run)
            .await;
        let (reasons, dispatch) = match outcome {
            Outcome::Done(output) => return Ok(output),
            Outcome::Failed(error) => return Err(error),
            Outcome::Denied(denial) => (denial.reasons().to_vec(), None),
            Outcome::Degrade(reason) => {
                let reasons = match &reason {
                    capability_audit::DegradeReason::Denied { reasons, .. } => reasons.clone(),
                    _ => Vec::new(),
                };
                (reasons, Some(reason.to_string()))
            }
            Outcome::AuditFailed(error) => (
                Vec::new(),
                Some(format!(
                    "it was not run: its audit record could not be written: {error}"
                )),
            ),
        };
        Err(Refusal {
            asked,
            role: who.role.as_deref(),
            principal: who.principal.as_ref(),
            reasons: reasons.into_iter().map(WithheldReason::Policy).collect(),
            required_scopes,
            resource_metadata: self.resource_metadata.as_deref(),
            dispatch,
        }
        .into_error())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A JSON object of `key`: `value` pairs, the input a request is recorded with.
fn input(pairs: &[(&str, Value)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    )
}
