//! The calls a server is serving through rmcp's path, and where what the server sends while it
//! serves one goes: its requests to the client (sampling, elicitation, roots) and its log
//! messages reach the client that made the call, never another.
//!
//! Each call sent to a server is registered under the id rmcp sends it with, with a channel to
//! the task that serves the client's request. A server's request names its call where the
//! transport says so (Streamable HTTP: it came on that call's response stream, SEP-2260,
//! which rmcp marks [`InboundStreamOrigin`]); otherwise (stdio) it belongs to the one call in
//! flight, and to no call when several are: then no client can be named, and the request is
//! refused. The request is handed to the call's task, which decides it for the caller's role
//! (`server_requests`), records it and asks the client from there, so that rmcp sends it on the
//! client's own call stream.
//!
//! A server's `notifications/message` carries no such mark: it goes to the client of the one
//! call in flight, at or above the level that client asked for (`logging/setLevel`, or its
//! request's `io.modelcontextprotocol/logLevel`), and to nobody when several clients' calls
//! are in flight: a log line can hold another caller's data.

// rmcp marks logging deprecated (SEP-2577); 2025-11-25 clients set a level and servers of both
// revisions still send messages, which the gateway passes on while they do.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ::rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, RequestId};
use ::rmcp::service::InboundStreamOrigin;
use ::rmcp::{ErrorData, Peer, RoleServer};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use capability::authz::ServerRequestKind;

/// A server's request handed to the task of the call it belongs to.
pub(crate) struct Ask {
    /// Which request.
    pub(crate) kind: ServerRequestKind,
    /// Its params, as the server sent them.
    pub(crate) params: Value,
    /// The client's answer (its result as JSON), or the error the server gets.
    pub(crate) answer: oneshot::Sender<Result<Value, ErrorData>>,
}

/// One call in flight at a server.
pub(crate) struct Link {
    /// To the task serving the client's call.
    asks: mpsc::UnboundedSender<Ask>,
    /// The client, for the server's log messages, and the level it asked for.
    logs: Option<(Peer<RoleServer>, LoggingLevel)>,
    /// Who made the call (its session), so that log messages go to one client only.
    session: String,
}

/// The calls in flight at one server, by the id rmcp sent each under.
#[derive(Clone, Default)]
pub(crate) struct Calls(Arc<Mutex<HashMap<RequestId, Arc<Link>>>>);

impl Calls {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Arc<Link>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers the call sent under `id` until the returned guard is dropped: the server's
    /// requests for it come through the receiver.
    pub(crate) fn register(
        &self,
        id: RequestId,
        session: &str,
        logs: Option<(Peer<RoleServer>, LoggingLevel)>,
    ) -> (Registered, mpsc::UnboundedReceiver<Ask>) {
        let (asks, receiver) = mpsc::unbounded_channel();
        self.map().insert(
            id.clone(),
            Arc::new(Link {
                asks,
                logs,
                session: session.to_owned(),
            }),
        );
        (
            Registered {
                calls: self.clone(),
                id,
            },
            receiver,
        )
    }

    /// The call a server's request belongs to: the one whose stream it came on, else the one
    /// call in flight. `Err` with why none can be named.
    fn of(&self, origin: Option<&InboundStreamOrigin>) -> Result<Arc<Link>, String> {
        let map = self.map();
        if let Some(InboundStreamOrigin::OutboundRequest(id)) = origin {
            return map.get(id).cloned().ok_or_else(|| {
                "it came on the stream of a call that has ended, so no client can be named"
                    .to_owned()
            });
        }
        let mut links = map.values();
        match (links.next(), links.next()) {
            (Some(one), None) => Ok(one.clone()),
            (None, _) => Err(
                "no call of a client is in flight at this server, so no client \
                              can be named"
                    .to_owned(),
            ),
            (Some(_), Some(_)) => Err(format!(
                "{} calls are in flight at this server and the request does not say which it \
                 belongs to, so no client can be named",
                map.len()
            )),
        }
    }

    /// Hands a server's request to the call it belongs to, and waits for the client's answer.
    /// `None` when no call can be named (the caller then decides what to do: over stdio, the
    /// one client; else refuse, with the reason given).
    pub(crate) async fn ask(
        &self,
        origin: Option<&InboundStreamOrigin>,
        kind: ServerRequestKind,
        params: Value,
    ) -> Result<Result<Value, ErrorData>, String> {
        let link = self.of(origin)?;
        let (answer, answered) = oneshot::channel();
        link.asks
            .send(Ask {
                kind,
                params,
                answer,
            })
            .map_err(|_| "the call it belongs to has ended".to_owned())?;
        answered
            .await
            .map_err(|_| "the call it belongs to ended before the client answered".to_owned())
    }

    /// A server's log message: to the client of the call in flight when one client's calls
    /// are (at or above its level); whether it was told.
    pub(crate) async fn log(&self, params: LoggingMessageNotificationParam) -> bool {
        let target = {
            let map = self.map();
            let mut sessions = map.values().map(|link| link.session.as_str());
            let one = sessions.next();
            let alone = one.is_some_and(|first| sessions.all(|s| s == first));
            if alone {
                map.values().find_map(|link| link.logs.clone())
            } else {
                None
            }
        };
        match target {
            Some((peer, level)) if at_or_above(params.level, level) => {
                peer.notify_logging_message(params).await.is_ok()
            }
            _ => false,
        }
    }
}

/// The log level each client asked for (`logging/setLevel`), by its session.
#[derive(Clone, Default)]
pub(crate) struct Levels(Arc<Mutex<HashMap<String, LoggingLevel>>>);

impl Levels {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, LoggingLevel>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `session` asked for messages at `level` and above.
    pub(crate) fn set(&self, session: &str, level: LoggingLevel) {
        let mut map = self.map();
        // A session that ended is not known here: the map is bounded instead.
        if map.len() >= MAX_SESSIONS && !map.contains_key(session) {
            map.clear();
        }
        map.insert(session.to_owned(), level);
    }

    /// The level `session` asked for, if it did.
    pub(crate) fn of(&self, session: &str) -> Option<LoggingLevel> {
        self.map().get(session).copied()
    }

    /// The level of the one session that asked (the stdio client's), if exactly one did.
    pub(crate) fn single(&self) -> Option<LoggingLevel> {
        let map = self.map();
        let mut levels = map.values();
        match (levels.next(), levels.next()) {
            (Some(level), None) => Some(*level),
            _ => None,
        }
    }
}

/// The most sessions whose log level is kept.
const MAX_SESSIONS: usize = 100_000;

/// Whether a message at `level` is at or above `wanted` (syslog severities: `debug` the
/// lowest, `emergency` the highest).
pub(crate) fn at_or_above(level: LoggingLevel, wanted: LoggingLevel) -> bool {
    severity(level) >= severity(wanted)
}

fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// A call registered in [`Calls`]: dropped, it is forgotten.
pub(crate) struct Registered {
    calls: Calls,
    id: RequestId,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.calls.map().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_goes_to_its_streams_call_else_the_one_in_flight_else_nowhere() {
        let calls = Calls::default();
        assert!(calls.of(None).is_err(), "no call in flight");
        let (_a, _) = calls.register(RequestId::Number(1), "s-a", None);
        assert!(calls.of(None).is_ok(), "the one call");
        let (_b, _) = calls.register(RequestId::Number(2), "s-b", None);
        let why = calls.of(None).err().unwrap_or_default();
        assert!(why.contains("2 calls are in flight"), "{why}");
        let origin = InboundStreamOrigin::OutboundRequest(RequestId::Number(2));
        assert_eq!(
            calls
                .of(Some(&origin))
                .map(|l| l.session.clone())
                .ok()
                .as_deref(),
            Some("s-b")
        );
        let gone = InboundStreamOrigin::OutboundRequest(RequestId::Number(9));
        assert!(calls.of(Some(&gone)).is_err(), "a call that ended");
    }

    #[test]
    fn a_registered_call_is_forgotten_when_its_guard_goes() {
        let calls = Calls::default();
        let (guard, _) = calls.register(RequestId::Number(1), "s", None);
        drop(guard);
        assert!(calls.map().is_empty());
    }

    #[test]
    fn levels_compare_by_severity() {
        assert!(at_or_above(LoggingLevel::Error, LoggingLevel::Warning));
        assert!(at_or_above(LoggingLevel::Info, LoggingLevel::Info));
        assert!(!at_or_above(LoggingLevel::Debug, LoggingLevel::Info));
    }
}
