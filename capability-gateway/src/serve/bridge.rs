//! One call through rmcp's path, whatever revision the client and the server speak: what the
//! server is told of the caller, and what the server asks back while it serves the call.
//!
//! - **What the server is told** (the request's `_meta`, which 2026-07-28 servers read): the
//!   client's own capabilities, narrowed to the server requests the caller's role allows from
//!   that server (`server_requests`), so that a server never plans on a request the gateway
//!   would refuse; and the log level the client asked for (its request's
//!   `io.modelcontextprotocol/logLevel`, or its session's `logging/setLevel`).
//! - **A server's request during the call** (a 2025-11-25 server's `sampling/createMessage`,
//!   `elicitation/create`, `roots/list`; `relay.rs` finds the call): decided for the caller's
//!   role, recorded, and asked of the caller on its own call stream.
//! - **An input-required result** (a 2026-07-28 server's way to ask, SEP-2322): a client of
//!   2026-07-28 gets it as it is, once each request in it is one its role allows; a client of
//!   an earlier revision cannot read it, so the gateway asks each request of that client
//!   itself (decided and recorded as above) and calls again with the answers and the server's
//!   `requestState`, up to [`MAX_ROUNDS`] times.

// rmcp marks sampling, roots and logging deprecated (SEP-2577); clients and servers of
// 2025-11-25 still use them, and the gateway passes them on while they do.
#![allow(deprecated)]

use ::rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, InputRequest, InputRequests,
    InputResponses, RequestMetaObject,
};
use ::rmcp::service::{PeerRequestOptions, RequestContext};
use ::rmcp::{ErrorData, Peer, RoleServer, ServiceError};
use serde_json::Value;

use capability::authz::{Action, Authorize, ServerRequestKind};

use crate::serve::gateway::{Gateway, Snapshot};
use crate::serve::who::Who;
use crate::upstream::legacy::Leg;
use crate::upstream::relay::Ask;

/// The most rounds of input a call takes for a client that cannot read an input-required
/// result (rmcp's own default for a client).
pub(crate) const MAX_ROUNDS: usize = ::rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// Whether the client of `context` speaks 2026-07-28 or later (each request carries its
/// revision and capabilities, and it reads input-required results).
pub(crate) fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|version| !version.has_initialize())
}

impl Gateway {
    /// Whether `who`'s role allows `server` any request to the client.
    pub(crate) fn allows_any_request(&self, who: &Who, server: &str) -> bool {
        ServerRequestKind::ALL
            .into_iter()
            .any(|kind| self.allows(who, server, kind))
    }

    /// Which of `server`'s requests `who`'s role allows.
    fn allows(&self, who: &Who, server: &str, kind: ServerRequestKind) -> bool {
        who.ctx.as_ref().is_some_and(|ctx| {
            ctx.decide_action(&Action::ServerRequest { server, kind })
                .is_allowed()
        })
    }

    /// What `server` is told of `who`'s client with each request (see the module's doc).
    pub(crate) fn caller_meta(
        &self,
        who: &Who,
        server: &str,
        context: &RequestContext<RoleServer>,
    ) -> RequestMetaObject {
        let declared = context.client_capabilities().unwrap_or_default();
        let level = context
            .meta
            .log_level()
            .or_else(|| self.levels.of(who.session()));
        self.told(who, server, declared, level)
    }

    /// What `server` is told with a request of `who`, whose client `declared` its
    /// capabilities and asked for log messages at `level`: the capabilities narrowed to the
    /// server requests the role allows, and the level. Both paths of a call use it, rmcp's
    /// ([`caller_meta`](Self::caller_meta)) and the stdio lane's for a client of 2026-07-28
    /// (`lane/bridged.rs`).
    pub(crate) fn told(
        &self,
        who: &Who,
        server: &str,
        declared: ClientCapabilities,
        level: Option<::rmcp::model::LoggingLevel>,
    ) -> RequestMetaObject {
        let mut capabilities = ClientCapabilities::default();
        if self.allows(who, server, ServerRequestKind::Sampling) {
            capabilities.sampling = declared.sampling;
        }
        if self.allows(who, server, ServerRequestKind::Elicitation) {
            capabilities.elicitation = declared.elicitation;
        }
        if self.allows(who, server, ServerRequestKind::Roots) {
            capabilities.roots = declared.roots;
        }
        // Extensions (tasks, UI) are the client's to declare, not a request to the client.
        capabilities.extensions = declared.extensions;
        let mut meta = RequestMetaObject::new();
        meta.set_client_capabilities(capabilities);
        if let Some(level) = level {
            meta.set_log_level(level);
        }
        meta
    }

    /// A server's request during `who`'s call, asked of `who`'s client from this task (so
    /// that rmcp sends it on the client's call stream): decided for the role, recorded; the
    /// client's answer as JSON, or the error the server gets.
    pub(crate) async fn serve_ask(
        &self,
        snapshot: &Snapshot,
        who: &Who,
        server: &str,
        context: &RequestContext<RoleServer>,
        kind: ServerRequestKind,
        params: Value,
    ) -> Result<Value, ErrorData> {
        // Its own session: a server's requests do not spend the caller's budget of calls.
        let session = format!("{}/server-requests", who.session());
        let decider = snapshot
            .policy
            .context(who.role(), session)
            .ok_or_else(|| ErrorData::internal_error("the caller has no role", None))?;
        let peer = context.peer.clone();
        let input = params.clone();
        crate::upstream::requests::ask_client(
            &self.dispatch,
            self.name,
            server,
            kind,
            &input,
            &decider,
            ask_peer(peer, kind, params),
        )
        .await
    }

    /// The answers of `who`'s client to each request of an input-required result (each
    /// decided, recorded and asked as [`serve_ask`](Self::serve_ask) does).
    pub(crate) async fn fulfil(
        &self,
        snapshot: &Snapshot,
        who: &Who,
        server: &str,
        context: &RequestContext<RoleServer>,
        requests: &InputRequests,
    ) -> Result<InputResponses, ErrorData> {
        let mut responses = InputResponses::new();
        for (key, request) in requests {
            let (kind, params) = input_request(request)?;
            let answer = self
                .serve_ask(snapshot, who, server, context, kind, params)
                .await?;
            responses.insert(key.clone(), answer);
        }
        Ok(responses)
    }

    /// The connection to `server` for the client of `context`: the server's session of
    /// 2025-11-25 for a client of that revision where the server has one (`legacy.rs`), else
    /// its first connection.
    /// A server called on the caller's behalf (`delegate.rs`) is reached over the caller's own
    /// connection.
    pub(crate) async fn leg(
        &self,
        snapshot: &Snapshot,
        server: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Leg, ErrorData> {
        if let Some(delegated) = snapshot.delegated.get(server) {
            let (peer, progress) = delegated.peer(context).await?;
            return Ok(Leg {
                peer,
                progress,
                calls: crate::upstream::relay::Calls::default(),
            });
        }
        if !modern(context)
            && let Some(legacy) = snapshot.legacy.get(server)
            && let Some(leg) = legacy.leg().await
        {
            return Ok(leg);
        }
        let peer = snapshot.peers.get(server).ok_or_else(|| {
            ErrorData::internal_error(format!("no connection to `{server}`"), None)
        })?;
        Ok(Leg {
            peer: peer.clone(),
            progress: snapshot.progress.get(server).cloned().unwrap_or_default(),
            calls: snapshot.calls.get(server).cloned().unwrap_or_default(),
        })
    }

    /// `tools/call` at `server` over `leg` for `who`'s client (see the module's doc): its
    /// answer, or why none came. Runs in the client's request's task.
    pub(crate) async fn call_server(
        &self,
        snapshot: &Snapshot,
        who: &Who,
        server: &str,
        leg: &Leg,
        mut params: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ServiceError> {
        let meta = self.caller_meta(who, server, context);
        let calls = leg.calls.clone();
        let peer = &leg.peer;
        let logs = meta.log_level().map(|level| (context.peer.clone(), level));
        let modern = modern(context);
        for _ in 0..=MAX_ROUNDS {
            let options = PeerRequestOptions::no_options().with_meta(meta.clone());
            let progress = Some((&leg.progress, context));
            let sent =
                crate::upstream::progress::send_call(peer, params.clone(), options, progress)
                    .await?;
            let (_registered, mut asks) =
                calls.register(sent.id().clone(), who.session(), logs.clone());
            let answer = sent.answer();
            tokio::pin!(answer);
            let answer = loop {
                tokio::select! {
                    answer = &mut answer => break answer?,
                    // rmcp does not drop a handler's future when the client cancels: it cancels
                    // the request's token. The call is dropped here, which tells the server
                    // (`notifications/cancelled`), and its outcome says cancelled.
                    () = context.ct.cancelled() => {
                        return Err(ServiceError::McpError(ErrorData::internal_error(
                            "cancelled by the client; the MCP server was told \
                             (notifications/cancelled)",
                            None,
                        )));
                    }
                    Some(Ask { kind, params, answer: reply }) = asks.recv() => {
                        let result = self.serve_ask(snapshot, who, server, context, kind, params).await;
                        let _ = reply.send(result);
                    }
                }
            };
            let CallToolResponse::InputRequired(asked) = &answer else {
                return Ok(answer);
            };
            let requests = asked.input_requests.clone().unwrap_or_default();
            if modern {
                // The client reads it; it may ask only what its role allows.
                for request in requests.values() {
                    let (kind, _) = input_request(request).map_err(ServiceError::McpError)?;
                    if !self.allows(who, server, kind) {
                        return Err(ServiceError::McpError(ErrorData::internal_error(
                            format!(
                                "the MCP server `{server}` asked the client for `{}`, which its \
                                 role does not allow (`server_requests`)",
                                kind.method()
                            ),
                            None,
                        )));
                    }
                }
                return Ok(answer);
            }
            let responses = self
                .fulfil(snapshot, who, server, context, &requests)
                .await
                .map_err(ServiceError::McpError)?;
            params.input_responses = Some(responses);
            params.request_state = asked.request_state.clone();
        }
        Err(ServiceError::McpError(ErrorData::internal_error(
            format!(
                "the MCP server `{server}` asked for input more than {MAX_ROUNDS} times in one \
                 call"
            ),
            None,
        )))
    }
}

/// The kind of an input-required result's request and its params.
fn input_request(request: &InputRequest) -> Result<(ServerRequestKind, Value), ErrorData> {
    let params = |value: Result<Value, serde_json::Error>| {
        value.map_err(|e| ErrorData::internal_error(e.to_string(), None))
    };
    Ok(match request {
        InputRequest::CreateMessage(r) => (
            ServerRequestKind::Sampling,
            params(serde_json::to_value(&r.params))?,
        ),
        InputRequest::Elicitation(r) => (
            ServerRequestKind::Elicitation,
            params(serde_json::to_value(&r.params))?,
        ),
        InputRequest::ListRoots(_) => (ServerRequestKind::Roots, Value::Object(Default::default())),
        _ => {
            return Err(ErrorData::internal_error(
                "the server asked for an input this build does not know",
                None,
            ));
        }
    })
}

/// Asks `peer` (the client) the request `kind` with `params`: its answer as JSON.
async fn ask_peer(
    peer: Peer<RoleServer>,
    kind: ServerRequestKind,
    params: Value,
) -> Result<Value, String> {
    let bad = |e: serde_json::Error| format!("the request cannot be read: {e}");
    let answer = match kind {
        ServerRequestKind::Sampling => {
            let params = serde_json::from_value(params).map_err(bad)?;
            peer.create_message(params).await.map(serde_json::to_value)
        }
        ServerRequestKind::Elicitation => {
            let params = serde_json::from_value(params).map_err(bad)?;
            peer.create_elicitation(params)
                .await
                .map(serde_json::to_value)
        }
        ServerRequestKind::Roots => peer.list_roots().await.map(serde_json::to_value),
    };
    answer
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}
