//! `tools/list` and `tools/call` through rmcp: the role's union of the fleet's tools, and a
//! call routed to its server, decided, recorded and passed on in an `mcp.client` span; and
//! [`Gateway::forward`], the decision and the records of every call (rmcp's and the stdio
//! lane's alike), and [`Gateway::route`], where a call goes (every path's).

use ::rmcp::RoleServer;
use ::rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, ErrorData, ListToolsResult,
    RequestMetaObject,
};
use ::rmcp::service::RequestContext;
use serde_json::Value;

use capability::mcp::telemetry::{Operation, Transport};
use capability::rmcp::traced::{self, Target};

use capability::CapabilityManifest;
use capability::audit::tlog::{Receipt, wants_receipt};
use capability::audit::{Consent, Request};
use capability::authz::{Action, DenyReason, ToolContext};
use capability::mcp::WithheldReason;

use crate::serve::completed::Completed;
use crate::serve::gateway::{Gateway, Snapshot};
use crate::serve::refusal::{Answer, Unanswered, answered, unanswered};
use crate::serve::who::Who;

impl Gateway {
    /// The caller's tools: each visible one under its shown name (empty without a role).
    pub(crate) fn tools_listed(&self, context: &RequestContext<RoleServer>) -> ListToolsResult {
        let snapshot = self.current();
        let who = self.who(&snapshot, context);
        let Some(ctx) = &who.ctx else {
            return ListToolsResult::with_all_items(Vec::new());
        };
        let view = snapshot.fleet.for_caller(ctx);
        let tools = view
            .visible()
            .filter_map(|tool| {
                let key = (
                    view.server_of(tool).to_owned(),
                    tool.manifest().name().to_owned(),
                );
                let mut listed = snapshot.tools.get(&key)?.clone();
                listed.name = tool.shown.clone().into();
                self.say_held(&snapshot, &who, &key, &mut listed);
                Some(listed)
            })
            .collect();
        let mut page = ListToolsResult::with_all_items(tools);
        page.cache_scope = Some(CacheScope::Private);
        page
    }

    /// The tool shown as `shown` (its server's, under the shown name), whoever asks: rmcp checks
    /// a request's `Mcp-Param-*` headers (SEP-2243) against its input schema before the call
    /// is routed, and asks without a caller. What the caller may see and call is decided by
    /// the listing and the call, not here.
    pub(crate) fn tool_shown(&self, shown: &str) -> Option<::rmcp::model::Tool> {
        let snapshot = self.current();
        let route = snapshot.fleet.route(shown)?;
        let mut tool = snapshot
            .tools
            .get(&(route.server.to_owned(), route.tool.to_owned()))?
            .clone();
        tool.name = shown.to_owned().into();
        Some(tool)
    }

    /// A call through rmcp: routed, decided and recorded, passed on under the tool's own name.
    pub(crate) async fn tool_called(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let snapshot = self.current();
        let who = self.who(&snapshot, context);
        let shown = request.name.to_string();
        // `"capability/receipt": true` in `_meta`: the outcome record's receipt in the result's.
        // (rmcp hands the request's `_meta` over in the context.)
        let receipt = wants_receipt(Some(&context.meta.0.0));
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let route = self.route(&snapshot, &who, &shown, &input)?;
        let mut forwarded = request.clone();
        forwarded.name = route.tool.to_owned().into();
        let consented = self
            .consented(
                &snapshot,
                &who,
                &shown,
                &route,
                input,
                context,
                &mut forwarded,
            )
            .await;
        let (consent, input) = match consented {
            Ok(consented) => consented,
            // A client of 2026-07-28 is asked for the approval in the revision's own way; an
            // older one gets the refusal, which carries the proposal as its data.
            Err(refused) if crate::serve::bridge::modern(context) => {
                return crate::serve::asked::approval_wanted(&refused).ok_or(refused);
            }
            Err(refused) => return Err(refused),
        };
        let server = route.server;
        let how = (consent.as_ref(), receipt);
        let (answered, receipt) = self
            .forward(&who, &shown, &route, &input, how, async {
                // Inside the call, after its intent: a caller's token that cannot be exchanged
                // for the server is the call's failure, on record.
                let connection = self
                    .leg(&snapshot, server, context)
                    .await
                    .map_err(Unanswered::Server)?;
                // In the call's span: the leg to the server is its child.
                let leg = leg(
                    &snapshot,
                    "tools/call",
                    Target::Tool(route.tool),
                    server,
                    context,
                    &mut forwarded.meta,
                );
                let call =
                    self.call_server(&snapshot, &who, server, &connection, forwarded, context);
                let result = traced::send(leg, call).await;
                match result {
                    Ok(answer) => Ok(Answer(answer)),
                    Err(::rmcp::ServiceError::McpError(error)) => Err(Unanswered::Server(error)),
                    Err(error) => {
                        // The caller's own connection failed: the next call opens another.
                        if let Some(delegated) = snapshot.delegated.get(server) {
                            delegated.failed(context).await;
                        }
                        Err(self.gone(&snapshot, server, error).await)
                    }
                }
            })
            .await?;
        // `resultType` for a client of 2026-07-28 when the server (of 2025-11-25) left it out.
        let mut response = answered.0.completed();
        if let (Some(receipt), CallToolResponse::Complete(result)) = (receipt, &mut response) {
            receipt.insert_into(result.meta.get_or_insert_with(Default::default));
        }
        Ok(response)
    }
}

impl Gateway {
    /// Why `server` did not answer a request: how the server ended, when it did (its exit
    /// comes a moment after its connection closes), else the connection's error.
    pub(crate) async fn gone(
        &self,
        snapshot: &Snapshot,
        server: &str,
        error: ::rmcp::ServiceError,
    ) -> Unanswered {
        let ended = match snapshot.exits.get(server) {
            Some(ended) => ended.why(&error).await,
            None => None,
        };
        match ended {
            Some(why) => {
                Unanswered::Gone(format!("the MCP server `{server}` did not answer: {why}"))
            }
            None => unanswered(server)(error),
        }
    }
}

/// The `mcp.client` operation of a request passed on to `server`, with the trace context in
/// its `_meta` ([`traced::client_operation`]).
pub(crate) fn leg(
    snapshot: &Snapshot,
    method: &str,
    target: Target<'_>,
    server: &str,
    context: &RequestContext<RoleServer>,
    meta: &mut Option<RequestMetaObject>,
) -> Operation {
    traced::client_operation(
        method,
        target,
        Some(server),
        transport(snapshot, server),
        Some(&context.meta),
        meta,
    )
}

/// How `server` is reached: Streamable HTTP when the policy gives it a `url`.
pub(crate) fn transport(snapshot: &Snapshot, server: &str) -> Transport {
    let http = snapshot
        .policy
        .servers()
        .iter()
        .any(|entry| entry.name() == server && entry.url().is_some());
    if http {
        Transport::Tcp
    } else {
        Transport::Pipe
    }
}

impl Gateway {
    /// Decides the call on its tool's manifest and records it (intent before `run`, outcome
    /// after); runs `run` only when it is allowed. The error is what the client is answered.
    /// With `receipt` asked, the outcome record's receipt too (once it is written).
    pub(crate) async fn forward<O: serde::Serialize, E: std::fmt::Display + Into<Unanswered>>(
        &self,
        who: &Who,
        shown: &str,
        route: &Route<'_>,
        input: &Value,
        (consent, receipt): (Option<&Consent>, bool),
        run: impl std::future::Future<Output = Result<O, E>>,
    ) -> Result<(O, Option<Receipt>), ErrorData> {
        let call = Request::mcp("tools/call", Action::CallTool(route.manifest), input);
        let caller = match consent {
            Some(consent) => who.caller().consent(consent),
            None => who.caller(),
        };
        let (outcome, receipt) = self
            .dispatch
            .act_async_with_receipt(route.ctx(), caller, &call, run, receipt)
            .await;
        answered(outcome, |why| self.refused(shown, &why.of_who(who))).map(|o| (o, receipt))
    }
}

/// Where a call goes: its server, the tool's own name there, its manifest, and the caller's
/// decider.
pub(crate) struct Route<'s> {
    pub(crate) server: &'s str,
    pub(crate) tool: &'s str,
    pub(crate) manifest: &'s CapabilityManifest,
    ctx: &'s ToolContext,
}

impl Route<'_> {
    /// The caller's decider.
    pub(crate) fn ctx(&self) -> &ToolContext {
        self.ctx
    }
}

impl Gateway {
    /// Where the call of `shown` goes, or its refusal (recorded) when it is withheld, not
    /// listed, or the caller has no role: such a call reaches no server.
    pub(crate) fn route<'s>(
        &self,
        snapshot: &'s Snapshot,
        who: &'s Who,
        shown: &str,
        input: &Value,
    ) -> Result<Route<'s>, ErrorData> {
        let Some(route) = snapshot.fleet.route(shown) else {
            let stand_in = CapabilityManifest::builder(shown)
                .build()
                .or_else(|_| CapabilityManifest::builder("unlisted_tool").build())
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            let reason = WithheldReason::NotListed.to_deny();
            let call = Request::mcp("tools/call", Action::CallTool(&stand_in), input);
            return Err(self.refused(shown, &self.refuse(snapshot, who, &call, &[reason])));
        };
        let manifest = route.listed.manifest();
        let reasons: Vec<DenyReason> = match &who.ctx {
            _ if !route.listed.is_visible() => route
                .listed
                .reasons()
                .iter()
                .map(WithheldReason::to_deny)
                .collect(),
            None => vec![DenyReason::NoRole],
            Some(ctx) => {
                return Ok(Route {
                    server: route.server,
                    tool: route.tool,
                    manifest,
                    ctx,
                });
            }
        };
        let call = Request::mcp("tools/call", Action::CallTool(manifest), input);
        Err(self.refused(shown, &self.refuse(snapshot, who, &call, &reasons)))
    }
}
