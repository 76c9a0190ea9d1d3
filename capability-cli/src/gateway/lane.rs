//! The forwarding lane to a spawned server: the gateway's own requests on the server's pipes,
//! next to rmcp's connection, answered without rmcp's typed model.
//!
//! rmcp keeps the connection (the handshake, listings, notifications, the server's requests);
//! the lane writes a `tools/call` it has decided and recorded as one line, under an id of its
//! own (a string rmcp never uses: rmcp numbers its requests), and takes the answer to that id
//! off the server's output (read strictly, as every line is: an answer writing a key twice
//! becomes an error before the lane sees it) before rmcp would read it. Every write to the
//! server's input, rmcp's and the lane's, is one whole line under one lock.

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
    /// The server's output ended: nothing more is answered.
    ended: bool,
}

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

    /// What takes the lane's answers off the server's output.
    pub(super) fn tap(&self) -> LaneTap {
        LaneTap {
            server: self.server.clone(),
            pending: self.pending.clone(),
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
    pub(super) async fn call(
        &self,
        params: &str,
        leg: &tracing::Span,
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
        }
        let mut waiting = Waiting {
            lane: self,
            id,
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

/// The lane's request in flight: dropped unanswered, it is forgotten and cancelled.
struct Waiting<'a> {
    lane: &'a Lane,
    id: u64,
    answered: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let known = self
            .lane
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .waiting
            .remove(&self.id)
            .is_some();
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
}

impl Tap for LaneTap {
    fn take(&mut self, line: &[u8]) -> bool {
        // Cheap first: only a line naming one of the lane's ids can be one.
        if memchr::memmem::find(line, ID_PREFIX.as_bytes()).is_none() {
            return false;
        }
        let Ok(envelope) = serde_json::from_slice::<Envelope<'_>>(line) else {
            return false;
        };
        if envelope.method.is_some() {
            return false;
        }
        let Some(id) = envelope
            .id
            .and_then(|id| serde_json::from_str::<&str>(id.get()).ok())
            .and_then(|id| id.strip_prefix(ID_PREFIX))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            return false;
        };
        let waiting = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .waiting
            .remove(&id);
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

    fn end(&mut self) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.ended = true;
        // The senders dropped: every call waiting hears that the connection closed.
        pending.waiting.clear();
    }
}
