//! The engine as one server to its clients, the state it serves from: the [`Snapshot`] of the
//! fleet swapped whole on a change, and the [`Gateway`] every front and lane decides, records
//! and refuses through.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use ::rmcp::model::Tool;
use ::rmcp::service::RequestContext;
use ::rmcp::{ErrorData, Peer, RoleClient, RoleServer};

use capability::Policy;
use capability::audit::Principal;
use capability::audit::{AuditedDispatch, Request, Subject};
use capability::authz::DenyReason;
use capability::mcp::Fleet;
use capability_http::{Authenticated, VerifiedSession};

use crate::serve::clients::Changed;
use crate::serve::items::Items;
use crate::serve::refusal::{Unanswered, Why, answered, refused_by};
use crate::serve::who::Who;
use crate::upstream::stdio::Lane;

/// The name the gateway gives itself.
pub const GATEWAY_NAME: &str = "capability-gateway";

/// What the client is served from, swapped whole on a change, a restart or a reload: the fleet,
/// each server's tools as it listed them, the connections, and the role's decider under the
/// policy in force.
pub(crate) struct Snapshot {
    pub(crate) fleet: Fleet,
    /// The fleet's resources and prompts.
    pub(crate) items: Items,
    pub(crate) tools: HashMap<(String, String), Tool>,
    pub(crate) peers: HashMap<String, Peer<RoleClient>>,
    /// The relays of the servers' progress for the calls passed on through rmcp, by server.
    pub(crate) progress: HashMap<String, crate::upstream::progress::Relay>,
    /// The calls in flight through rmcp, by server (`relay.rs`).
    pub(crate) calls: HashMap<String, crate::upstream::relay::Calls>,
    /// The sessions of 2025-11-25 next to connections of 2026-07-28, by server (`legacy.rs`).
    pub(crate) legacy: HashMap<String, Arc<crate::upstream::legacy::Legacy>>,
    /// The servers called on the caller's behalf (`delegate.rs`), by server.
    pub(crate) delegated: HashMap<String, Arc<crate::upstream::delegate::Delegated>>,
    /// How each server ended, once it did (`process.rs`), by server.
    pub(crate) exits: HashMap<String, crate::process::Ended>,
    /// The forwarding lanes, by server (spawned servers only).
    pub(crate) lanes: HashMap<String, Arc<Lane>>,
    /// The forwarding lanes, by server (HTTP servers only).
    pub(crate) reaches: HashMap<String, Arc<crate::upstream::http::Reach>>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) policy_version: Option<String>,
    /// The approvals of the policy's `[approvals]` table (`approvals.rs`).
    pub(crate) approvals: Option<Arc<crate::serve::approvals::Approvals>>,
    /// Whether some server's resources are served.
    pub(crate) resources: bool,
    /// Whether some server's prompts are served.
    pub(crate) prompts: bool,
}

/// The handler the client talks to.
#[derive(Clone)]
pub(crate) struct Gateway {
    /// The client's role over stdio; `None` over HTTP, where each request's comes from its token.
    pub(crate) role: Option<String>,
    pub(crate) dispatch: Arc<AuditedDispatch>,
    pub(crate) current: Arc<RwLock<Arc<Snapshot>>>,
    /// The clients of the HTTP front, told when the tools change (`None` over stdio, where the
    /// one client is told through its own connection).
    pub(crate) clients: Option<crate::serve::clients::Clients>,
    /// Where the tool versions it sees are recorded (`versions.rs`).
    pub(crate) versions: Option<Arc<dyn capability_store::Store>>,
    /// The log level each client asked for (`logging/setLevel`), shared with the servers'
    /// handlers.
    pub(crate) levels: crate::upstream::relay::Levels,
    /// The name it gives itself (to clients and servers, and in its refusals).
    pub(crate) name: &'static str,
    /// What its sessions are named under (`mcp:<scope>/<role>/...`): `gateway`, or a proxy's
    /// one server.
    pub(crate) scope: Arc<str>,
}

impl Gateway {
    pub(crate) fn current(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Serves `next` from now on.
    pub(crate) fn swap(&self, next: Snapshot) {
        self.saw_tools(&next);
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(next);
    }

    /// The stdio client, of the gateway's role (`None` over HTTP).
    pub(crate) fn stdio_client(&self, snapshot: &Snapshot) -> Option<Who> {
        let role = self.role.as_ref()?;
        let session = format!("mcp:{}/{role}", self.scope);
        Some(Who {
            role: role.clone(),
            ctx: snapshot.policy.context(role, session.clone()),
            session,
            principal: None,
        })
    }

    /// Tells the clients of the HTTP front that a list changed, on a task of its own (the
    /// event loop does not wait for a slow client).
    pub(crate) fn tell_clients(&self, kind: Changed) {
        if let Some(clients) = self.clients.clone() {
            tokio::spawn(async move {
                clients.notify(kind).await;
            });
        }
    }

    pub(crate) fn who(&self, snapshot: &Snapshot, context: &RequestContext<RoleServer>) -> Who {
        if let Some(who) = self.stdio_client(snapshot) {
            return who;
        }
        let parts = capability::rmcp::http_parts(context);
        let caller = parts.and_then(|p| p.extensions.get::<Authenticated>());
        let session = parts.and_then(|p| p.extensions.get::<VerifiedSession>());
        self.http_caller(snapshot, caller, session.map(|s| s.0.as_str()))
    }

    /// A caller over HTTP: whom the edge authenticated, in the session it checked was issued
    /// to them (what [`EdgeRoles`](capability_http::EdgeRoles) reads, from the request's
    /// extensions).
    pub(crate) fn http_caller(
        &self,
        snapshot: &Snapshot,
        caller: Option<&Authenticated>,
        session: Option<&str>,
    ) -> Who {
        let (role, scopes) = (
            caller.and_then(|c| c.role.clone()),
            caller.and_then(|c| c.scopes.clone()),
        );
        let principal = caller.map(|c| c.principal.clone());
        let key = principal
            .as_ref()
            .map_or_else(|| "(none)".to_owned(), Principal::key);
        // The role and the principal are part of the session, so that callers of one role, or
        // two principals of it, never spend (or degrade) each other's budget.
        let role_name = role.as_deref().unwrap_or("(none)");
        let session = match session {
            Some(id) => format!("mcp:{}/{role_name}/{key}/{id}", self.scope),
            None => format!("mcp:{}/{role_name}/{key}", self.scope),
        };
        let ctx = role
            .as_deref()
            .and_then(|role| snapshot.policy.context(role, session.clone()))
            .map(|ctx| match scopes {
                Some(scopes) => ctx.within_scopes(&scopes),
                None => ctx,
            });
        Who {
            role: role.unwrap_or_else(|| "(none)".to_owned()),
            session,
            principal,
            ctx,
        }
    }

    /// Records a request refused before it could be decided or forwarded: why, for the client.
    pub(crate) fn refuse(
        &self,
        snapshot: &Snapshot,
        who: &Who,
        request: &Request<'_>,
        reasons: &[DenyReason],
    ) -> Why {
        let subject = Subject::new(&who.role, &who.session)
            .policy_version(snapshot.policy_version.as_deref());
        self.dispatch
            .refuse(&subject, who.caller(), request, reasons);
        Why::of(who, reasons)
    }

    /// Decides `request` for `who` and records it (intent before `run`, outcome after); runs
    /// `run` only when it is allowed. `refused` words a refusal for the client.
    pub(crate) async fn act<O: serde::Serialize, E: std::fmt::Display + Into<Unanswered>>(
        &self,
        snapshot: &Snapshot,
        who: &Who,
        request: &Request<'_>,
        refused: impl Fn(&Why) -> ErrorData,
        run: impl std::future::Future<Output = Result<O, E>>,
    ) -> Result<O, ErrorData> {
        let Some(ctx) = &who.ctx else {
            return Err(refused(&self.refuse(
                snapshot,
                who,
                request,
                &[DenyReason::NoRole],
            )));
        };
        let outcome = self
            .dispatch
            .act_async(ctx, who.caller(), request, run)
            .await;
        answered(outcome, refused)
    }
}

impl Gateway {
    /// The error of a refused tool shown as `shown`.
    pub(crate) fn refused(&self, shown: &str, why: &Why) -> ErrorData {
        refused_by(self.name, "tool", shown, why)
    }

    /// The error of a refused `kind` (`tool`, `resource`, `prompt`) shown as `shown`.
    pub(crate) fn refused_item(&self, kind: &str, shown: &str, why: &Why) -> ErrorData {
        refused_by(self.name, kind, shown, why)
    }
}
