//! The handler facing the server: it passes the server's list changes on to the proxy, and
//! its requests to the client (sampling, elicitation, roots) only where the client's role
//! allows them, each one allowed recorded.
//!
//! Servers of 2025-11-25 send these requests; 2026-07-28 replaces them with results that ask the
//! client for input, and rmcp marks sampling and roots deprecated (SEP-2577). They are governed
//! here for as long as servers send them.

#![allow(deprecated)]

use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use ::rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestMethod, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationCreateRequestMethod,
    Implementation, ListRootsRequestMethod, ListRootsResult, ResourceUpdatedNotificationParam,
};
use ::rmcp::{ErrorData, Peer, RoleServer};
use serde::Serialize;
use serde_json::{Value, json};

use capability::Policy;
use capability::audit::{AuditedDispatch, Caller, Outcome, Request, Subject};
use capability::authz::{Action, Authorize, DenyReason, ServerRequestKind, ToolContext};
use capability::rmcp::REFUSED_CODE;

/// Why a server's request was not answered by the client: refused (with the error to send),
/// or not sent for want of a client.
pub(crate) struct NotSent(Option<ErrorData>);

impl NotSent {
    fn or(self, fallback: ErrorData) -> ErrorData {
        self.0.unwrap_or(fallback)
    }
}

/// The gate of the server's requests to the client: decided for the client's role (the
/// policy's `server_requests`), recorded, and sent to the client only when allowed.
pub(crate) struct ServerRequests {
    server: String,
    /// Who refuses (`capability proxy`, `capability-gateway`), for the server's errors.
    by: &'static str,
    dispatch: Arc<AuditedDispatch>,
    /// The role's decider and the policy's version, swapped by a reload.
    decided: RwLock<Decided>,
    /// The stdio client's role (`None` over HTTP).
    stdio_role: Option<String>,
    role: String,
    session: String,
    front: Arc<OnceLock<Peer<RoleServer>>>,
}

/// What decides a server's requests.
struct Decided {
    /// The role's decider over stdio (one client); `None` over HTTP, where a server's request
    /// cannot be tied to one of the clients.
    decider: Option<ToolContext>,
    policy_version: Option<String>,
    /// The requests some role of the policy may be asked by this server (what an HTTP front,
    /// whose callers' roles differ, tells the server it can do: each request is decided for
    /// the caller of the call it belongs to).
    any_role: Vec<ServerRequestKind>,
}

/// The requests of `server` that some role of `policy` allows.
fn any_role(server: &str, policy: &Policy) -> Vec<ServerRequestKind> {
    ServerRequestKind::ALL
        .into_iter()
        .filter(|kind| {
            policy.roles().any(|role| {
                policy.context(role, "server-requests").is_some_and(|ctx| {
                    ctx.decide_action(&Action::ServerRequest {
                        server,
                        kind: *kind,
                    })
                    .is_allowed()
                })
            })
        })
        .collect()
}

/// Why a server's request over an HTTP front is refused when it cannot be tied to a call.
const NO_CLIENT: &str = "many clients are served over Streamable HTTP, and this request cannot be \
                         tied to one of them";

impl ServerRequests {
    /// The gate of `server` when `by` (a gateway whose sessions are named under `scope`) serves
    /// it, to the client that `front` will hold once it connected (shared by every server of
    /// the gateway).
    pub(crate) fn of(
        server: &str,
        by: &'static str,
        scope: &str,
        policy: &Policy,
        role: Option<&str>,
        dispatch: Arc<AuditedDispatch>,
        front: Arc<OnceLock<Peer<RoleServer>>>,
    ) -> Self {
        let role_name = role.unwrap_or("(http)").to_owned();
        // Its own session: a server's requests do not spend the client's budget. The stdio
        // client's session with `/server-requests`, as rmcp's path names it for a request made
        // during a call (`Gateway::serve_ask`), so a request made during a call the lane took
        // is decided and recorded alike.
        let session = format!("mcp:{scope}/{role_name}/server-requests");
        ServerRequests {
            server: server.to_owned(),
            by,
            dispatch,
            decided: RwLock::new(Decided {
                decider: role.and_then(|role| policy.context(role, session.clone())),
                policy_version: policy.version().map(str::to_owned),
                any_role: any_role(server, policy),
            }),
            stdio_role: role.map(str::to_owned),
            role: role_name,
            session,
            front,
        }
    }

    /// Decides under `policy` from now on (a reload). What the server was told the client can
    /// do at connection stays: a request it was told of that the new policy refuses is refused.
    pub(crate) fn set_policy(&self, policy: &Policy) {
        *self.decided.write().unwrap_or_else(PoisonError::into_inner) = Decided {
            decider: self
                .stdio_role
                .as_deref()
                .and_then(|role| policy.context(role, self.session.clone())),
            policy_version: policy.version().map(str::to_owned),
            any_role: any_role(&self.server, policy),
        };
    }

    /// What to tell the server of the client: the server requests the role allows.
    pub(crate) fn client_config(&self) -> ClientConfig {
        ClientConfig::new(
            self.capabilities(),
            Implementation::new(self.by, env!("CARGO_PKG_VERSION")),
        )
    }

    /// `notifications/resources/updated` from the server: told to the stdio client when its
    /// role may read the URI on this server (over HTTP, to no one: an update cannot be tied to
    /// one of the clients). Whether it was told.
    pub(crate) async fn resource_updated(&self, params: ResourceUpdatedNotificationParam) -> bool {
        let readable = self
            .decided
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .decider
            .as_ref()
            .is_some_and(|decider| {
                decider
                    .decide_action(&Action::Resource {
                        server: &self.server,
                        uri: &params.uri,
                    })
                    .is_allowed()
            });
        match self.front.get() {
            Some(peer) if readable => peer.notify_resource_updated(params).await.is_ok(),
            _ => false,
        }
    }

    /// The server's `notifications/message`, to the stdio client when it asked for messages at
    /// its level or above (`level`); over HTTP, to no one (it cannot be tied to one client).
    pub(crate) async fn log(
        &self,
        params: ::rmcp::model::LoggingMessageNotificationParam,
        level: Option<::rmcp::model::LoggingLevel>,
    ) -> bool {
        let Some(level) = level.filter(|_| self.stdio_role.is_some()) else {
            return false;
        };
        if !crate::at_or_above(params.level, level) {
            return false;
        }
        match self.front.get() {
            Some(peer) => peer.notify_logging_message(params).await.is_ok(),
            None => false,
        }
    }

    /// `sampling/createMessage`, decided, recorded, sent to the client when allowed.
    pub(crate) async fn sample(
        &self,
        params: CreateMessageRequestParams,
        unnamed: &str,
    ) -> Result<CreateMessageResult, ErrorData> {
        let input = serde_json::to_value(&params).unwrap_or(Value::Null);
        self.forward(
            ServerRequestKind::Sampling,
            &input,
            unnamed,
            |peer| async move { peer.create_message(params).await },
        )
        .await
        .map_err(|e| e.or(ErrorData::method_not_found::<CreateMessageRequestMethod>()))
    }

    /// `elicitation/create`, decided, recorded, sent to the client when allowed.
    pub(crate) async fn elicit(
        &self,
        params: ElicitRequestParams,
        unnamed: &str,
    ) -> Result<ElicitResult, ErrorData> {
        let input = serde_json::to_value(&params).unwrap_or(Value::Null);
        self.forward(
            ServerRequestKind::Elicitation,
            &input,
            unnamed,
            |peer| async move { peer.create_elicitation(params).await },
        )
        .await
        .map_err(|e| e.or(ErrorData::method_not_found::<ElicitationCreateRequestMethod>()))
    }

    /// `roots/list`, decided, recorded, sent to the client when allowed.
    pub(crate) async fn roots(&self, unnamed: &str) -> Result<ListRootsResult, ErrorData> {
        self.forward(
            ServerRequestKind::Roots,
            &json!({}),
            unnamed,
            |peer| async move { peer.list_roots().await },
        )
        .await
        .map_err(|e| e.or(ErrorData::method_not_found::<ListRootsRequestMethod>()))
    }

    /// What the proxy tells the server it can do: the server requests the role allows (over
    /// HTTP, those some role allows).
    fn capabilities(&self) -> ClientCapabilities {
        let decided = self.decided.read().unwrap_or_else(PoisonError::into_inner);
        let allows = |kind| match &decided.decider {
            Some(decider) => decider
                .decide_action(&Action::ServerRequest {
                    server: &self.server,
                    kind,
                })
                .is_allowed(),
            None => decided.any_role.contains(&kind),
        };
        let mut capabilities = ClientCapabilities::default();
        if allows(ServerRequestKind::Sampling) {
            capabilities.sampling = ClientCapabilities::builder()
                .enable_sampling()
                .build()
                .sampling;
        }
        if allows(ServerRequestKind::Elicitation) {
            capabilities.elicitation = ClientCapabilities::builder()
                .enable_elicitation()
                .build()
                .elicitation;
        }
        if allows(ServerRequestKind::Roots) {
            capabilities.roots = ClientCapabilities::builder().enable_roots().build().roots;
        }
        capabilities
    }

    /// Decides the request, records it, and sends it to the client when allowed. Refused (and
    /// recorded) over HTTP, where no client can be named: `unnamed` says why.
    async fn forward<O, F, Fut>(
        &self,
        kind: ServerRequestKind,
        input: &Value,
        unnamed: &str,
        send: F,
    ) -> Result<O, NotSent>
    where
        O: Serialize,
        F: FnOnce(Peer<RoleServer>) -> Fut,
        Fut: std::future::Future<Output = Result<O, ::rmcp::ServiceError>>,
    {
        let (decider, policy_version) = {
            let decided = self.decided.read().unwrap_or_else(PoisonError::into_inner);
            (decided.decider.clone(), decided.policy_version.clone())
        };
        let Some(decider) = &decider else {
            let action = Action::ServerRequest {
                server: &self.server,
                kind,
            };
            let request = Request::mcp(kind.method(), action, input);
            let agent = format!("server:{}", self.server);
            let reason = DenyReason::Undecidable {
                why: format!("{NO_CLIENT}: {unnamed}"),
            };
            let subject =
                Subject::new(&self.role, &self.session).policy_version(policy_version.as_deref());
            self.dispatch.refuse(
                &subject,
                Caller::new(&agent),
                &request,
                std::slice::from_ref(&reason),
            );
            return Err(NotSent(Some(refused(self.by, kind, &reason.to_string()))));
        };
        let front = self.front.get().cloned();
        ask_client(
            &self.dispatch,
            self.by,
            &self.server,
            kind,
            input,
            decider,
            async {
                let peer = front.ok_or_else(|| "the client has not connected".to_owned())?;
                send(peer).await.map_err(|e| e.to_string())
            },
        )
        .await
        .map_err(|e| NotSent(Some(e)))
    }
}

/// A server's request to a client: decided for the client's role (`decider`: the policy's
/// `server_requests`), recorded (intent, then outcome), and sent (`send`) only when allowed;
/// the client's answer, or the error the server gets. `by` names who refuses.
pub(crate) async fn ask_client<O, Fut>(
    dispatch: &AuditedDispatch,
    by: &str,
    server: &str,
    kind: ServerRequestKind,
    input: &Value,
    decider: &ToolContext,
    send: Fut,
) -> Result<O, ErrorData>
where
    O: Serialize,
    Fut: std::future::Future<Output = Result<O, String>>,
{
    let action = Action::ServerRequest { server, kind };
    let request = Request::mcp(kind.method(), action, input);
    let agent = format!("server:{server}");
    let caller = Caller::new(&agent);
    match dispatch.act_async(decider, caller, &request, send).await {
        Outcome::Done(answer) => Ok(answer),
        Outcome::Failed(error) => Err(ErrorData::internal_error(
            format!("the client did not answer `{}`: {error}", kind.method()),
            None,
        )),
        Outcome::Denied(denial) => Err(refused(by, kind, &denial.to_string())),
        Outcome::Degrade(reason) => Err(refused(by, kind, &reason.to_string())),
        Outcome::AuditFailed(error) => Err(refused(
            by,
            kind,
            &format!("its audit record could not be written: {error}"),
        )),
    }
}

/// The error the server gets for a request refused by `by`.
fn refused(by: &str, kind: ServerRequestKind, why: &str) -> ErrorData {
    ErrorData::new(
        ::rmcp::model::ErrorCode(REFUSED_CODE),
        format!("`{}` refused by {by}: {why}", kind.method()),
        Some(json!({"method": kind.method()})),
    )
}
