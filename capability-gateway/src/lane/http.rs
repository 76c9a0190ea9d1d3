//! The forwarding path of `tools/call` over Streamable HTTP, below rmcp's typed model: the HTTP
//! front's counterpart of the stdio path ([`crate::lane`]), in front of rmcp's
//! `StreamableHttpService` and behind the edge (the caller authenticated, its session checked).
//!
//! A `POST` of one `tools/call` in a session is read once, as its envelope; routed, decided
//! and recorded as on rmcp's path (the same [`Gateway::route`] and dispatcher: the intent on
//! record before the call is sent); sent on the session of the server's own rmcp connection
//! ([`Reach`](crate::upstream::http::Reach)) by a task of its own, so that a client that goes
//! away cancels nothing (the outcome is recorded when the call ends); answered under the
//! client's id with the server's result as it wrote it: as one JSON body, or, when the call
//! names a `progressToken`, as an event stream that first carries the server's progress for
//! that token on the call's stream. A client's `notifications/cancelled` for such a call stops
//! it (the server is told; the record says cancelled; no answer).
//!
//! The path takes a call only when nothing about it needs rmcp: the request accepts JSON and
//! an event stream and is JSON, names a revision that starts with `initialize` (2025-11-25 or
//! earlier) and the very revision the server's connection agreed (no field to add or drop),
//! is a well-formed JSON-RPC request (a string or integer id) whose params hold nothing but
//! `name`, `arguments` and a `_meta` without `protocolVersion`; its tool's server is reached
//! over HTTP, on a session; the call is not held for approval. rmcp takes every other request,
//! and answers it as before. rmcp does not see the calls taken here, so the sessions' idle
//! limit is the edge's (`gateway/http.rs`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use ::rmcp::ErrorData;
use ::rmcp::transport::streamable_http_server::SessionManager;
use ::rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use bytes::Bytes;
use capability::audit::Request as Audited;
use capability::authz::Action;
use capability::mcp::telemetry::{self, Ending, Operation, Transport};
use capability_http::{Authenticated, EdgeResponse, VerifiedSession};
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};

use crate::lane::call::settle;
use crate::lane::{
    CallParams, LAST_WITH_INITIALIZE, answer_line, forwarded, lane_takes, progress_token, refusal,
    server_operation, with_context,
};
use crate::serve::gateway::Gateway;
use crate::upstream::http::{Progress, event};
use crate::wire::envelope::Cancelled;

/// The calls on this path in flight, by session and the client's id (as written): the lane's
/// id of each and what cancels it.
type InFlight = HashMap<(String, String), (u64, oneshot::Sender<()>)>;

/// rmcp's HTTP service, with `tools/call` taken below its typed model where it can be.
#[derive(Clone)]
pub(crate) struct HttpLane<S> {
    inner: S,
    shared: Arc<Shared>,
}

struct Shared {
    gateway: Gateway,
    manager: Arc<LocalSessionManager>,
    in_flight: Mutex<InFlight>,
}

/// A client's message: its members as written.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

impl<S> HttpLane<S> {
    /// `inner` (rmcp's service over `manager`'s sessions), with `gateway`'s calls taken here.
    pub(crate) fn new(inner: S, gateway: Gateway, manager: Arc<LocalSessionManager>) -> Self {
        HttpLane {
            inner,
            shared: Arc::new(Shared {
                gateway,
                manager,
                in_flight: Mutex::default(),
            }),
        }
    }
}

impl<S> tower_service::Service<Request<Full<Bytes>>> for HttpLane<S>
where
    S: tower_service::Service<Request<Full<Bytes>>, Response = EdgeResponse, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    type Response = EdgeResponse;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<EdgeResponse, Infallible>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Full<Bytes>>) -> Self::Future {
        let mut inner = self.inner.clone();
        let shared = self.shared.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let bytes = match body.collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(never) => match never {},
            };
            if let Some(response) = shared.take(&parts, &bytes).await {
                return Ok(response);
            }

            inner
                .call(Request::from_parts(parts, Full::new(bytes)))
                .await
        })
    }
}

/// Whether `headers` accept both JSON and an event stream and say the body is JSON.
fn plain_json(headers: &http::HeaderMap) -> bool {
    let mut json = false;
    let mut stream = false;
    for value in headers.get_all(header::ACCEPT) {
        for kind in value.to_str().unwrap_or("").split(',') {
            let kind = kind.split(';').next().unwrap_or("").trim();
            json |= kind.eq_ignore_ascii_case("application/json");
            stream |= kind.eq_ignore_ascii_case("text/event-stream");
        }
    }
    let body_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        });
    json && stream && body_json
}

/// A JSON-RPC id rmcp would read: a string or an integer.
fn plain_id(id: &RawValue) -> bool {
    id.get().starts_with('"') || id.get().parse::<i64>().is_ok()
}

impl Shared {
    /// The answer to a request this path takes, or `None` for rmcp's.
    async fn take(
        self: &Arc<Self>,
        parts: &http::request::Parts,
        bytes: &[u8],
    ) -> Option<EdgeResponse> {
        if parts.method != Method::POST || !plain_json(&parts.headers) {
            return None;
        }
        let session = parts.extensions.get::<VerifiedSession>()?;
        let version = parts.headers.get("mcp-protocol-version")?.to_str().ok()?;
        let known = ::rmcp::model::ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .any(|v| v.as_str() == version);
        if !known || version > LAST_WITH_INITIALIZE {
            return None;
        }
        let message = serde_json::from_slice::<Message<'_>>(bytes).ok()?;
        if message.jsonrpc != "2.0" {
            return None;
        }
        match (message.method.as_deref(), message.id, message.params) {
            (Some("tools/call"), Some(id), Some(params)) if plain_id(id) => {
                if !self
                    .manager
                    .has_session(&session.0.clone().into())
                    .await
                    .unwrap_or(false)
                {
                    return None;
                }
                let caller = parts.extensions.get::<Authenticated>();
                self.call(caller, &session.0, version, id, params).await
            }
            (Some("notifications/cancelled"), None, Some(params)) => {
                self.cancel(&session.0, params)
            }
            _ => None,
        }
    }

    fn cancel(&self, session: &str, params: &RawValue) -> Option<EdgeResponse> {
        let cancelled = serde_json::from_str::<Cancelled<'_>>(params.get()).ok()?;
        let key = (session.to_owned(), cancelled.request_id.get().to_owned());
        let (_, cancel) = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key)?;
        let _ = cancel.send(());
        Some(status(StatusCode::ACCEPTED, None, Bytes::new()))
    }

    async fn call(
        self: &Arc<Self>,
        caller: Option<&Authenticated>,
        session: &str,
        version: &str,
        id: &RawValue,
        params: &RawValue,
    ) -> Option<EdgeResponse> {
        let params = serde_json::from_str::<CallParams<'_>>(params.get()).ok()?;
        let meta = params.meta.map(RawValue::get);
        if meta
            .is_some_and(|meta| memchr::memmem::find(meta.as_bytes(), b"protocolVersion").is_some())
            || super::asks_receipt(meta)
        {
            return None;
        }
        let gateway = &self.gateway;
        let snapshot = gateway.current();
        let who = gateway.http_caller(&snapshot, caller, Some(session));
        // Nothing the server may send back during the call needs the gateway's relay to this
        // caller (`relay.rs`): no request its role allows, no log level it asked for. Those
        // calls go through rmcp's path, which relays them.
        let relayed = gateway.levels.of(who.session()).is_some();
        let agreed = |server: &str| {
            !relayed
                && !gateway.allows_any_request(&who, server)
                && snapshot
                    .reaches
                    .get(server)
                    .is_some_and(|reach| reach.version() == Some(version) && reach.has_session())
        };
        if !lane_takes(&snapshot, &who, &params.name, agreed) {
            return None;
        }
        let id = id.get().to_owned();
        let shown = params.name;
        let given = params.arguments.is_some();
        let input = Value::Object(params.arguments.unwrap_or_default());
        let operation = server_operation(
            &id,
            &shown,
            Some(version),
            meta,
            Transport::Tcp,
            Some(session),
        );
        // In the call's span: the decision, the records, and the leg to the server.
        let sent = operation.span().in_scope(|| {
            let route = gateway.route(&snapshot, &who, &shown, &input)?;
            let reach = snapshot.reaches.get(route.server).ok_or_else(|| {
                ErrorData::internal_error(format!("no connection to `{}`", route.server), None)
            })?;
            let request = Audited::mcp("tools/call", Action::CallTool(route.manifest), &input);
            // The intent is on record before the call is sent to the server.
            let started = gateway
                .dispatch
                .start::<(), String>(route.ctx(), who.caller(), &request)
                .map_err(|outcome| refusal(gateway.name, &who, outcome, &shown))?;
            let leg = started.span().in_scope(|| {
                Operation::client(&telemetry::Request {
                    method: "tools/call",
                    tool: Some(route.tool),
                    server: Some(route.server),
                    protocol_version: Some(version),
                    transport: Some(Transport::Tcp),
                    ..telemetry::Request::default()
                })
            });
            let written = forwarded(
                route.tool,
                given.then_some(&input),
                with_context(meta, &leg).as_deref(),
            );
            match written {
                Ok(written) => Ok((reach.clone(), started, leg, written)),
                Err(e) => {
                    let why = format!("the arguments could not be written again: {e}");
                    drop(started.finish::<(), String>(Err(why.clone())));
                    Err(ErrorData::internal_error(why, None))
                }
            }
        });
        let (reach, started, leg, written) = match sent {
            Ok(sent) => sent,
            Err(error) => {
                operation.end(Ending::Error {
                    code: error.code.0,
                    message: &error.message,
                });
                return Some(json(answer_line(&id, Err(error))));
            }
        };
        let lane_id = reach.next_id();
        let key = (session.to_owned(), id.clone());
        let (cancel, cancelled) = oneshot::channel();
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), (lane_id, cancel));
        // With a progress token the client gets an event stream: the server's progress for the
        // call, then the answer; without, one JSON body.
        let (reply, answer) = match meta.and_then(progress_token) {
            Some(token) => {
                let (events, stream) = mpsc::channel(EVENTS_HELD);
                let progress = Progress {
                    token,
                    events: events.clone(),
                };
                (Reply::Stream(events, progress), Answer::Stream(stream))
            }
            None => {
                let (tell, told) = oneshot::channel();
                (Reply::Json(tell), Answer::Json(told))
            }
        };
        let shared = Arc::clone(self);
        let by = gateway.name;
        // The call goes on whether or not the client waits for it: its outcome is recorded.
        tokio::spawn(async move {
            let ended = reach
                .call(lane_id, &written, reply.progress(), cancelled)
                .await;
            {
                let mut calls = shared
                    .in_flight
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if calls.get(&key).is_some_and(|(owner, _)| *owner == lane_id) {
                    calls.remove(&key);
                }
            }
            let (answer, record) =
                settle(ended, (&key.1, false), by, &shown, started, operation, leg);
            match answer {
                Some(answer) => reply.send(answer).await,
                None => drop(reply),
            }
            if let Some(record) = record {
                record.record();
            }
        });
        Some(match answer {
            Answer::Stream(stream) => stream_of(stream),
            Answer::Json(told) => match told.await {
                Ok(answer) => json(answer),
                // Cancelled: no answer (an event stream that ends without one).
                Err(_) => status(StatusCode::OK, Some("text/event-stream"), Bytes::new()),
            },
        })
    }
}

/// How many events of a call's stream are held for a client that reads slower than its server
/// writes progress (each may be as long as `--max-message`): one, then the server's stream is
/// read no further until the client takes it.
const EVENTS_HELD: usize = 1;

/// Where a call's answer goes.
enum Reply {
    Json(oneshot::Sender<Vec<u8>>),
    Stream(mpsc::Sender<Bytes>, Progress),
}

/// What the request waits for.
enum Answer {
    Json(oneshot::Receiver<Vec<u8>>),
    Stream(mpsc::Receiver<Bytes>),
}

impl Reply {
    fn progress(&self) -> Option<&Progress> {
        match self {
            Reply::Json(_) => None,
            Reply::Stream(_, progress) => Some(progress),
        }
    }

    /// The answer (one JSON-RPC message and its newline), to a client that may be gone.
    async fn send(self, mut answer: Vec<u8>) {
        match self {
            Reply::Json(tell) => {
                let _ = tell.send(answer);
            }
            Reply::Stream(events, _) => {
                answer.pop();
                let answer = String::from_utf8_lossy(&answer);
                let _ = events.send(event(&answer)).await;
            }
        }
    }
}

/// A response whose body is the events `stream` gets, ending when it does.
fn stream_of(stream: mpsc::Receiver<Bytes>) -> EdgeResponse {
    struct Events(mpsc::Receiver<Bytes>);
    impl http_body::Body for Events {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
            self.0
                .poll_recv(cx)
                .map(|event| event.map(|e| Ok(http_body::Frame::data(e))))
        }
    }
    let mut response = Response::new(Events(stream).boxed());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/event-stream"),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    response
}

fn json(answer: Vec<u8>) -> EdgeResponse {
    status(
        StatusCode::OK,
        Some("application/json"),
        Bytes::from(answer),
    )
}

fn status(code: StatusCode, kind: Option<&'static str>, body: Bytes) -> EdgeResponse {
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = code;
    if let Some(kind) = kind {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, http::HeaderValue::from_static(kind));
    }
    response
}
