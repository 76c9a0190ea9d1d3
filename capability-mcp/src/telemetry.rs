//! MCP requests as OpenTelemetry spans and metrics, by OpenTelemetry's semantic conventions for
//! MCP (`gen-ai/mcp.md`, status Development), without the OpenTelemetry crates.
//!
//! Every governed front (`GovernedServer`, and so `capability proxy`; `capability gateway`)
//! makes, for each request a client sends, an [`Operation`] on the [`Side::Server`]: a
//! `tracing` span named `mcp.server` whose fields are the conventions' attributes, and, when it
//! passes the request on, one on the [`Side::Client`] (`mcp.client`) for the leg to the
//! server. The span names follow `tracing-opentelemetry`'s fields: `otel.name` is
//! `{mcp.method.name} {target}` (the tool's or the prompt's name, when there is one),
//! `otel.kind` is `server` or `client`, `otel.status_code` is `ERROR` when the request failed.
//!
//! The attributes: `mcp.method.name`, `jsonrpc.request.id`, `gen_ai.operation.name`
//! (`execute_tool` for `tools/call`), `gen_ai.tool.name`, `gen_ai.prompt.name`,
//! `mcp.resource.uri`, `mcp.session.id`, `mcp.protocol.version`, `network.transport` (`pipe` for
//! stdio, `tcp` for HTTP), `error.type` (`tool_error` for a result with `isError`, the JSON-RPC
//! error code for an error answer, `cancelled` for a request that ended without one) with
//! `rpc.response.status_code` (the error code); and ours: `capability.server` (the server a
//! gateway routed to) and, for a request that was decided, `capability.role`,
//! `capability.principal`, `capability.policy_version`, `capability.verdict` and
//! `capability.audit.seq` (recorded by the audited dispatch the request goes through, whose
//! `execute_tool` span is the `mcp.server` span's child).
//!
//! What the `tracing` crate cannot do is left to a [`Telemetry`] the program installs once
//! ([`install`]): making a span the child of the trace context a client sent in
//! `params._meta` (`traceparent`, `tracestate`, `baggage`), giving the trace context of a
//! span to put in the `_meta` of a request passed on, and recording the durations
//! (`mcp.server.operation.duration`, `mcp.client.operation.duration`,
//! `mcp.server.session.duration`). `capability --otlp` installs one built on the OpenTelemetry
//! SDK; without one, the spans are plain `tracing` spans (free when nothing subscribes) and the
//! `_meta` a client sent is passed on as it was written.

use std::fmt;
use std::sync::OnceLock;
use std::time::Instant;

use serde_json::{Map, Value};
use tracing::Span;
use tracing::field::Empty;

/// The `_meta` key of the W3C `traceparent` (SEP-414).
pub const TRACEPARENT: &str = "traceparent";
/// The `_meta` key of the W3C `tracestate`.
pub const TRACESTATE: &str = "tracestate";
/// The `_meta` key of the W3C `baggage`.
pub const BAGGAGE: &str = "baggage";

/// A W3C trace context, as carried in a request's `params._meta`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    /// `traceparent`: `00-{trace id}-{parent id}-{flags}`.
    pub traceparent: String,
    /// `tracestate`, if any.
    pub tracestate: Option<String>,
    /// `baggage`, if any.
    pub baggage: Option<String>,
}

impl TraceContext {
    /// The trace context in `meta`, if its `traceparent` is well formed (W3C Trace Context:
    /// a version other than `ff`, a trace id of 32 and a parent id of 16 lowercase hex
    /// digits, neither all zeros, two hex digits of flags). A malformed one is ignored, as the
    /// W3C specification says: the request then starts a trace of its own.
    pub fn from_meta(meta: &Map<String, Value>) -> Option<TraceContext> {
        let traceparent = meta.get(TRACEPARENT)?.as_str()?;
        if !well_formed(traceparent) {
            return None;
        }
        let text = |key: &str| meta.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(TraceContext {
            traceparent: traceparent.to_owned(),
            tracestate: text(TRACESTATE),
            baggage: text(BAGGAGE),
        })
    }

    /// Writes the context into `meta`, replacing the keys it had (a `tracestate` or `baggage`
    /// this context does not have is removed: it belonged to the context replaced).
    pub fn write_to(&self, meta: &mut Map<String, Value>) {
        meta.insert(TRACEPARENT.to_owned(), self.traceparent.clone().into());
        for (key, value) in [(TRACESTATE, &self.tracestate), (BAGGAGE, &self.baggage)] {
            match value {
                Some(value) => meta.insert(key.to_owned(), value.clone().into()),
                None => meta.remove(key),
            };
        }
    }

    /// The trace id (32 hex digits).
    pub fn trace_id(&self) -> &str {
        self.traceparent.get(3..35).unwrap_or_default()
    }

    /// The id of the span this context names as the parent (16 hex digits).
    pub fn parent_id(&self) -> &str {
        self.traceparent.get(36..52).unwrap_or_default()
    }
}

fn well_formed(traceparent: &str) -> bool {
    let hex = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let parts: Vec<&str> = traceparent.split('-').collect();
    let [version, trace, parent, flags, rest @ ..] = parts.as_slice() else {
        return false;
    };
    // Version 00 has exactly four parts; a later version may add some.
    let shape = version.len() == 2
        && hex(version)
        && *version != "ff"
        && (rest.is_empty() || *version != "00");
    shape
        && trace.len() == 32
        && hex(trace)
        && trace.bytes().any(|b| b != b'0')
        && parent.len() == 16
        && hex(parent)
        && parent.bytes().any(|b| b != b'0')
        && flags.len() == 2
        && hex(flags)
}

/// Which side of an exchange an operation is observed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// A request received from a client: `mcp.server`.
    Server,
    /// A request sent to a server: `mcp.client`.
    Client,
}

/// The transport a message travels on, as `network.transport` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Standard input and output: `pipe`.
    Pipe,
    /// Streamable HTTP: `tcp`.
    Tcp,
}

impl Transport {
    /// The attribute's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Pipe => "pipe",
            Transport::Tcp => "tcp",
        }
    }
}

/// What the program installs to connect the spans to OpenTelemetry and to record the
/// durations. Every method has a default that does nothing.
pub trait Telemetry: Send + Sync + 'static {
    /// Makes `span` (just made, not yet entered) the child of `parent`, the trace context the
    /// client sent.
    fn adopt(&self, span: &Span, parent: &TraceContext) {
        let _ = (span, parent);
    }

    /// The trace context that names `span` as the parent, to send in the `_meta` of the
    /// request `span` stands for.
    fn context(&self, span: &Span) -> Option<TraceContext> {
        let _ = span;
        None
    }

    /// An operation ended after `seconds`: `mcp.server.operation.duration` or
    /// `mcp.client.operation.duration`, with the attributes [`Ended::attributes`] gives.
    fn operation(&self, side: Side, ended: &Ended<'_>, seconds: f64) {
        let _ = (side, ended, seconds);
    }

    /// A session ended after `seconds`: `mcp.server.session.duration` or
    /// `mcp.client.session.duration`, with the attributes [`SessionEnded::attributes`] gives.
    fn session(&self, side: Side, ended: &SessionEnded<'_>, seconds: f64) {
        let _ = (side, ended, seconds);
    }
}

static INSTALLED: OnceLock<Box<dyn Telemetry>> = OnceLock::new();

/// The error of a second [`install`].
#[derive(Debug)]
pub struct AlreadyInstalled;

impl fmt::Display for AlreadyInstalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a telemetry is already installed in this process")
    }
}

impl std::error::Error for AlreadyInstalled {}

/// Installs the process's [`Telemetry`]; once.
pub fn install(telemetry: impl Telemetry) -> Result<(), AlreadyInstalled> {
    INSTALLED
        .set(Box::new(telemetry))
        .map_err(|_| AlreadyInstalled)
}

/// The installed telemetry, if any.
pub fn installed() -> Option<&'static dyn Telemetry> {
    INSTALLED.get().map(Box::as_ref)
}

/// What a request is, as the conventions' attributes need it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Request<'a> {
    /// `mcp.method.name`.
    pub method: &'a str,
    /// `jsonrpc.request.id`, as written (a string id without its quotes).
    pub id: Option<&'a str>,
    /// `gen_ai.tool.name`, for `tools/call`.
    pub tool: Option<&'a str>,
    /// `gen_ai.prompt.name`, for `prompts/get`.
    pub prompt: Option<&'a str>,
    /// `mcp.resource.uri`, for a request on a resource.
    pub resource_uri: Option<&'a str>,
    /// `mcp.session.id`, when the request is part of a session with an id (Streamable HTTP).
    pub session_id: Option<&'a str>,
    /// `mcp.protocol.version`.
    pub protocol_version: Option<&'a str>,
    /// `network.transport`.
    pub transport: Option<Transport>,
    /// The server a gateway passes the request to (`capability.server`).
    pub server: Option<&'a str>,
    /// The request's `params._meta`, where a client's trace context is read (server side).
    pub meta: Option<&'a Map<String, Value>>,
}

macro_rules! operation_span {
    ($name:literal, $kind:literal, $request:expr, $title:expr) => {{
        let request: &Request<'_> = $request;
        tracing::info_span!(
            target: "capability::mcp",
            $name,
            otel.name = %$title,
            otel.kind = $kind,
            otel.status_code = Empty,
            otel.status_description = Empty,
            mcp.method.name = request.method,
            jsonrpc.request.id = request.id,
            gen_ai.operation.name = (request.method == "tools/call").then_some("execute_tool"),
            gen_ai.tool.name = request.tool,
            gen_ai.prompt.name = request.prompt,
            mcp.resource.uri = request.resource_uri,
            mcp.session.id = request.session_id,
            mcp.protocol.version = request.protocol_version,
            network.transport = request.transport.map(Transport::as_str),
            error.type = Empty,
            rpc.response.status_code = Empty,
            capability.server = request.server,
            capability.role = Empty,
            capability.principal = Empty,
            capability.policy_version = Empty,
            capability.verdict = Empty,
            capability.audit.seq = Empty,
        )
    }};
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending<'a> {
    /// Answered with a result.
    Done,
    /// Answered with a tool's result that has `isError`: `error.type = tool_error`.
    ToolError,
    /// Answered with a JSON-RPC error: `error.type` is its code.
    Error {
        /// The error's code.
        code: i32,
        /// Its message (the span's status description).
        message: &'a str,
    },
    /// Ended without an answer of the peer, for the reason given (`error.type`), such as
    /// `cancelled` or `transport_error`.
    Failed(&'static str),
}

/// One request, observed on one side, from its start until it is [`end`](Operation::end)ed
/// (or dropped: then it ended `cancelled`).
#[derive(Debug)]
pub struct Operation {
    span: Span,
    side: Side,
    started: Instant,
    method: String,
    tool: Option<String>,
    prompt: Option<String>,
    protocol_version: Option<String>,
    transport: Option<Transport>,
    ended: bool,
}

impl Operation {
    /// A request received from a client: its `mcp.server` span, the child of the trace
    /// context in its `_meta` when one is installed ([`Telemetry::adopt`]), else of the
    /// current span.
    pub fn server(request: &Request<'_>) -> Operation {
        let title = Title(request);
        let span = operation_span!("mcp.server", "server", request, title);
        if let (Some(telemetry), Some(meta)) = (installed(), request.meta)
            && !span.is_disabled()
            && let Some(parent) = TraceContext::from_meta(meta)
        {
            telemetry.adopt(&span, &parent);
        }
        Operation::new(span, Side::Server, request)
    }

    /// A request sent to a server: its `mcp.client` span, the child of the current span. Its
    /// [`trace_context`](Operation::trace_context) goes in the request's `_meta`.
    pub fn client(request: &Request<'_>) -> Operation {
        let title = Title(request);
        let span = operation_span!("mcp.client", "client", request, title);
        Operation::new(span, Side::Client, request)
    }

    fn new(span: Span, side: Side, request: &Request<'_>) -> Operation {
        Operation {
            span,
            side,
            started: Instant::now(),
            method: request.method.to_owned(),
            tool: request.tool.map(str::to_owned),
            prompt: request.prompt.map(str::to_owned),
            protocol_version: request.protocol_version.map(str::to_owned),
            transport: request.transport,
            ended: false,
        }
    }

    /// The operation's span: the work of the request runs in it.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// The trace context naming this operation's span as the parent, when a telemetry is
    /// installed and the span is recorded.
    pub fn trace_context(&self) -> Option<TraceContext> {
        if self.span.is_disabled() {
            return None;
        }
        installed()?.context(&self.span)
    }

    /// Writes [`trace_context`](Operation::trace_context) into `meta`; whether there was one.
    pub fn inject(&self, meta: &mut Map<String, Value>) -> bool {
        match self.trace_context() {
            Some(context) => {
                context.write_to(meta);
                true
            }
            None => false,
        }
    }

    /// Records how the operation ended, and its duration.
    pub fn end(mut self, ending: Ending<'_>) {
        self.finish(ending);
    }

    fn finish(&mut self, ending: Ending<'_>) {
        if self.ended {
            return;
        }
        self.ended = true;
        let seconds = self.started.elapsed().as_secs_f64();
        let code;
        let error_type = match ending {
            Ending::Done => None,
            Ending::ToolError => Some("tool_error"),
            Ending::Error { code: c, message } => {
                code = c.to_string();
                self.span.record("rpc.response.status_code", code.as_str());
                self.span.record("otel.status_description", message);
                Some(code.as_str())
            }
            Ending::Failed(why) => Some(why),
        };
        if let Some(error_type) = error_type {
            self.span.record("error.type", error_type);
            self.span.record("otel.status_code", "ERROR");
        }
        if let Some(telemetry) = installed() {
            let ended = Ended {
                method: &self.method,
                tool: self.tool.as_deref(),
                prompt: self.prompt.as_deref(),
                protocol_version: self.protocol_version.as_deref(),
                transport: self.transport,
                error_type,
            };
            telemetry.operation(self.side, &ended, seconds);
        }
    }
}

impl Drop for Operation {
    fn drop(&mut self) {
        // A request whose future was dropped (the client cancelled it, or its session ended).
        self.finish(Ending::Failed("cancelled"));
    }
}

struct Title<'r, 'a>(&'r Request<'a>);

impl fmt::Display for Title<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let request = self.0;
        match request.tool.or(request.prompt) {
            Some(target) => write!(f, "{} {target}", request.method),
            None => f.write_str(request.method),
        }
    }
}

/// An ended operation's attributes, for its duration.
#[derive(Clone, Copy, Debug)]
pub struct Ended<'a> {
    /// `mcp.method.name`.
    pub method: &'a str,
    /// `gen_ai.tool.name`.
    pub tool: Option<&'a str>,
    /// `gen_ai.prompt.name`.
    pub prompt: Option<&'a str>,
    /// `mcp.protocol.version`.
    pub protocol_version: Option<&'a str>,
    /// `network.transport`.
    pub transport: Option<Transport>,
    /// `error.type`.
    pub error_type: Option<&'a str>,
}

impl<'a> Ended<'a> {
    /// The attributes by their conventional names, those that have a value.
    pub fn attributes(&self) -> Vec<(&'static str, &'a str)> {
        let mut attributes = vec![("mcp.method.name", self.method)];
        if self.method == "tools/call" {
            attributes.push(("gen_ai.operation.name", "execute_tool"));
        }
        let optional = [
            ("gen_ai.tool.name", self.tool),
            ("gen_ai.prompt.name", self.prompt),
            ("mcp.protocol.version", self.protocol_version),
            ("network.transport", self.transport.map(Transport::as_str)),
            ("error.type", self.error_type),
        ];
        attributes.extend(
            optional
                .into_iter()
                .filter_map(|(key, value)| value.map(|v| (key, v))),
        );
        attributes
    }
}

/// A session, from its start until it is [`end`](Session::end)ed or dropped.
#[derive(Debug)]
pub struct Session {
    side: Side,
    started: Instant,
    transport: Transport,
    protocol_version: OnceLock<String>,
    ended: bool,
}

impl Session {
    /// A session that starts now.
    pub fn start(side: Side, transport: Transport) -> Session {
        Session {
            side,
            started: Instant::now(),
            transport,
            protocol_version: OnceLock::new(),
            ended: false,
        }
    }

    /// The revision the session agreed (the first one given is kept).
    pub fn agreed(&self, protocol_version: &str) {
        let _ = self.protocol_version.set(protocol_version.to_owned());
    }

    /// Records the session's duration; `error_type` if it ended on an error.
    pub fn end(mut self, error_type: Option<&str>) {
        self.finish(error_type);
    }

    fn finish(&mut self, error_type: Option<&str>) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        if let Some(telemetry) = installed() {
            let ended = SessionEnded {
                protocol_version: self.protocol_version.get().map(String::as_str),
                transport: self.transport,
                error_type,
            };
            telemetry.session(self.side, &ended, self.started.elapsed().as_secs_f64());
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.finish(None);
    }
}

/// An ended session's attributes, for its duration.
#[derive(Clone, Copy, Debug)]
pub struct SessionEnded<'a> {
    /// `mcp.protocol.version`.
    pub protocol_version: Option<&'a str>,
    /// `network.transport`.
    pub transport: Transport,
    /// `error.type`.
    pub error_type: Option<&'a str>,
}

impl<'a> SessionEnded<'a> {
    /// The attributes by their conventional names, those that have a value.
    pub fn attributes(&self) -> Vec<(&'static str, &'a str)> {
        let mut attributes = vec![("network.transport", self.transport.as_str())];
        if let Some(version) = self.protocol_version {
            attributes.push(("mcp.protocol.version", version));
        }
        if let Some(error_type) = self.error_type {
            attributes.push(("error.type", error_type));
        }
        attributes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn a_well_formed_traceparent_is_read_with_its_state_and_baggage() {
        let m = meta(json!({
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "tracestate": "rojo=00f067aa0ba902b7",
            "baggage": "user=alice",
            "progressToken": 7,
        }));
        let context = TraceContext::from_meta(&m).expect("read");
        assert_eq!(context.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.parent_id(), "00f067aa0ba902b7");
        assert_eq!(context.tracestate.as_deref(), Some("rojo=00f067aa0ba902b7"));
        assert_eq!(context.baggage.as_deref(), Some("user=alice"));
    }

    #[test]
    fn a_malformed_traceparent_is_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01",
        ] {
            assert_eq!(
                TraceContext::from_meta(&meta(json!({ "traceparent": bad }))),
                None,
                "{bad:?}"
            );
        }
        assert_eq!(
            TraceContext::from_meta(&meta(json!({ "traceparent": 7 }))),
            None
        );
        // A later version may carry more parts.
        assert!(
            TraceContext::from_meta(&meta(json!({
                "traceparent": "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz"
            })))
            .is_some()
        );
    }

    #[test]
    fn writing_a_context_replaces_the_old_one_and_keeps_other_keys() {
        let mut m = meta(json!({
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "tracestate": "old=1",
            "baggage": "old=1",
            "progressToken": "p",
        }));
        TraceContext {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01".into(),
            tracestate: None,
            baggage: Some("user=alice".into()),
        }
        .write_to(&mut m);
        assert_eq!(
            Value::Object(m),
            json!({
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01",
                "baggage": "user=alice",
                "progressToken": "p",
            })
        );
    }

    #[test]
    fn the_duration_attributes_are_the_conventions_names() {
        let ended = Ended {
            method: "tools/call",
            tool: Some("echo"),
            prompt: None,
            protocol_version: Some("2025-06-18"),
            transport: Some(Transport::Pipe),
            error_type: Some("tool_error"),
        };
        assert_eq!(
            ended.attributes(),
            vec![
                ("mcp.method.name", "tools/call"),
                ("gen_ai.operation.name", "execute_tool"),
                ("gen_ai.tool.name", "echo"),
                ("mcp.protocol.version", "2025-06-18"),
                ("network.transport", "pipe"),
                ("error.type", "tool_error"),
            ]
        );
        let session = SessionEnded {
            protocol_version: None,
            transport: Transport::Tcp,
            error_type: None,
        };
        assert_eq!(session.attributes(), vec![("network.transport", "tcp")]);
    }

    #[test]
    fn a_span_is_named_for_its_method_and_target() {
        let call = Request {
            method: "tools/call",
            tool: Some("echo"),
            ..Request::default()
        };
        assert_eq!(Title(&call).to_string(), "tools/call echo");
        let get = Request {
            method: "prompts/get",
            prompt: Some("review"),
            ..Request::default()
        };
        assert_eq!(Title(&get).to_string(), "prompts/get review");
        let read = Request {
            method: "resources/read",
            resource_uri: Some("file:///etc/hosts"),
            ..Request::default()
        };
        // A URI is not a low-cardinality target: left out of the name.
        assert_eq!(Title(&read).to_string(), "resources/read");
    }
}
