//! The forwarding lane to a spawned server: the gateway's own requests on the server's pipes,
//! next to rmcp's connection, answered without rmcp's typed model.
//!
//! rmcp keeps the connection (the handshake, listings, notifications, the server's requests);
//! the lane writes a `tools/call` it has decided and recorded as one line, under an id of its
//! own (a string rmcp never uses: rmcp numbers its requests), and takes the answer to that id
//! off the server's output (read strictly, as every line is: an answer writing a key twice
//! becomes an error before the lane sees it) before rmcp would read it. Every write to the
//! server's input, rmcp's and the lane's, is one whole line, in the order given ([`Input`]).
//!
//! No hop through the runtime on a call's way: the call is written to the server on the
//! thread that read it from the client (when the pipe has room, as it has unless the server
//! stops reading: then the line waits, in order, for a task that writes it once there is
//! room, and the client's thread goes on), and its answer is handled on the thread that reads
//! the server's output ([`crate::live::strict::strict_lines_threaded`]), which hands it
//! to what waits for it ([`Answered`]) there.
//!
//! A call the client gave a `progressToken` (in its `_meta`, which the server is sent as the
//! client wrote it) has its server's `notifications/progress` for that token passed to the
//! client, as the server wrote them, from the server the call went to and only until its
//! answer: written to the client by the thread that reads them, before the answer, which that
//! thread writes after them. Progress for any other token is rmcp's (`upstream::progress`). A
//! server that writes progress faster than its client reads is held back: the thread waits
//! for the client, and reads nothing more of the server meanwhile. So are the server's
//! `notifications/message` while a call of the lane waits: to its client, at or above the
//! level that client set, in order with the answer; with none waiting they are rmcp's.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::live::strict::Tap;

mod input;
use input::{Input, copy_lines};

/// What the lane's ids start with.
pub(crate) const ID_PREFIX: &str = "capability-gateway/";

/// How a call through the lane ended.
pub(crate) enum Ended {
    /// The server's result, as it wrote it.
    Answered(Box<RawValue>),
    /// No result: the server's error, or why there is none (the server is gone).
    Failed(String),
    /// The client cancelled it; the server was told.
    Cancelled,
}

/// What hears how a call ended: called once, on the thread that heard it (the server's
/// reader for an answer or the server's end, the client's for a cancellation or a call that
/// could not be written).
pub(crate) type Answered = Box<dyn FnOnce(Ended) + Send>;

/// The lane to one server.
pub(crate) struct Lane {
    server: String,
    /// How the server ended, for the calls it leaves unanswered.
    exit: Arc<crate::process::Exit>,
    input: Arc<Input>,
    pending: Arc<Mutex<Pending>>,
    next: AtomicU64,
    /// The protocol revision rmcp agreed with the server.
    version: OnceLock<String>,
}

#[derive(Default)]
struct Pending {
    waiting: HashMap<u64, Answered>,
    /// The client's writer of each call waiting: a log message the server writes while it
    /// serves one goes there, before the call's answer.
    clients: HashMap<u64, Client>,
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
pub(crate) type Client = crate::wire::outbox::Outbox;

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

/// What the lane reads of a `notifications/message` from the server: its level.
// rmcp marks logging deprecated (SEP-2577); servers of both revisions still send messages.
#[allow(deprecated)]
#[derive(Deserialize)]
struct LogLine<'a> {
    #[serde(borrow)]
    method: std::borrow::Cow<'a, str>,
    params: LogParams,
}

#[allow(deprecated)]
#[derive(Deserialize)]
struct LogParams {
    level: ::rmcp::model::LoggingLevel,
}

/// A progress token as the lane keys it: its JSON written canonically, so the token the
/// client wrote and the one the server echoes match however each escaped it.
pub(crate) fn progress_key(token: &serde_json::Value) -> Option<String> {
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
    /// [`Lane::rmcp_input`]). Must be called within the runtime.
    pub(crate) fn new(
        server: &str,
        input: tokio::process::ChildStdin,
        exit: Arc<crate::process::Exit>,
    ) -> std::io::Result<Arc<Lane>> {
        let input = Input::start(input)?;
        Ok(Arc::new(Lane {
            server: server.to_owned(),
            exit,
            input,
            pending: Arc::default(),
            next: AtomicU64::new(1),
            version: OnceLock::new(),
        }))
    }

    /// The writer rmcp is given: an in-process pipe whose lines go to the server's input, each
    /// whole, in order with the lane's.
    pub(crate) fn rmcp_input(&self) -> tokio::io::DuplexStream {
        let (ours, theirs) = tokio::io::duplex(256 * 1024);
        let input = self.input.clone();
        tokio::spawn(copy_lines(ours, input));
        theirs
    }

    /// What takes the lane's answers off the server's output; it reads on only while the
    /// progress `relay` passes on through rmcp is not piling up for a client that is behind.
    /// A log message the server writes while a call of the lane waits goes to that call's
    /// client at or above the level in `levels` (the stdio session's), in order with the
    /// call's answer.
    pub(crate) fn tap(
        &self,
        relay: crate::upstream::progress::Relay,
        levels: crate::upstream::relay::Levels,
    ) -> LaneTap {
        LaneTap {
            server: self.server.clone(),
            pending: self.pending.clone(),
            relay,
            levels,
            exit: self.exit.clone(),
        }
    }

    /// Notes the protocol revision the connection agreed on.
    pub(crate) fn agreed(&self, version: String) {
        let _ = self.version.set(version);
    }

    /// The protocol revision the connection agreed on.
    pub(crate) fn version(&self) -> Option<&str> {
        self.version.get().map(String::as_str)
    }

    /// The id the next call is sent under ([`Lane::send`]).
    pub(crate) fn next_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends `tools/call` with `params` (a JSON object) under `id` (from [`Lane::next_id`]);
    /// `answered` hears how it ends, once: the server's result as written, or why there is
    /// none. The id is `leg`'s `jsonrpc.request.id` (the span of the request to the server),
    /// when `leg` is recorded. A call that cannot be written (the server is gone) is
    /// `answered` before this returns.
    ///
    /// With `progress`, the server's `notifications/progress` for that token are passed to
    /// `client` until the answer (the lane's doc), and so are its log messages.
    pub(crate) fn send(
        &self,
        id: u64,
        params: &str,
        leg: &tracing::Span,
        client: Client,
        progress: Option<String>,
        answered: Answered,
    ) {
        if !leg.is_disabled() {
            leg.record(
                "jsonrpc.request.id",
                tracing::field::display(format_args!("{ID_PREFIX}{id}")),
            );
        }
        let token = progress.clone();
        {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            if pending.ended {
                drop(pending);
                answered(Ended::Failed(self.gone()));
                return;
            }
            pending.waiting.insert(id, answered);
            if let Some(token) = progress {
                pending.progress.insert(token, (id, client.clone()));
            }
            pending.clients.insert(id, client);
        }
        let mut line = String::with_capacity(97 + params.len());
        line.push_str(r#"{"jsonrpc":"2.0","id":""#);
        line.push_str(ID_PREFIX);
        let _ = write!(line, "{id}");
        line.push_str(r#"","method":"tools/call","params":"#);
        line.push_str(params);
        line.push_str("}\n");
        if self.input.write(line.into_bytes()).is_err() {
            // Unless the server's end already answered it.
            let answered = {
                let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                pending.forget_progress(token.as_deref(), id);
                pending.clients.remove(&id);
                pending.waiting.remove(&id)
            };
            if let Some(answered) = answered {
                answered(Ended::Failed(self.gone()));
            }
        }
    }

    /// Cancels call `id` if it still waits: the server is told (`notifications/cancelled`) and
    /// the call hears [`Ended::Cancelled`]. Whether it was waiting.
    pub(crate) fn cancel(&self, id: u64) -> bool {
        let answered = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending.progress.retain(|_, (owner, _)| *owner != id);
            pending.clients.remove(&id);
            pending.waiting.remove(&id)
        };
        let Some(answered) = answered else {
            return false;
        };
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":\"{ID_PREFIX}{id}\",\"reason\":\"the client cancelled the call\"}}}}\n"
        );
        // A server gone has nothing to be told.
        let _ = self.input.write(line.into_bytes());
        answered(Ended::Cancelled);
        true
    }

    fn gone(&self) -> String {
        let why = self
            .exit
            .get()
            .unwrap_or_else(|| "its connection closed".to_owned());
        format!("the MCP server `{}` did not answer: {why}", self.server)
    }
}

/// Takes the answers to the lane's ids off the server's output.
pub(crate) struct LaneTap {
    server: String,
    pending: Arc<Mutex<Pending>>,
    relay: crate::upstream::progress::Relay,
    /// The log level the stdio client asked for.
    levels: crate::upstream::relay::Levels,
    /// How the server ended, for the calls it leaves unanswered.
    exit: Arc<crate::process::Exit>,
}

impl LaneTap {
    /// Passes a `notifications/message` written while a call of the lane waits to that call's
    /// client, at or above its level (below it, it is dropped); whether it was the lane's to
    /// take (no call waiting: rmcp's handler relays it).
    fn log(&self, line: &[u8]) -> bool {
        let Ok(message) = serde_json::from_slice::<LogLine<'_>>(line) else {
            return false;
        };
        if message.method != "notifications/message" {
            return false;
        }
        let client = {
            let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            match pending.clients.values().next() {
                Some(client) => client.clone(),
                None => return false,
            }
        };
        let wanted = self.levels.single();
        if wanted.is_some_and(|wanted| crate::at_or_above(message.params.level, wanted)) {
            let mut forwarded = Vec::with_capacity(line.len() + 1);
            forwarded.extend_from_slice(line.trim_ascii_end());
            forwarded.push(b'\n');
            // Before the call's answer, which this thread writes after it.
            let _ = client.write_now(&forwarded);
        }
        true
    }

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
        // Before the call's answer, which this thread writes after it. A client gone has
        // nothing to tell: the line is taken all the same.
        let _ = client.write_now(&forwarded);
        true
    }
}

impl Tap for LaneTap {
    fn take(&mut self, line: &[u8]) -> bool {
        // Cheap first: only a line naming one of the lane's ids can be an answer, and only one
        // naming the method a progress notification.
        // (Each finder built once: building one costs about what a short search does.)
        static ID: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(ID_PREFIX.as_bytes()));
        static PROGRESS: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"notifications/progress"));
        static MESSAGE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"notifications/message"));
        if ID.find(line).is_none() {
            return (PROGRESS.find(line).is_some() && self.progress(line))
                || (MESSAGE.find(line).is_some() && self.log(line));
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
            pending.clients.remove(&id);
            pending.waiting.remove(&id)
        };
        match waiting {
            Some(answered) => {
                let ended = match (envelope.result, envelope.error) {
                    (_, Some(error)) => Ended::Failed(
                        serde_json::from_str::<AnswerError>(error.get()).map_or_else(
                            |e| {
                                format!(
                                    "the MCP server `{}` answered with an error that is not a \
                                     JSON-RPC error object ({e})",
                                    self.server
                                )
                            },
                            |error| error.message,
                        ),
                    ),
                    (Some(result), None) => Ended::Answered(result.to_owned()),
                    (None, None) => Ended::Failed(format!(
                        "the MCP server `{}` answered with neither a result nor an error",
                        self.server
                    )),
                };
                answered(ended);
            }
            None => crate::note(format_args!(
                "server `{}` answered request {id} of the gateway, which is not waiting for it: \
                 dropped",
                crate::escape::escape(&self.server)
            )),
        }
        true
    }

    fn room(&mut self) -> impl std::future::Future<Output = ()> + Send {
        // The lane's own progress is written to its client on this thread, which waits for
        // it; what waits here is the progress passed on through rmcp.
        let relay = self.relay.clone();
        async move { relay.room().await }
    }

    fn may_read(&mut self) -> bool {
        self.relay.has_room()
    }

    fn end(&mut self, why: Option<&str>) {
        let waiting: Vec<Answered> = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending.ended = true;
            pending.progress.clear();
            pending
                .waiting
                .drain()
                .map(|(_, answered)| answered)
                .collect()
        };
        // Every call waiting hears why there is no answer: the server's output was cut off, or
        // how it ended (its exit comes a moment after its output closes).
        let exited = match why {
            None if !waiting.is_empty() => self.exit.wait_blocking(crate::process::LEARN_WHY),
            // Cut off: said as the server's end (`connect.rs`), as rmcp's path says it.
            Some(_) => self.exit.get(),
            None => None,
        };
        let why = exited.as_deref().or(why).unwrap_or("its connection closed");
        for answered in waiting {
            answered(Ended::Failed(format!(
                "the MCP server `{}` did not answer: {why}",
                self.server
            )));
        }
    }
}
