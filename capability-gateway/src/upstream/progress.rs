//! A server's `notifications/progress` for a call passed on through rmcp, back to the client
//! that asked for it.
//!
//! rmcp gives every request it sends a `progressToken` of its own (replacing the client's), so
//! the server's progress names rmcp's token. A [`Relay`] belongs to one connection to a server:
//! from the moment a call the client gave a token is sent until its answer (or until the call
//! is dropped), the server's progress for rmcp's token goes to that client under the client's
//! token, as the server wrote it otherwise. Progress for any other token is dropped, as it is
//! for a call the client gave none.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use ::rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult,
    CancelledNotificationParam, ClientRequest, ProgressNotificationParam, ProgressToken, RequestId,
    ServerResult,
};
use ::rmcp::service::{PeerRequestOptions, RequestContext};
use ::rmcp::{Peer, RoleClient, RoleServer, ServiceError};

/// The calls of one connection whose progress goes back to their clients, by rmcp's token,
/// and the progress on its way to them.
#[derive(Clone, Default)]
pub(crate) struct Relay(Arc<Mutex<HashMap<ProgressToken, Sink>>>, Arc<Passing>);

/// The bytes of the server's progress on their way to clients (rmcp hands each notification
/// to a task of its own, which waits while its client is behind).
#[derive(Default)]
pub(crate) struct Passing {
    bytes: AtomicUsize,
    drained: Notify,
}

/// The most bytes of progress on their way before the server's output is read no further.
const ROOM_BYTES: usize = 8 * 1024 * 1024;

/// One notification's bytes, counted until it is passed on or dropped.
struct Counted<'a>(&'a Passing, usize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.bytes.fetch_sub(self.1, Ordering::SeqCst);
        self.0.drained.notify_waiters();
    }
}

/// The handler of a connection that only relays its server's progress (a connection on the
/// caller's behalf: the proxy's own connection handles the rest).
pub(crate) struct Relaying(pub(crate) Relay);

impl ::rmcp::ClientHandler for Relaying {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: ::rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.0.progress(params).await;
    }
}

/// Where one call's progress goes: the client's own token and the client.
#[derive(Clone)]
struct Sink {
    token: ProgressToken,
    client: Peer<RoleServer>,
    /// The call's progress being passed on: its answer waits for them, so that none is
    /// dropped or overtaken.
    delivering: Arc<Passing>,
}

impl Passing {
    /// Resolves once at most `bytes` are counted.
    async fn at_most(&self, bytes: usize) {
        loop {
            let drained = self.drained.notified();
            if self.bytes.load(Ordering::SeqCst) <= bytes {
                return;
            }
            drained.await;
        }
    }
}

impl Relay {
    /// Resolves once at most 8 MiB of the server's progress are on their way to clients: the
    /// server's output is read on only then, so a client that reads slower than its server
    /// writes progress holds the server back instead of filling memory.
    pub(crate) async fn room(&self) {
        self.1.at_most(ROOM_BYTES).await;
    }

    /// Whether [`room`](Relay::room) would resolve at once.
    pub(crate) fn has_room(&self) -> bool {
        self.1.bytes.load(Ordering::SeqCst) <= ROOM_BYTES
    }

    /// The server's progress: passed to the client of the call it names, while that call waits.
    pub(crate) async fn progress(&self, params: ProgressNotificationParam) {
        // Its message is the part of any size; the rest is a few fields.
        let bytes = params.message.as_ref().map_or(0, String::len) + 256;
        self.1.bytes.fetch_add(bytes, Ordering::SeqCst);
        let _counted = Counted(&self.1, bytes);
        let sink = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&params.progress_token)
            .cloned();
        let Some(sink) = sink else {
            return;
        };
        // Counted before this task first yields: the call's answer, read after this
        // notification, resumes its task only after this one has started.
        let delivering = sink.delivering.clone();
        delivering.bytes.fetch_add(1, Ordering::SeqCst);
        let _delivering = Counted(&delivering, 1);
        let mut params = params;
        params.progress_token = sink.token;
        // A client gone has nothing to hear.
        let _ = sink.client.notify_progress(params).await;
    }
}

/// `tools/call` at `server` with `options` (its `_meta`: what the server is told of the
/// caller), the server's progress passed to the client of `context` when it gave a
/// `progressToken`: the call sent, whose id names it while it is in flight ([`Sent::id`]) and
/// whose answer is [`Sent::answer`].
pub(crate) async fn send_call<'a>(
    server: &'a Peer<RoleClient>,
    params: CallToolRequestParams,
    options: PeerRequestOptions,
    progress: Option<(&'a Relay, &RequestContext<RoleServer>)>,
) -> Result<Sent<'a>, ServiceError> {
    let sink = progress.and_then(|(relay, context)| {
        context.meta.get_progress_token().map(|token| {
            (
                relay,
                Sink {
                    token,
                    client: context.peer.clone(),
                    delivering: Arc::default(),
                },
            )
        })
    });
    send(server, params, options, sink).await
}

async fn send<'a>(
    server: &'a Peer<RoleClient>,
    params: CallToolRequestParams,
    options: PeerRequestOptions,
    progress: Option<(&'a Relay, Sink)>,
) -> Result<Sent<'a>, ServiceError> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = server.send_request_with_option(request, options).await?;
    let leg = tracing::Span::current();
    if !leg.is_disabled() {
        leg.record("jsonrpc.request.id", tracing::field::display(&handle.id));
    }
    // Registered before this task yields: the gateway and the proxy run on one thread, so
    // rmcp's loop cannot have read the server's first progress before.
    let delivering = progress.as_ref().map(|(_, sink)| sink.delivering.clone());
    let relayed = progress.map(|(relay, sink)| {
        relay
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(handle.progress_token.clone(), sink);
        (relay, handle.progress_token.clone())
    });
    let waiting = Waiting {
        relayed,
        server,
        unanswered: Some(handle.id.clone()),
    };
    Ok(Sent {
        handle,
        waiting,
        delivering,
    })
}

/// A call sent and not yet answered: dropped, it is cancelled at the server.
pub(crate) struct Sent<'a> {
    handle: ::rmcp::service::RequestHandle<RoleClient>,
    waiting: Waiting<'a>,
    delivering: Option<Arc<Passing>>,
}

impl Sent<'_> {
    /// The id rmcp sent the call under.
    pub(crate) fn id(&self) -> &RequestId {
        &self.handle.id
    }

    /// The server's answer.
    pub(crate) async fn answer(self) -> Result<CallToolResponse, ServiceError> {
        let Sent {
            handle,
            mut waiting,
            delivering,
        } = self;
        let answer = handle.await_response().await;
        // Answered, or the connection lost: nothing to cancel. The progress read before the
        // answer reaches the client first.
        waiting.unanswered = None;
        if let Some(delivering) = &delivering {
            delivering.at_most(0).await;
        }
        drop(waiting);
        completed(answer?)
    }
}

/// A call in flight: dropped, its progress token is forgotten, and, unanswered, the call is
/// cancelled at the server.
struct Waiting<'a> {
    /// The relay the call's progress goes through, and rmcp's token for it.
    relayed: Option<(&'a Relay, ProgressToken)>,
    server: &'a Peer<RoleClient>,
    unanswered: Option<RequestId>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some((relay, token)) = &self.relayed {
            relay
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(token);
        }
        if let Some(id) = self.unanswered.take() {
            let server = self.server.clone();
            let cancelled = CancelledNotificationParam::new(
                Some(id),
                Some("request abandoned by the caller".to_owned()),
            );
            tokio::spawn(async move {
                let _ = server.notify_cancelled(cancelled).await;
            });
        }
    }
}

/// The server's result of a `tools/call`, as [`Peer::call_tool_once`] reads it: a result
/// without `content` decodes as another variant, and is a result all the same.
fn completed(result: ServerResult) -> Result<CallToolResponse, ServiceError> {
    let (result_type, meta) = match result {
        ServerResult::CallToolResult(result) => return Ok(CallToolResponse::Complete(result)),
        ServerResult::InputRequiredResult(result) => {
            return Ok(CallToolResponse::InputRequired(result));
        }
        ServerResult::CreateTaskResult(result) => return Ok(CallToolResponse::Task(result)),
        ServerResult::EmptyResult(_) => (None, None),
        ServerResult::TaskAckResult(ack) => (Some(ack.result_type), ack.meta),
        ServerResult::CustomResult(custom) => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct MetaOnly {
                #[serde(rename = "_meta")]
                meta: ::rmcp::model::MetaObject,
            }
            let MetaOnly { meta } =
                serde_json::from_value(custom.0).map_err(|_| ServiceError::UnexpectedResponse)?;
            (None, Some(meta))
        }
        _ => return Err(ServiceError::UnexpectedResponse),
    };
    let mut result = CallToolResult::default();
    result.result_type = result_type;
    result.meta = meta;
    Ok(CallToolResponse::Complete(result))
}
