//! The forwarding path of `tools/call` from the stdio front, below rmcp's typed model.
//!
//! A client's `tools/call` is read once, as its envelope (id, method, and the params' name,
//! arguments and `_meta`); it is routed, decided and recorded exactly as on rmcp's path (the
//! same [`Gateway::route`], and the same dispatcher, [`AuditedDispatch::start`]: its intent
//! on record before it is written to the server); the arguments recorded are the ones written
//! to the server, through the server's [`Lane`]; the server's result goes back to the client
//! as the server wrote it (read strictly first), under the client's id, and so do the
//! server's `notifications/progress` for the call's `progressToken` (the [`Lane`]'s doc); the
//! outcome is recorded after the client has the result ([`Started::finish`]). Nothing else
//! changes: every other message, and a call this path does not take, is rmcp's.
//!
//! All of it happens where the bytes are: the call is read, decided, recorded and written to
//! its server on the thread that reads the client (`front::stdio::start_threaded`), and its
//! answer is written to the client and its outcome recorded on the thread that reads the
//! server, with no hop through the runtime in between.
//!
//! [`AuditedDispatch::start`]: capability::audit::AuditedDispatch::start
//!
//! The path takes a call only when nothing about it needs the typed model: the session agreed a
//! revision that starts with `initialize` (2025-11-25 or earlier) and the server's connection
//! agreed the same one (so no field of the result needs adding or dropping), or the call is a
//! 2026-07-28 client's to a server whose connection agreed 2025-11-25 (`bridged.rs` translates
//! the one field of the request and of the result that differ, as rmcp's path does); the
//! params hold nothing but `name`, `arguments` and `_meta` (a task-augmented call is rmcp's),
//! and the server is a spawned one (an HTTP server is reached through rmcp).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

use ::rmcp::ErrorData;
use capability::audit::Request;
use capability::authz::Action;
use capability::mcp::telemetry::{self, Ending, Operation, Transport};
use serde_json::Value;

use crate::lane::bridged::Bridged;
use crate::lane::call::Call;
use crate::lane::open::Open;
use crate::lane::{
    CallParams, Hook, InFlight, LAST_WITH_INITIALIZE, answer_line, forwarded, lane_takes,
    progress_token, refusal, server_operation, with_context,
};
use crate::serve::gateway::{Gateway, Snapshot};
use crate::serve::who::Who;
use crate::wire::envelope::{Cancelled, Envelope};
use crate::wire::outbox::Outbox;

/// The revision whose sessions have no `initialize` (each request names it).
const CURRENT: &str = "2026-07-28";

/// The hook on the stdio client's messages.
pub(crate) struct Fast {
    gateway: Gateway,
    /// The id of the client's `initialize` (as written), until the revision is agreed.
    initialize: Mutex<Option<String>>,
    /// The revision the session agreed, read off rmcp's answer to `initialize`.
    version: OnceLock<String>,
    /// Whether rmcp serves the client: until it has taken a first request (`initialize`, or a
    /// 2026-07-28 client's first request other than `server/discover`), there is no session
    /// for the lane's calls to belong to.
    serving: AtomicBool,
    /// The calls in flight, by the client's id: a cancellation stops one.
    in_flight: Arc<Mutex<InFlight>>,
    /// The stdio client, as the snapshot it was made from sees it: made again only when a
    /// change, a restart or a reload swaps the snapshot. The snapshot is not held here: one
    /// swapped out lets go of the connections it routed to once its calls have ended.
    who: Mutex<Option<(Weak<Snapshot>, Arc<Who>)>>,
    /// The calls written to a server whose end (the client's answer, the outcome, the spans)
    /// has not run to its last line: the gateway waits for them before it closes the trail.
    open: Arc<Open>,
}

#[derive(Deserialize)]
struct Initialized<'a> {
    #[serde(borrow)]
    id: &'a RawValue,
    result: InitializeResult,
}

#[derive(Deserialize)]
struct InitializeResult {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
}

impl Fast {
    pub(crate) fn new(gateway: Gateway) -> Arc<Fast> {
        Arc::new(Fast {
            gateway,
            initialize: Mutex::new(None),
            version: OnceLock::new(),
            serving: AtomicBool::new(false),
            in_flight: Arc::default(),
            who: Mutex::new(None),
            open: Arc::default(),
        })
    }

    /// Once the servers are stopped (so that every call written to one has its end: an
    /// answer, or the server gone), waits until each has run its end (the client answered,
    /// the outcome recorded, the spans ended), for at most `within`: how many have not.
    pub(crate) fn wait_for_ends(&self, within: Duration) -> usize {
        self.open.wait(within)
    }

    /// rmcp serves the client (its first request taken): a 2026-07-28 client's calls may take
    /// the lane from now on.
    pub(crate) fn rmcp_serves(&self) {
        self.serving.store(true, Ordering::Release);
    }

    /// The stdio client under `snapshot` (`None` over HTTP).
    fn who(&self, snapshot: &Arc<Snapshot>) -> Option<Arc<Who>> {
        let mut cached = self.who.lock().unwrap_or_else(PoisonError::into_inner);
        // The weak reference keeps the allocation, so its address is not another snapshot's.
        if let Some((seen, who)) = cached.as_ref()
            && std::ptr::eq(seen.as_ptr(), Arc::as_ptr(snapshot))
        {
            return Some(who.clone());
        }
        let who = Arc::new(self.gateway.stdio_client(snapshot)?);
        *cached = Some((Arc::downgrade(snapshot), who.clone()));
        Some(who)
    }

    fn call(&self, id: &RawValue, params: &RawValue, out: &Outbox) -> bool {
        // A session that started with `initialize` agreed a revision this path serves, or one it
        // does not; one that did not is of 2026-07-28, each of its calls naming it
        // (`bridged.rs`).
        let session = self.version.get().map(String::as_str);
        if session.is_some_and(|v| v > LAST_WITH_INITIALIZE) {
            return false;
        }
        let params_len = params.get().len();
        let Ok(params) = serde_json::from_str::<CallParams<'_>>(params.get()) else {
            return false;
        };
        let bridged = match session {
            Some(_) => None,
            // Before rmcp serves the client, its first request is rmcp's, which starts the
            // session from it.
            None if !self.serving.load(Ordering::Acquire) => return false,
            None => match Bridged::of(params.meta) {
                Some(bridged) => Some(bridged),
                None => return false,
            },
        };
        let snapshot = self.gateway.current();
        let Some(who) = self.who(&snapshot) else {
            return false;
        };
        let agreed = |server: &str| {
            let Some(lane) = snapshot.lanes.get(server) else {
                return false;
            };
            match session {
                Some(session) => lane.version() == Some(session),
                // What rmcp's path relays during the call (log messages, the server's requests
                // to the client) is left to it.
                None => {
                    lane.version() == Some(LAST_WITH_INITIALIZE)
                        && self.gateway.levels.of(who.session()).is_none()
                        && !self.gateway.allows_any_request(&who, server)
                }
            }
        };
        if !lane_takes(&snapshot, &who, &params.name, agreed)
            || super::asks_receipt(params.meta.map(RawValue::get))
        {
            return false;
        }
        let id = id.get().to_owned();
        let shown = params.name;
        let given = params.arguments.is_some();
        let input = Value::Object(params.arguments.unwrap_or_default());
        let meta = params.meta.map(RawValue::get);
        let version = session.or(bridged.is_some().then_some(CURRENT));
        let operation = server_operation(&id, &shown, version, meta, Transport::Pipe, None);
        // Until the call ends: its answer, once written, takes no more room.
        let held = out.hold_request(params_len);
        // In the call's span: the decision, the records, and the leg to the server.
        let sent = operation.span().in_scope(|| {
            let route = self.gateway.route(&snapshot, &who, &shown, &input)?;
            let lane = snapshot.lanes.get(route.server).ok_or_else(|| {
                ErrorData::internal_error(format!("no connection to `{}`", route.server), None)
            })?;
            let request = Request::mcp("tools/call", Action::CallTool(route.manifest), &input);
            // The intent is on record before the call is written to the server.
            let started = self
                .gateway
                .dispatch
                .start::<(), String>(route.ctx(), who.caller(), &request)
                .map_err(|outcome| refusal(self.gateway.name, &who, outcome, &shown))?;
            let leg = started.span().in_scope(|| {
                Operation::client(&telemetry::Request {
                    method: "tools/call",
                    tool: Some(route.tool),
                    server: Some(route.server),
                    protocol_version: version,
                    transport: Some(Transport::Pipe),
                    ..telemetry::Request::default()
                })
            });
            // The server's progress for the client's token comes back to the client.
            let progress = meta.and_then(progress_token);
            // For a client of 2026-07-28, the `_meta` a server of 2025-11-25 reads.
            let translated = bridged
                .map(|bridged| bridged.into_server_meta(&self.gateway, &who, route.server))
                .transpose();
            // The leg names itself as the parent in the `_meta` the server is sent.
            let forwarded = translated.and_then(|translated| {
                let meta = translated.as_deref().or(meta);
                forwarded(
                    route.tool,
                    given.then_some(&input),
                    with_context(meta, &leg).as_deref(),
                )
            });
            let forwarded = forwarded.map_err(|e| {
                ErrorData::internal_error(
                    format!("the arguments could not be written again: {e}"),
                    None,
                )
            });
            let forwarded = match forwarded {
                Ok(forwarded) => forwarded,
                Err(error) => {
                    drop(started.finish::<(), String>(Err(error.message.to_string())));
                    return Err(error);
                }
            };
            Ok((lane.clone(), started, leg, progress, forwarded))
        });
        let (lane, started, leg, progress, forwarded) = match sent {
            Ok(sent) => sent,
            Err(error) => {
                operation.end(Ending::Error {
                    code: error.code.0,
                    message: &error.message,
                });
                let _ = out.write_now(&answer_line(&id, Err(error)));
                return true;
            }
        };
        let lane_id = lane.next_id();
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), (lane.clone(), lane_id));
        let leg_span = leg.span().clone();
        let ending = Call {
            id,
            shown,
            by: self.gateway.name,
            lane_id,
            out: out.clone(),
            in_flight: self.in_flight.clone(),
            started,
            operation,
            leg,
            _held: held,
            open: self.open.enter(),
            complete: session.is_none(),
        };
        lane.send(
            lane_id,
            &forwarded,
            &leg_span,
            out.clone(),
            progress,
            Box::new(move |ended| ending.end(ended)),
        );
        true
    }

    fn cancel(&self, params: Option<&RawValue>) -> bool {
        let Some(cancelled) =
            params.and_then(|p| serde_json::from_str::<Cancelled<'_>>(p.get()).ok())
        else {
            return false;
        };
        let call = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(cancelled.request_id.get());
        match call {
            // No answer: the record says cancelled, the server is told.
            Some((lane, id)) => {
                lane.cancel(id);
                true
            }
            None => false,
        }
    }
}

impl Hook for Fast {
    fn take(&self, line: &[u8], out: &Outbox) -> bool {
        let Ok(envelope) = serde_json::from_slice::<Envelope<'_>>(line) else {
            return false;
        };
        match (envelope.method.as_deref(), envelope.id, envelope.params) {
            (Some("tools/call"), Some(id), Some(params)) => self.call(id, params, out),
            (Some("notifications/cancelled"), None, params) => self.cancel(params),
            (Some("initialize"), Some(id), _) => {
                *self
                    .initialize
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(id.get().to_owned());
                false
            }
            _ => false,
        }
    }

    fn wrote(&self, line: &[u8]) {
        if self.version.get().is_some() {
            return;
        }
        let wanted = self
            .initialize
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(wanted) = wanted else {
            return;
        };
        if let Ok(answer) = serde_json::from_slice::<Initialized<'_>>(line)
            && answer.id.get() == wanted
        {
            let _ = self.version.set(answer.result.protocol_version);
        }
    }
}
