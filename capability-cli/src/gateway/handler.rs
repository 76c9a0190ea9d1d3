//! The gateway as one MCP server to its client: the role's union of the fleet's tools under
//! their shown names, each call routed to its server, decided on the tool's own manifest and
//! recorded (intent before it is forwarded, outcome after) with its server as provider. A tool
//! withheld by the fleet (drift, a duplicate or shared name) or by the role, and a name no server
//! has, is refused on record and reaches no server.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use ::rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorCode, GetPromptRequestParams, GetPromptResponse,
    Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
};
use ::rmcp::service::RequestContext;
use ::rmcp::{ErrorData, Peer, RoleClient, RoleServer, ServerHandler};
use serde_json::{Value, json};

use capability::Policy;
use capability::audit::Principal;
use capability::audit::{AuditedDispatch, Caller, Outcome, Request, Subject};
use capability::authz::{Action, Authorize, DenyReason, ToolContext};
use capability::mcp::Fleet;
use capability::rmcp::REFUSED_CODE;
use capability::rmcp::traced::{Target, serve, server_operation};
use capability_http::{Authenticated, VerifiedSession};

use super::items::Items;
use super::lane::Lane;
use crate::proxy::Changed;

/// The name the gateway gives itself.
pub const GATEWAY_NAME: &str = "capability-gateway";

/// What the client is served from, swapped whole on a change, a restart or a reload: the fleet,
/// each server's tools as it listed them, the connections, and the role's decider under the
/// policy in force.
pub(super) struct Snapshot {
    pub(super) fleet: Fleet,
    /// The fleet's resources and prompts.
    pub(super) items: Items,
    pub(super) tools: HashMap<(String, String), Tool>,
    pub(super) peers: HashMap<String, Peer<RoleClient>>,
    /// The relays of the servers' progress for the calls passed on through rmcp, by server.
    pub(super) progress: HashMap<String, crate::proxy::ProgressRelay>,
    /// The calls in flight through rmcp, by server (`relay.rs`).
    pub(super) calls: HashMap<String, super::relay::Calls>,
    /// The sessions of 2025-11-25 next to connections of 2026-07-28, by server (`legacy.rs`).
    pub(super) legacy: HashMap<String, Arc<super::legacy::Legacy>>,
    /// The servers called on the caller's behalf (`delegate.rs`), by server.
    pub(super) delegated: HashMap<String, Arc<super::delegate::Delegated>>,
    /// How each server ended, once it did (`process.rs`), by server.
    pub(super) exits: HashMap<String, super::process::Ended>,
    /// The forwarding lanes, by server (spawned servers only).
    pub(super) lanes: HashMap<String, Arc<Lane>>,
    /// The forwarding lanes, by server (HTTP servers only).
    pub(super) reaches: HashMap<String, Arc<super::reach::Reach>>,
    pub(super) policy: Arc<Policy>,
    pub(super) policy_version: Option<String>,
    /// The approvals of the policy's `[approvals]` table (`approvals.rs`).
    pub(super) approvals: Option<Arc<super::approvals::Approvals>>,
    /// Whether some server's resources are served.
    pub(super) resources: bool,
    /// Whether some server's prompts are served.
    pub(super) prompts: bool,
}

/// Who asks: over stdio the one client of the gateway's role; over HTTP, whom the edge
/// authenticated (its role from its token, narrowed to the token's scopes).
pub(super) struct Who {
    role: String,
    session: String,
    principal: Option<Principal>,
    pub(super) ctx: Option<ToolContext>,
}

/// The handler the client talks to.
#[derive(Clone)]
pub(super) struct Gateway {
    /// The client's role over stdio; `None` over HTTP, where each request's comes from its token.
    pub(super) role: Option<String>,
    pub(super) dispatch: Arc<AuditedDispatch>,
    pub(super) current: Arc<RwLock<Arc<Snapshot>>>,
    /// The clients of the HTTP front, told when the tools change (`None` over stdio, where the
    /// one client is told through its own connection).
    pub(super) clients: Option<crate::proxy::Clients>,
    /// Where the tool versions it sees are recorded (`versions.rs`).
    pub(super) versions: Option<Arc<dyn capability_store::Store>>,
    /// The log level each client asked for (`logging/setLevel`), shared with the servers'
    /// handlers.
    pub(super) levels: super::relay::Levels,
    /// The name it gives itself (to clients and servers, and in its refusals).
    pub(super) name: &'static str,
    /// What its sessions are named under (`mcp:<scope>/<role>/...`): `gateway`, or a proxy's
    /// one server.
    pub(super) scope: Arc<str>,
}

impl Gateway {
    pub(super) fn current(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Serves `next` from now on.
    pub(super) fn swap(&self, next: Snapshot) {
        self.saw_tools(&next);
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(next);
    }

    /// The stdio client, of the gateway's role (`None` over HTTP).
    pub(super) fn stdio_client(&self, snapshot: &Snapshot) -> Option<Who> {
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
    pub(super) fn tell_clients(&self, kind: Changed) {
        if let Some(clients) = self.clients.clone() {
            tokio::spawn(async move {
                clients.notify(kind).await;
            });
        }
    }

    pub(super) fn who(&self, snapshot: &Snapshot, context: &RequestContext<RoleServer>) -> Who {
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
    pub(super) fn http_caller(
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
    pub(super) fn refuse(
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
    pub(super) async fn act<O: serde::Serialize, E: std::fmt::Display + Into<Unanswered>>(
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

impl Who {
    /// The session its requests are counted in (`gateway:<role>` over stdio,
    /// `gateway:<principal>/<session id>` over HTTP).
    pub(super) fn session(&self) -> &str {
        &self.session
    }

    /// The role (`(none)` for a caller without one).
    pub(super) fn role(&self) -> &str {
        &self.role
    }

    /// Who proposes a held call: the principal the edge authenticated, or the stdio role.
    pub(super) fn proposer(&self) -> String {
        match &self.principal {
            Some(principal) => principal.key(),
            None => format!("role:{}", self.role),
        }
    }

    pub(super) fn caller(&self) -> Caller<'_> {
        let caller = Caller::new("mcp-client");
        match &self.principal {
            Some(principal) => caller.principal(principal),
            None => caller,
        }
    }
}

/// Whether `who` may see `action` (a caller without a role sees nothing).
pub(super) fn may(who: &Who, action: &Action<'_>) -> bool {
    who.ctx
        .as_ref()
        .is_some_and(|ctx| ctx.decide_action(action).is_allowed())
}

/// Why a request passed on to a server did not succeed: the server's own error, kept whole (its
/// code and data reach the client as the server gave them: `-32021` with the capabilities it
/// requires, say), or why no answer came.
#[derive(Debug)]
pub(super) enum Unanswered {
    /// The server answered with this error.
    Server(ErrorData),
    /// No answer: the server is gone, the connection failed, the call was cancelled.
    Gone(String),
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unanswered::Server(error) => f.write_str(&error.message),
            Unanswered::Gone(why) => f.write_str(why),
        }
    }
}

impl From<String> for Unanswered {
    fn from(why: String) -> Self {
        Unanswered::Gone(why)
    }
}

impl From<Unanswered> for ErrorData {
    fn from(unanswered: Unanswered) -> Self {
        match unanswered {
            Unanswered::Server(error) => error,
            Unanswered::Gone(why) => ErrorData::internal_error(why, None),
        }
    }
}

/// What a server's failure to answer tells the client.
pub(super) fn unanswered(server: &str) -> impl Fn(::rmcp::ServiceError) -> Unanswered + '_ {
    move |e| match e {
        ::rmcp::ServiceError::McpError(error) => Unanswered::Server(error),
        other => Unanswered::Gone(format!("the MCP server `{server}` did not answer: {other}")),
    }
}

/// A server's answer, for the record: the result, or what the server asked for instead.
pub(super) struct Answer<T>(pub(super) T);

impl serde::Serialize for Answer<CallToolResponse> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            CallToolResponse::Complete(result) => result.serialize(serializer),
            CallToolResponse::InputRequired(asked) => asked.serialize(serializer),
            CallToolResponse::Task(task) => task.serialize(serializer),
            _ => serializer.serialize_str("a response this build does not know"),
        }
    }
}

/// The client's answer to a call's `outcome`: its output, the tool's error, or the refusal
/// `refused` words.
pub(super) fn answered<O, E: Into<Unanswered>>(
    outcome: Outcome<O, E>,
    refused: impl Fn(&Why) -> ErrorData,
) -> Result<O, ErrorData> {
    match outcome {
        Outcome::Done(output) => Ok(output),
        Outcome::Failed(error) => Err(error.into().into()),
        Outcome::Denied(denial) => Err(refused(&Why::denied(&denial))),
        Outcome::Degrade(reason) => Err(refused(&Why::dispatch(reason.to_string()))),
        Outcome::AuditFailed(error) => Err(refused(&Why::dispatch(format!(
            "its audit record could not be written: {error}"
        )))),
    }
}

/// Why a request is refused, as its client is told: the decision's reasons (each with its
/// code), or the dispatcher's own word (a degraded session, a trail that cannot be written);
/// and whose request it was.
#[derive(Clone, Debug)]
pub(super) struct Why {
    text: String,
    role: Option<String>,
    principal: Option<Principal>,
    reasons: Vec<Value>,
    dispatch: Option<String>,
}

impl Why {
    /// `who`'s request refused for `reasons`.
    pub(super) fn of(who: &Who, reasons: &[DenyReason]) -> Why {
        Why {
            text: reasons
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            role: Some(who.role.clone()),
            principal: who.principal.clone(),
            reasons: reasons.iter().map(reason_json).collect(),
            dispatch: None,
        }
    }

    /// A refusal the decision gave.
    fn denied(denial: &capability::authz::Denial) -> Why {
        let value = serde_json::to_value(denial).unwrap_or(Value::Null);
        let reasons: Vec<Value> = value["reasons"].as_array().cloned().unwrap_or_default();
        Why {
            text: denial.to_string(),
            role: value["role"].as_str().map(str::to_owned),
            principal: None,
            reasons,
            dispatch: None,
        }
    }

    /// A refusal of the dispatcher's own.
    pub(super) fn dispatch(text: String) -> Why {
        Why {
            dispatch: Some(text.clone()),
            text,
            role: None,
            principal: None,
            reasons: Vec::new(),
        }
    }

    /// This refusal, of `who`'s request (its role and principal named).
    pub(super) fn of_who(&self, who: &Who) -> Why {
        Why {
            role: self.role.clone().or_else(|| Some(who.role.clone())),
            principal: self.principal.clone().or_else(|| who.principal.clone()),
            ..self.clone()
        }
    }
}

/// A reason as data: its tagged JSON (`{"reason": "not_allowed", ...}`) and its words.
fn reason_json(reason: &DenyReason) -> Value {
    let mut value = serde_json::to_value(reason).unwrap_or(Value::Null);
    if let Value::Object(object) = &mut value {
        object.insert("message".to_owned(), Value::String(reason.to_string()));
    }
    value
}

/// The error of a refused `kind` (`tool`, `resource`, `prompt`) shown as `shown`, refused by
/// `by` (the engine's name: `capability-gateway`, `capability-proxy`): its message says why,
/// its data names what was asked, the caller's role and principal, and every reason with its
/// code (as `GovernedServer` answers).
pub(super) fn refused_by(by: &str, kind: &str, shown: &str, why: &Why) -> ErrorData {
    let key = if kind == "resource" { "uri" } else { kind };
    let mut data = serde_json::Map::new();
    data.insert(key.to_owned(), json!(shown));
    data.insert("role".to_owned(), json!(why.role));
    if let Some(principal) = &why.principal {
        data.insert("principal".to_owned(), json!(principal));
    }
    data.insert("reasons".to_owned(), Value::Array(why.reasons.clone()));
    if let Some(dispatch) = &why.dispatch {
        data.insert("dispatch".to_owned(), json!(dispatch));
    }
    ErrorData::new(
        ErrorCode(REFUSED_CODE),
        format!("{kind} `{shown}` refused by {by}: {}", why.text),
        Some(Value::Object(data)),
    )
}

impl Gateway {
    /// The error of a refused tool shown as `shown`.
    pub(super) fn refused(&self, shown: &str, why: &Why) -> ErrorData {
        refused_by(self.name, "tool", shown, why)
    }

    /// The error of a refused `kind` (`tool`, `resource`, `prompt`) shown as `shown`.
    pub(super) fn refused_item(&self, kind: &str, shown: &str, why: &Why) -> ErrorData {
        refused_by(self.name, kind, shown, why)
    }
}

impl ServerHandler for Gateway {
    // `enable_logging`: rmcp marks logging deprecated (SEP-2577); clients of 2025-11-25 use it.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let snapshot = self.current();
        let mut capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_completions()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        // What no server's items are served for is not said (a proxy of tools only).
        if !snapshot.resources {
            capabilities.resources = None;
        }
        if !snapshot.prompts {
            capabilities.prompts = None;
        }
        if !snapshot.resources && !snapshot.prompts {
            capabilities.completions = None;
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(self.name, env!("CARGO_PKG_VERSION")))
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let operation = server_operation("ping", Target::None, &context);
        serve(operation, std::future::ready(Ok(()))).await
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let operation = server_operation("initialize", Target::None, &context);
        // rmcp's own `initialize`, in the operation's span.
        context.peer.set_peer_info(request.clone());
        serve(
            operation,
            std::future::ready(self.negotiate_initialize(&request)),
        )
        .await
    }

    async fn on_initialized(&self, context: ::rmcp::service::NotificationContext<RoleServer>) {
        if let Some(clients) = &self.clients {
            clients.initialized(context.peer);
        }
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &::rmcp::model::SubscriptionFilter,
    ) -> Option<::rmcp::model::SubscriptionFilter> {
        self.clients
            .as_ref()
            .map(|_| crate::proxy::Clients::accepted())
    }

    async fn listen(&self, context: ::rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        if let Some(clients) = &self.clients {
            clients.listen(context).await;
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let operation = server_operation("tools/list", Target::None, &context);
        serve(operation, async { Ok(self.tools_listed(&context)) }).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let operation = server_operation("resources/list", Target::None, &context);
        serve(operation, async { Ok(self.resources_listed(&context)) }).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let operation = server_operation("resources/templates/list", Target::None, &context);
        serve(operation, async { Ok(self.templates_listed(&context)) }).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let operation =
            server_operation("resources/read", Target::Resource(&request.uri), &context);
        serve(operation, self.resource_read(request, &context)).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let operation = server_operation("prompts/list", Target::None, &context);
        serve(operation, async { Ok(self.prompts_listed(&context)) }).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let operation = server_operation("prompts/get", Target::Prompt(&request.name), &context);
        serve(operation, self.prompt_got(request, &context)).await
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: ::rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let operation = server_operation(
            "resources/subscribe",
            Target::Resource(&request.uri),
            &context,
        );
        serve(
            operation,
            self.subscription(request.uri.clone(), true, &context),
        )
        .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: ::rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let operation = server_operation(
            "resources/unsubscribe",
            Target::Resource(&request.uri),
            &context,
        );
        serve(
            operation,
            self.subscription(request.uri.clone(), false, &context),
        )
        .await
    }

    async fn complete(
        &self,
        request: ::rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<::rmcp::model::CompleteResult, ErrorData> {
        let operation = server_operation("completion/complete", Target::None, &context);
        serve(operation, self.completion(request, &context)).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: ::rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let operation = server_operation("logging/setLevel", Target::None, &context);
        serve(operation, self.level_set(request, &context)).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let operation = server_operation("tools/call", Target::Tool(&request.name), &context);
        serve(operation, self.tool_called(request, &context)).await
    }
}
