//! The forwarding path of `tools/call` over stdio, below rmcp's typed model.
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
//! its server on the thread that reads the client (`proxy::front::start_threaded`), and its
//! answer is written to the client and its outcome recorded on the thread that reads the
//! server, with no hop through the runtime in between.
//!
//! [`AuditedDispatch::start`]: capability::audit::AuditedDispatch::start
//!
//! The path takes a call only when nothing about it needs the typed model: the session agreed a
//! revision that starts with `initialize` (2025-11-25 or earlier), the server's connection
//! agreed the same one (so no field of the result needs adding or dropping), the params hold
//! nothing but `name`, `arguments` and `_meta` (a task-augmented call is rmcp's), and the
//! server is a spawned one (an HTTP server is reached through rmcp).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use ::rmcp::ErrorData;
use capability::audit::{Outcome, Request};
use capability::authz::Action;
use capability::mcp::telemetry::{self, Ending, Operation, Transport};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::handler::{Gateway, Snapshot, Who, answered, refused_by};
use super::lane::Lane;
use crate::envelope::{Cancelled, Envelope};

mod call;
pub(super) mod front;
mod open;
use crate::proxy::Outbox;
use call::Call;
use open::{Open, OpenCall};

/// The latest revision whose sessions start with `initialize`: a later one is rmcp's.
pub(super) const LAST_WITH_INITIALIZE: &str = "2025-11-25";

/// The hook on the stdio client's messages.
pub(super) struct Fast {
    gateway: Gateway,
    /// The id of the client's `initialize` (as written), until the revision is agreed.
    initialize: Mutex<Option<String>>,
    /// The revision the session agreed, read off rmcp's answer to `initialize`.
    version: OnceLock<String>,
    /// The calls in flight, by the client's id: a cancellation stops one.
    in_flight: Arc<Mutex<InFlight>>,
    /// The stdio client, as the snapshot it was made from sees it: made again only when a
    /// change, a restart or a reload swaps the snapshot.
    who: Mutex<Option<(Arc<Snapshot>, Arc<Who>)>>,
    /// The calls written to a server whose end (the client's answer, the outcome, the spans)
    /// has not run to its last line: the gateway waits for them before it closes the trail.
    open: Arc<Open>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CallParams<'a> {
    pub(super) name: String,
    #[serde(default)]
    pub(super) arguments: Option<Map<String, Value>>,
    #[serde(borrow, default, rename = "_meta")]
    pub(super) meta: Option<&'a RawValue>,
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

#[derive(Serialize)]
struct ErrorLine<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: &'a ErrorData,
}

impl Fast {
    pub(super) fn new(gateway: Gateway) -> Arc<Fast> {
        Arc::new(Fast {
            gateway,
            initialize: Mutex::new(None),
            version: OnceLock::new(),
            in_flight: Arc::default(),
            who: Mutex::new(None),
            open: Arc::default(),
        })
    }

    /// Once the servers are stopped (so that every call written to one has its end: an
    /// answer, or the server gone), waits until each has run its end (the client answered,
    /// the outcome recorded, the spans ended), for at most `within`: how many have not.
    pub(super) fn wait_for_ends(&self, within: Duration) -> usize {
        self.open.wait(within)
    }

    /// The stdio client under `snapshot` (`None` over HTTP).
    fn who(&self, snapshot: &Arc<Snapshot>) -> Option<Arc<Who>> {
        let mut cached = self.who.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((seen, who)) = cached.as_ref()
            && Arc::ptr_eq(seen, snapshot)
        {
            return Some(who.clone());
        }
        let who = Arc::new(self.gateway.stdio_client(snapshot)?);
        *cached = Some((snapshot.clone(), who.clone()));
        Some(who)
    }

    /// Whether the session agreed a revision this path serves.
    fn serves(&self) -> bool {
        self.version
            .get()
            .is_some_and(|v| v.as_str() <= LAST_WITH_INITIALIZE)
    }

    fn call(&self, id: &RawValue, params: &RawValue, out: &Outbox) -> bool {
        if !self.serves() {
            return false;
        }
        let params_len = params.get().len();
        let Ok(params) = serde_json::from_str::<CallParams<'_>>(params.get()) else {
            return false;
        };
        let snapshot = self.gateway.current();
        let Some(who) = self.who(&snapshot) else {
            return false;
        };
        let agreed = |server: &str| {
            snapshot
                .lanes
                .get(server)
                .is_some_and(|lane| lane.version() == self.version.get().map(String::as_str))
        };
        if !lane_takes(&snapshot, &who, &params.name, agreed) {
            return false;
        }
        let id = id.get().to_owned();
        let shown = params.name;
        let given = params.arguments.is_some();
        let input = Value::Object(params.arguments.unwrap_or_default());
        let meta = params.meta.map(RawValue::get);
        let version = self.version.get().map(String::as_str);
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
            let progress = meta
                .and_then(progress_token)
                .map(|token| (token, out.clone()));
            // The leg names itself as the parent in the `_meta` the server is sent.
            let forwarded = forwarded(
                route.tool,
                given.then_some(&input),
                with_context(meta, &leg).as_deref(),
            )
            .map_err(|e| {
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
        };
        lane.send(
            lane_id,
            &forwarded,
            &leg_span,
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

/// Whether a lane (stdio's or HTTP's) takes `who`'s call of `shown`: a name no server has, to
/// refuse it the same way as rmcp's path; a routed one when `agreed` says the lane to its server
/// agreed the session's revision, and the call is not held for approval (`approvals.rs`: rare,
/// and never fast).
pub(super) fn lane_takes(
    snapshot: &Snapshot,
    who: &Who,
    shown: &str,
    agreed: impl FnOnce(&str) -> bool,
) -> bool {
    match snapshot.fleet.route(shown) {
        None => true,
        Some(route) => {
            agreed(route.server)
                // A server called on the caller's behalf takes the caller's own connection.
                && !snapshot.delegated.contains_key(route.server)
                && snapshot
                    .policy
                    .hold(who.role(), Some(route.server), route.tool)
                    .is_none()
        }
    }
}

/// The calls in flight, by the client's id (as written): the lane and the lane's id of each.
type InFlight = HashMap<String, (Arc<Lane>, u64)>;

/// The error answered for a call that did not start (refused, or its intent not written).
pub(super) fn refusal(by: &str, who: &Who, outcome: Outcome<(), String>, shown: &str) -> ErrorData {
    match answered(outcome, |why| {
        refused_by(by, "tool", shown, &why.of_who(who))
    }) {
        Ok(()) => ErrorData::internal_error("the call did not start", None),
        Err(error) => error,
    }
}

impl crate::proxy::FrontHook for Fast {
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

/// The params written to the server: the tool's own name, the arguments recorded, the
/// client's `_meta` as it wrote it.
pub(super) fn forwarded(
    tool: &str,
    arguments: Option<&Value>,
    meta: Option<&str>,
) -> Result<String, serde_json::Error> {
    let mut params = String::with_capacity(64);
    params.push_str("{\"name\":");
    params.push_str(&serde_json::to_string(tool)?);
    if let Some(arguments) = arguments {
        params.push_str(",\"arguments\":");
        params.push_str(&serde_json::to_string(arguments)?);
    }
    if let Some(meta) = meta {
        params.push_str(",\"_meta\":");
        params.push_str(meta);
    }
    params.push('}');
    Ok(params)
}

/// The client's answer, one line under its own id.
pub(super) fn answer_line(id: &str, answer: Result<&RawValue, ErrorData>) -> Vec<u8> {
    let mut line = match answer {
        Ok(result) => {
            let result = result.get();
            let mut line = String::with_capacity(36 + id.len() + result.len());
            line.push_str(r#"{"jsonrpc":"2.0","id":"#);
            line.push_str(id);
            line.push_str(r#","result":"#);
            line.push_str(result);
            line.push('}');
            line
        }
        Err(error) => {
            let id: Value = serde_json::from_str(id).unwrap_or(Value::Null);
            serde_json::to_string(&ErrorLine {
                jsonrpc: "2.0",
                id: &id,
                error: &error,
            })
            .unwrap_or_else(|_| {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32603,"message":"the error could not be written"}}}}"#)
            })
        }
    }
    .into_bytes();
    line.push(b'\n');
    line
}

/// The `mcp.server` operation of a client's `tools/call` on a lane: `id` and `meta` as the
/// client wrote them (the `_meta` is read only when a telemetry is installed to adopt its
/// trace context), over `transport`, in `session` (over HTTP).
pub(super) fn server_operation(
    id: &str,
    tool: &str,
    version: Option<&str>,
    meta: Option<&str>,
    transport: Transport,
    session: Option<&str>,
) -> Operation {
    let text = id
        .starts_with('"')
        .then(|| serde_json::from_str::<String>(id).ok())
        .flatten();
    let meta: Option<Map<String, Value>> = telemetry::installed()
        .and(meta)
        .and_then(|meta| serde_json::from_str(meta).ok());
    Operation::server(&telemetry::Request {
        method: "tools/call",
        id: Some(text.as_deref().unwrap_or(id)),
        tool: Some(tool),
        protocol_version: version,
        meta: meta.as_ref(),
        transport: Some(transport),
        session_id: session,
        ..telemetry::Request::default()
    })
}

/// The `_meta` written to the server: the client's, with the leg's trace context when it has
/// one (a `_meta` that is not an object is passed on as it was).
pub(super) fn with_context<'m>(meta: Option<&'m str>, leg: &Operation) -> Option<Cow<'m, str>> {
    let Some(context) = leg.trace_context() else {
        return meta.map(Cow::Borrowed);
    };
    let mut map = match meta {
        None => Map::new(),
        Some(meta) => match serde_json::from_str::<Map<String, Value>>(meta) {
            Ok(map) => map,
            Err(_) => return Some(Cow::Borrowed(meta)),
        },
    };
    context.write_to(&mut map);
    match serde_json::to_string(&map) {
        Ok(written) => Some(Cow::Owned(written)),
        Err(_) => meta.map(Cow::Borrowed),
    }
}

/// The `progressToken` of a call's `_meta` (as the client wrote it), keyed as the lane keys
/// it; read only when the `_meta` names one.
pub(super) fn progress_token(meta: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Meta {
        #[serde(rename = "progressToken", default)]
        progress_token: Option<Value>,
    }
    // Cheap first: most calls name no token.
    memchr::memmem::find(meta.as_bytes(), b"progressToken")?;
    let meta: Meta = serde_json::from_str(meta).ok()?;
    meta.progress_token
        .as_ref()
        .and_then(super::lane::progress_key)
}

/// Ends the leg to the server with how it ended (an error answer or a lost server alike:
/// the lane keeps no JSON-RPC code); whether the result has `isError`. The result is read for
/// it only when the operation is recorded (a subscriber or a telemetry wants it), not on every
/// call.
pub(super) fn end(leg: Operation, result: Result<&RawValue, ()>) -> bool {
    let recorded = !leg.span().is_disabled() || telemetry::installed().is_some();
    let tool_error = recorded && matches!(result, Ok(answer) if is_tool_error(answer));
    leg.end(match result {
        Ok(_) if tool_error => Ending::ToolError,
        Ok(_) => Ending::Done,
        Err(_) => Ending::Failed("_OTHER"),
    });
    tool_error
}

/// Whether a tool's result has `isError: true` (read only when the key is there).
fn is_tool_error(result: &RawValue) -> bool {
    #[derive(Deserialize)]
    struct Flag {
        #[serde(rename = "isError", default)]
        is_error: Option<bool>,
    }
    memchr::memmem::find(result.get().as_bytes(), b"\"isError\"").is_some()
        && serde_json::from_str::<Flag>(result.get()).is_ok_and(|flag| flag.is_error == Some(true))
}
