//! The forwarding lane to a Streamable HTTP server: the gateway's own `tools/call` POSTed on
//! the session of the server's rmcp connection, its answer read without rmcp's typed model.
//!
//! rmcp keeps the connection (the handshake, listings, the server's own stream, session
//! expiry); its client ([`Seen`]) keeps the session's endpoint, id and headers, which the lane
//! sends with. A call goes under an id of the lane's own (a string rmcp never uses: rmcp
//! numbers its requests); its answer, as JSON or as an event stream, is read strictly (a
//! message that writes a key twice is refused, as from a spawned server), and the result is
//! passed on as the server wrote it. What else the server sends on the call's stream (its
//! requests, its notifications) goes where rmcp's connection would send it ([`Watch`]), and
//! a request is answered on the same session.
//!
//! The call is written to the server from the task that decided it, with no hop through rmcp's
//! workers; one connection of the pooled client carries it.

mod body;
mod events;
mod post;
mod seen;

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

pub(crate) use seen::Seen;

use seen::Session;

use crate::upstream::Watch;
use crate::upstream::stdio::{Ended, ID_PREFIX};

/// Where the server's progress for a call goes: the call's `progressToken` (keyed as
/// [`progress_key`](crate::upstream::stdio::progress_key) keys it) and the client's event stream.
pub(crate) struct Progress {
    pub(crate) token: String,
    pub(crate) events: tokio::sync::mpsc::Sender<bytes::Bytes>,
}

impl Progress {
    /// Whether a notification's `params` name this call's token.
    fn is_for(&self, params: Option<&RawValue>) -> bool {
        #[derive(Deserialize)]
        struct Params {
            #[serde(rename = "progressToken")]
            token: serde_json::Value,
        }
        params
            .and_then(|p| serde_json::from_str::<Params>(p.get()).ok())
            .and_then(|p| crate::upstream::stdio::progress_key(&p.token))
            .is_some_and(|key| key == self.token)
    }

    /// Passes `message` on as one event; waits while the client's stream is full (the server's
    /// stream is read no further meanwhile). A client gone is not waited for.
    async fn pass(&self, message: &str) {
        let _ = self.events.send(event(message)).await;
    }
}

/// `message` as one event of a stream (a message written over several lines, as JSON may be,
/// takes a `data:` line each).
pub(crate) fn event(message: &str) -> bytes::Bytes {
    let mut event = String::with_capacity(message.len() + 24);
    event.push_str("event: message\n");
    for line in message.split(['\n', '\r']) {
        event.push_str("data: ");
        event.push_str(line);
        event.push('\n');
    }
    event.push('\n');
    bytes::Bytes::from(event)
}

/// How much of a failed request's JSON body is read for its JSON-RPC error.
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// A JSON body of at most `limit` bytes, or why it cannot be had.
async fn read_json(response: &mut reqwest::Response, limit: usize) -> Result<Vec<u8>, String> {
    body::read_bounded(response, limit)
        .await
        .map_err(|unread| match unread {
            body::Unread::TooLong => {
                format!("its answer is longer than {limit} bytes (--max-message)")
            }
            body::Unread::Failed(error) => error.to_string(),
        })
}

/// The lane to one HTTP server.
pub(crate) struct Reach {
    server: String,
    seen: Seen,
    watch: Watch,
    next: AtomicU64,
    /// The protocol revision rmcp agreed with the server.
    version: OnceLock<String>,
    /// rmcp's connection, whose session the lane sends on, held as long as the lane is: by
    /// the snapshots that route to the server and the calls on the lane. A restart (the
    /// server taken for gone after a failed request) replaces the connection; the calls that
    /// were routed to it before, through rmcp or the lane, still end on it, and it closes
    /// once the last of them let go.
    connection: OnceLock<Arc<crate::upstream::Service>>,
}

/// A message of the server's, its members as written, read once.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: String,
}

/// The id of a message that cannot be read as one (for its failure's message), as written.
fn id_of(message: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(message).ok()?;
    value.get("id").map(ToString::to_string)
}

impl Reach {
    pub(crate) fn new(server: &str, seen: Seen, watch: Watch) -> Arc<Reach> {
        Arc::new(Reach {
            server: server.to_owned(),
            seen,
            watch,
            next: AtomicU64::new(1),
            version: OnceLock::new(),
            connection: OnceLock::new(),
        })
    }

    /// rmcp's connection to the server, held from now on (see [`Reach`]'s `connection`).
    pub(crate) fn holds(&self, connection: Arc<crate::upstream::Service>) {
        let _ = self.connection.set(connection);
    }

    /// rmcp agreed `version` with the server.
    pub(crate) fn agreed(&self, version: String) {
        let _ = self.version.set(version);
    }

    /// The revision agreed with the server, once it is.
    pub(crate) fn version(&self) -> Option<&str> {
        self.version.get().map(String::as_str)
    }

    /// Whether rmcp's connection has a session the lane can send on.
    pub(crate) fn has_session(&self) -> bool {
        self.seen.has_session()
    }

    /// A fresh id for a call.
    pub(crate) fn next_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Calls the tool: `params` as written to the server, under the lane's id `id`, until its
    /// answer, or until `cancelled` fires (the server is then told, and the call is
    /// [`Ended::Cancelled`]). The server's progress for the call's token, on the call's
    /// stream, goes to `progress` as the server wrote it, before the answer.
    pub(crate) async fn call(
        &self,
        id: u64,
        params: &str,
        progress: Option<&Progress>,
        cancelled: oneshot::Receiver<()>,
    ) -> Ended {
        tokio::select! {
            ended = self.exchange(id, params, progress) => ended,
            Ok(()) = cancelled => {
                self.tell_cancelled(id).await;
                Ended::Cancelled
            }
        }
    }

    fn failed(&self, why: impl std::fmt::Display) -> Ended {
        Ended::Failed(format!(
            "the MCP server `{}` did not answer: {why}",
            self.server
        ))
    }

    async fn exchange(&self, id: u64, params: &str, progress: Option<&Progress>) -> Ended {
        let Some(session) = self.seen.session() else {
            return self.failed("no session with it is open");
        };
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"{ID_PREFIX}{id}","method":"tools/call","params":{params}}}"#
        );
        let mut response = match self.post(&session, body).await {
            Ok(response) => response,
            Err(error) => return self.failed(error),
        };
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return self.failed("its session ended (HTTP 404)");
        }
        let kind = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        let limit = crate::wire::lines::max_message_bytes();
        let mine = format!("\"{ID_PREFIX}{id}\"");
        if !status.is_success() {
            // A failure's JSON-RPC error is the call's (read within a small bound); else its
            // status is.
            let error = match kind.as_str() {
                "application/json" => read_json(&mut response, ERROR_BODY_BYTES).await.ok(),
                _ => None,
            };
            let heard = match error.as_deref().map(std::str::from_utf8) {
                Some(Ok(text)) => self.heard(text, &mine, &session, progress).await,
                _ => None,
            };
            return heard.unwrap_or_else(|| self.failed(format_args!("HTTP {status}")));
        }
        if kind == "application/json" {
            let body = match read_json(&mut response, limit).await {
                Ok(body) => body,
                Err(why) => return self.failed(why),
            };
            let Ok(text) = std::str::from_utf8(&body) else {
                return self.failed("its answer is not UTF-8");
            };
            // One JSON text, or several one after another: each is a message as an event of a
            // stream would be.
            for message in body::json_texts(text) {
                let message = match message {
                    Ok(message) => message,
                    Err(error) => {
                        return self.failed(format_args!("its answer is not JSON: {error}"));
                    }
                };
                if let Some(ended) = self.heard(message, &mine, &session, progress).await {
                    return ended;
                }
            }
            return self.failed("its answer is not an answer to the call");
        }
        if kind != "text/event-stream" {
            return self.failed(format_args!(
                "its answer is `{kind}`, neither JSON nor an event stream"
            ));
        }
        let mut events = events::Events::new(limit);
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return self.failed("its stream ended before the answer"),
                Err(error) => return self.failed(error),
            };
            let (complete, failed) = events.feed_data(&chunk);
            for data in complete {
                if let Some(ended) = self.heard(&data, &mine, &session, progress).await {
                    return ended;
                }
            }
            if let Some(why) = failed {
                return self.failed(why);
            }
        }
    }

    /// One message of the call's answer: how the call ended when it is its answer (`mine`:
    /// the call's id as written); a request of the server is answered, a notification passed
    /// where rmcp's connection passes it.
    async fn heard(
        &self,
        message: &str,
        mine: &str,
        session: &Session,
        progress: Option<&Progress>,
    ) -> Option<Ended> {
        // Strictly first: a message that writes a key twice is refused, whoever reads it.
        if let Err(error) = capability::json::no_duplicate_keys(message) {
            let why = format!(
                "the server's message writes a key twice ({error}); refused: two readers of it \
                 could read two different values"
            );
            if id_of(message).as_deref() == Some(mine) {
                return Some(Ended::Failed(why));
            }
            crate::note(format_args!("server `{}`: {why}", self.server));
            return None;
        }
        let parsed = match serde_json::from_str::<Message<'_>>(message) {
            Ok(parsed) => parsed,
            Err(error) if id_of(message).as_deref() == Some(mine) => {
                return Some(self.failed(format_args!("a malformed answer: {error}")));
            }
            Err(_) => return None,
        };
        match (parsed.method.as_deref(), parsed.id.map(RawValue::get)) {
            (Some(_), Some(id)) => {
                let answer = self.watch.asked_raw(message, id).await;
                let sent = self.post(session, answer).await;
                if let Err(error) = sent.and_then(reqwest::Response::error_for_status) {
                    crate::note(format_args!(
                        "server `{}`: the answer to its request could not be sent: {error}",
                        self.server
                    ));
                }
                None
            }
            (Some("notifications/progress"), None)
                if progress.is_some_and(|p| p.is_for(parsed.params)) =>
            {
                if let Some(progress) = progress {
                    progress.pass(message).await;
                }
                None
            }
            (Some(_), None) => {
                self.watch.notified_raw(message).await;
                None
            }
            (None, Some(id)) if id == mine => Some(match (parsed.result, parsed.error) {
                (Some(result), None) => Ended::Answered(result.to_owned()),
                (None, Some(error)) => Ended::Failed(error.message),
                _ => self.failed("an answer with neither a result nor an error, or both"),
            }),
            _ => None,
        }
    }

    /// Tells the server the call `id` is cancelled.
    async fn tell_cancelled(&self, id: u64) {
        let Some(session) = self.seen.session() else {
            return;
        };
        let body = format!(
            concat!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","#,
                r#""params":{{"requestId":"{}{}","reason":"the client cancelled the call"}}}}"#
            ),
            ID_PREFIX, id
        );
        if let Err(error) = self.post(&session, body).await {
            crate::note(format_args!(
                "server `{}`: a cancellation could not be sent: {error}",
                self.server
            ));
        }
    }

    async fn post(
        &self,
        session: &Session,
        body: String,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let mut request = self
            .seen
            .client()
            .post(&*session.uri)
            .header(
                ACCEPT,
                HeaderValue::from_static("application/json, text/event-stream"),
            )
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header("mcp-session-id", &*session.id);
        for (name, value) in &session.headers {
            request = request.header(name, value);
        }
        if let Some(token) = &session.auth {
            request = request.bearer_auth(token);
        }
        request.body(body).send().await
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_message_over_several_lines_is_one_event() {
        let event = super::event("{\"a\":\n1,\r\n\"b\":2}");
        let mut events = super::events::Events::new(1024);
        let (got, failed) = events.feed_data(&event);
        assert_eq!(failed, None);
        assert_eq!(got.len(), 1);
        let value: serde_json::Value = serde_json::from_str(&got[0]).expect("JSON");
        assert_eq!(value, serde_json::json!({"a": 1, "b": 2}));
    }
}
