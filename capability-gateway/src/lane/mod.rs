//! What the forwarding paths of `tools/call` share, below rmcp's typed model: which calls a
//! lane takes ([`lane_takes`]), the params written to the server ([`forwarded`]), the
//! client's answer ([`answer_line`]), a refusal ([`refusal`]), a call asking for a receipt
//! left to rmcp's path ([`asks_receipt`]), the spans of a call
//! ([`server_operation`], [`end`]); its end settled once (`call.rs`) and counted until it has
//! run (`open.rs`). What differs: the stdio front's entry (`stdio.rs`, the hook on the
//! client's messages; `bridged.rs` for a 2026-07-28 client's call to a 2025-11-25 server) and
//! the HTTP front's (`http.rs`, in front of rmcp's Streamable HTTP service). The pipes to the servers are `upstream`'s (a spawned server's `Lane`, an HTTP
//! server's `Reach`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use ::rmcp::ErrorData;
use capability::audit::Outcome;
use capability::mcp::telemetry::{self, Ending, Operation, Transport};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::serve::gateway::Snapshot;
use crate::serve::refusal::{answered, refused_by};
use crate::serve::who::Who;
use crate::upstream::stdio::Lane;

mod bridged;
mod call;
pub(crate) mod http;
mod open;
mod stdio;

use crate::wire::outbox::Outbox;
use open::OpenCall;
pub(crate) use stdio::Fast;

/// What may take a client's message before rmcp does, and answer it itself (the gateway's
/// forwarding lane), and watches what rmcp writes.
pub(crate) trait Hook: Send + Sync + 'static {
    /// Whether the client's `line` (without its newline) is taken: it then does not reach rmcp,
    /// and its answer (whole lines) goes to `answer`. A line taken must have been read whole as
    /// JSON; any other is checked (and, if it is not JSON, answered) by the filter.
    fn take(&self, line: &[u8], answer: &Outbox) -> bool;
    /// A line rmcp writes to the client.
    fn wrote(&self, line: &[u8]);
}

/// The latest revision whose sessions start with `initialize`: a later one is rmcp's.
pub(crate) const LAST_WITH_INITIALIZE: &str = "2025-11-25";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CallParams<'a> {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) arguments: Option<Map<String, Value>>,
    #[serde(borrow, default, rename = "_meta")]
    pub(crate) meta: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct ErrorLine<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: &'a ErrorData,
}

/// Whether a lane (stdio's or HTTP's) takes `who`'s call of `shown`: a name no server has, to
/// refuse it the same way as rmcp's path; a routed one when `agreed` says the lane to its server
/// agreed the session's revision, and the call is not held for approval (`approvals.rs`: rare,
/// and never fast).
pub(crate) fn lane_takes(
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

/// Whether a call's `_meta` (as written) may ask for a receipt (`capability/receipt`): such a
/// call is left to rmcp's path, which records its outcome before it answers and so can put the
/// outcome record's receipt in the result; the lane answers first and records after.
pub(crate) fn asks_receipt(meta: Option<&str>) -> bool {
    meta.is_some_and(|meta| {
        memchr::memmem::find(meta.as_bytes(), b"\"capability/receipt\"").is_some()
    })
}

/// The calls in flight, by the client's id (as written): the lane and the lane's id of each.
type InFlight = HashMap<String, (Arc<Lane>, u64)>;

/// The error answered for a call that did not start (refused, or its intent not written).
pub(crate) fn refusal(by: &str, who: &Who, outcome: Outcome<(), String>, shown: &str) -> ErrorData {
    match answered(outcome, |why| {
        refused_by(by, "tool", shown, &why.of_who(who))
    }) {
        Ok(()) => ErrorData::internal_error("the call did not start", None),
        Err(error) => error,
    }
}

/// The params written to the server: the tool's own name, the arguments recorded, the
/// client's `_meta` as it wrote it.
pub(crate) fn forwarded(
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
pub(crate) fn answer_line(id: &str, answer: Result<&RawValue, ErrorData>) -> Vec<u8> {
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
pub(crate) fn server_operation(
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
pub(crate) fn with_context<'m>(meta: Option<&'m str>, leg: &Operation) -> Option<Cow<'m, str>> {
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
pub(crate) fn progress_token(meta: &str) -> Option<String> {
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
        .and_then(crate::upstream::stdio::progress_key)
}

/// Ends the leg to the server with how it ended (an error answer or a lost server alike:
/// the lane keeps no JSON-RPC code); whether the result has `isError`. The result is read for
/// it only when the operation is recorded (a subscriber or a telemetry wants it), not on every
/// call.
pub(crate) fn end(leg: Operation, result: Result<&RawValue, ()>) -> bool {
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
