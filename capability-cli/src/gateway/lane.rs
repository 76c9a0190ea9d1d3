//! The forwarding lane to a spawned server: the gateway's own requests on the server's pipes,
//! next to rmcp's connection, answered without rmcp's typed model.
//!
//! rmcp keeps the connection (the handshake, listings, notifications, the server's requests);
//! the lane writes a `tools/call` it has decided and recorded as one line, under an id of its
//! own (a string rmcp never uses: rmcp numbers its requests), and takes the answer to that id
//! off the server's output (read strictly, as every line is: an answer writing a key twice
//! becomes an error before the lane sees it) before rmcp would read it. Every write to the
//! server's input, rmcp's and the lane's, is one whole line under one lock.
//!
//! A call the client gave a `progressToken` (in its `_meta`, which the server is sent as the
//! client wrote it) has its server's `notifications/progress` for that token passed to the
//! client, as the server wrote them, from the server the call went to and only until its
//! answer: the line, read strictly like every other, reaches the client's writer before the
//! answer does. Progress for any other token is rmcp's (`proxy::progress`). A server that
//! writes progress faster than its client reads is held back: while more than 8 MiB wait to
//! be written to the client, the server's output is not read (`proxy::Outbox::room`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;

use crate::supervise::strict::Tap;

/// What the lane's ids start with.
const ID_PREFIX: &str = "capability-gateway/";

type Input = tokio::sync::Mutex<Box<dyn AsyncWrite + Unpin + Send>>;

/// The lane to one server.
pub(super) struct Lane {
    server: String,
    input: Arc<Input>,
    pending: Arc<Mutex<Pending>>,
    next: AtomicU64,
    /// The protocol revision rmcp agreed with the server.
    version: OnceLock<String>,
}

#[derive(Default)]
struct Pending {
    waiting: HashMap<u64, oneshot::Sender<Reply>>,
    /// The progress tokens of the calls waiting (the token's JSON, written canonically): the
    /// call's id and the client's writer its progress goes to.
    progress: HashMap<String, (u64, Client)>,
    /// The server's output ended: nothing more is answered.
    ended: bool,
}

impl Pending {
    /// Forgets call `id`'s progress token, unless a later call took the token over.
    fn forget_progress(&mut self, token: Option<&str>, id: u64) {
        if let Some(token) = token
            && self
                .progress
                .get(token)
                .is_some_and(|(owner, _)| *owner == id)
        {
            self.progress.remove(token);
        }
    }
}

/// The client's writer: the lines sent are written to the client, in order.
pub(super) type Client = crate::proxy::Outbox;

/// Where a call's progress goes: the client's `progressToken` (its JSON, written canonically:
/// [`progress_key`]) and the client's writer.
pub(super) type Progress = (String, Client);

/// A server's answer to one of the lane's requests: its result as written, or why there is none.
type Reply = Result<Box<RawValue>, String>;

/// What the lane reads of a line from the server, once: whose answer it is, and the answer.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// What the lane reads of a `notifications/progress` from the server: whose call it is about.
#[derive(Deserialize)]
struct ProgressLine<'a> {
    #[serde(borrow)]
    method: std::borrow::Cow<'a, str>,
    params: ProgressParams,
}

#[derive(Deserialize)]
struct ProgressParams {
    #[serde(rename = "progressToken")]
    progress_token: serde_json::Value,
}

/// A progress token as the lane keys it: its JSON written canonically, so the token the
/// client wrote and the one the server echoes match however each escaped it.
pub(super) fn progress_key(token: &serde_json::Value) -> Option<String> {
    match token {
        serde_json::Value::String(_) | serde_json::Value::Number(_) => {
            Some(capability::json::to_canonical_json(token))
        }
        _ => None,
    }
}

#[derive(Deserialize)]
struct AnswerError {
    #[serde(default)]
    message: String,
}

impl Lane {
    /// A lane onto `input` (the server's standard input, which rmcp shares through
    /// [`Lane::rmcp_input`]).
    pub(super) fn new(server: &str, input: Box<dyn AsyncWrite + Unpin + Send>) -> Arc<Lane> {
        Arc::new(Lane {
            server: server.to_owned(),
            input: Arc::new(tokio::sync::Mutex::new(input)),
            pending: Arc::default(),
            next: AtomicU64::new(1),
            version: OnceLock::new(),
        })
    }

    /// The writer rmcp is given: an in-process pipe whose lines go to the server's input, each
    /// whole, under the lane's lock.
    pub(super) fn rmcp_input(&self) -> tokio::io::DuplexStream {
        let (ours, theirs) = tokio::io::duplex(256 * 1024);
        let input = self.input.clone();
        tokio::spawn(copy_lines(ours, input));
        theirs
    }

    /// What takes the lane's answers off the server's output; it reads on only while the
    /// progress `relay` passes on through rmcp is not piling up for a client that is behind.
    pub(super) fn tap(&self, relay: crate::proxy::ProgressRelay) -> LaneTap {
        LaneTap {
            server: self.server.clone(),
            pending: self.pending.clone(),
            relay,
        }
    }

    /// Notes the protocol revision the connection agreed on.
    pub(super) fn agreed(&self, version: String) {
        let _ = self.version.set(version);
    }

    /// The protocol revision the connection agreed on.
    pub(super) fn version(&self) -> Option<&str> {
        self.version.get().map(String::as_str)
    }

    /// Sends `tools/call` with `params` (a JSON object) and waits for the server's answer: its
    /// result as written, or why there is none. The id it is sent under is `leg`'s
    /// `jsonrpc.request.id` (the span of the request to the server), when `leg` is recorded.
    /// Dropped before the answer, the request is cancelled at the server
    /// (`notifications/cancelled`).
    ///
    /// With `progress`, the server's `notifications/progress` for that token are passed to the
    /// client's writer until the answer (the lane's doc).
    pub(super) async fn call(
        &self,
        params: &str,
        leg: &tracing::Span,
        progress: Option<Progress>,
    ) -> Result<Box<RawValue>, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if !leg.is_disabled() {
            leg.record(
                "jsonrpc.request.id",
                tracing::field::display(format_args!("{ID_PREFIX}{id}")),
            );
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            if pending.ended {
                return Err(self.gone());
            }
            pending.waiting.insert(id, tx);
            if let Some((token, client)) = &progress {
                pending.progress.insert(token.clone(), (id, client.clone()));
            }
        }
        let mut waiting = Waiting {
            lane: self,
            id,
            progress: progress.map(|(token, _)| token),
            answered: false,
        };
        let mut line = String::with_capacity(96 + params.len());
        line.push_str(r#"{"jsonrpc":"2.0","id":""#);
        line.push_str(ID_PREFIX);
        let _ = write!(line, "{id}");
        line.push_str(r#"","method":"tools/call","params":"#);
        line.push_str(params);
        line.push('}');
        if self.write(line).await.is_err() {
            return Err(self.gone());
        }
        let reply = rx.await.map_err(|_| self.gone())?;
        waiting.answered = true;
        reply
    }

    async fn write(&self, mut line: String) -> std::io::Result<()> {
        line.push('\n');
        let mut input = self.input.lock().await;
        input.write_all(line.as_bytes()).await?;
        input.flush().await
    }

    fn gone(&self) -> String {
        format!(
            "the MCP server `{}` did not answer: its connection closed",
            self.server
        )
    }
}

/// The lane's request in flight: dropped unanswered, it is forgotten and cancelled; its
/// progress token is forgotten either way.
struct Waiting<'a> {
    lane: &'a Lane,
    id: u64,
    progress: Option<String>,
    answered: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let known = {
            let mut pending = self
                .lane
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            pending.forget_progress(self.progress.as_deref(), self.id);
            !self.answered && pending.waiting.remove(&self.id).is_some()
        };
        if known {
            let input = self.lane.input.clone();
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":\"{ID_PREFIX}{}\",\"reason\":\"the client cancelled the call\"}}}}\n",
                self.id
            );
            tokio::spawn(async move {
                let mut input = input.lock().await;
                let _ = input.write_all(line.as_bytes()).await;
                let _ = input.flush().await;
            });
        }
    }
}

/// Copies whole lines from rmcp's pipe to the server's input, under the lane's lock.
async fn copy_lines(from: impl AsyncRead + Unpin, input: Arc<Input>) {
    let mut from = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        match from.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let mut input = input.lock().await;
        if input.write_all(&line).await.is_err() || input.flush().await.is_err() {
            break;
        }
    }
    let _ = input.lock().await.shutdown().await;
}

/// Takes the answers to the lane's ids off the server's output.
pub(super) struct LaneTap {
    server: String,
    pending: Arc<Mutex<Pending>>,
    relay: crate::proxy::ProgressRelay,
}

impl LaneTap {
    /// Passes a `notifications/progress` for a token of a call waiting to that call's client;
    /// whether it did.
    fn progress(&self, line: &[u8]) -> bool {
        let Ok(notification) = serde_json::from_slice::<ProgressLine<'_>>(line) else {
            return false;
        };
        if notification.method != "notifications/progress" {
            return false;
        }
        let Some(key) = progress_key(&notification.params.progress_token) else {
            return false;
        };
        let client = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .progress
            .get(&key)
            .map(|(_, client)| client.clone());
        let Some(client) = client else {
            return false;
        };
        let mut forwarded = Vec::with_capacity(line.len() + 1);
        forwarded.extend_from_slice(line.trim_ascii_end());
        forwarded.push(b'\n');
        // A client gone has nothing to tell: the line is taken all the same.
        let _ = client.send(forwarded);
        true
    }
}

impl Tap for LaneTap {
    fn take(&mut self, line: &[u8]) -> bool {
        // Cheap first: only a line naming one of the lane's ids can be an answer, and only one
        // naming the method a progress notification.
        if memchr::memmem::find(line, ID_PREFIX.as_bytes()).is_none() {
            return memchr::memmem::find(line, b"notifications/progress").is_some()
                && self.progress(line);
        }
        let Ok(envelope) = serde_json::from_slice::<Envelope<'_>>(line) else {
            return false;
        };
        if envelope.method.is_some() {
            return self.progress(line);
        }
        let Some(id) = envelope
            .id
            .and_then(|id| serde_json::from_str::<&str>(id.get()).ok())
            .and_then(|id| id.strip_prefix(ID_PREFIX))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            return false;
        };
        let waiting = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            // No progress of this call reaches the client after its answer.
            pending.progress.retain(|_, (owner, _)| *owner != id);
            pending.waiting.remove(&id)
        };
        match waiting {
            Some(tx) => {
                let reply = match (envelope.result, envelope.error) {
                    (_, Some(error)) => Err(serde_json::from_str::<AnswerError>(error.get())
                        .map_or_else(
                            |e| {
                                format!(
                                    "the MCP server `{}` answered with an error that is not a \
                                     JSON-RPC error object ({e})",
                                    self.server
                                )
                            },
                            |error| error.message,
                        )),
                    (Some(result), None) => Ok(result.to_owned()),
                    (None, None) => Err(format!(
                        "the MCP server `{}` answered with neither a result nor an error",
                        self.server
                    )),
                };
                let _ = tx.send(reply);
            }
            None => super::note(format_args!(
                "server `{}` answered request {id} of the gateway, which is not waiting for it: \
                 dropped",
                crate::escape::escape(&self.server)
            )),
        }
        true
    }

    fn room(&mut self) -> impl std::future::Future<Output = ()> + Send {
        // The clients whose calls' progress this server may write: usually none or one.
        let clients: Vec<Client> = {
            let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending
                .progress
                .values()
                .map(|(_, client)| client.clone())
                .collect()
        };
        let relay = self.relay.clone();
        async move {
            for client in clients {
                client.room().await;
            }
            relay.room().await;
        }
    }

    fn end(&mut self, why: Option<&str>) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.ended = true;
        // Every call waiting hears why there is no answer: the connection closed (its sender
        // dropped), or the server's output was cut off.
        for (_, waiting) in pending.waiting.drain() {
            if let Some(why) = why {
                let _ = waiting.send(Err(format!(
                    "the MCP server `{}` did not answer: {why}",
                    self.server
                )));
            }
        }
        pending.progress.clear();
    }
}
