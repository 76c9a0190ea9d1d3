//! One request's [`Operation`] (its span, how it ended, its duration) and a [`Session`]'s.

use std::fmt;
use std::sync::OnceLock;
use std::time::Instant;

use serde_json::{Map, Value};
use tracing::Span;
use tracing::field::Empty;

use super::context::{Ended, SessionEnded, Side, TraceContext, Transport, installed};

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
    /// context in its `_meta` when one is installed ([`Telemetry::adopt`](super::Telemetry::adopt)), else of the
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
        // The attributes of the duration are kept only for a telemetry that records it.
        let kept = installed().is_some();
        let keep = |value: Option<&str>| value.filter(|_| kept).map(str::to_owned);
        Operation {
            span,
            side,
            started: Instant::now(),
            method: keep(Some(request.method)).unwrap_or_default(),
            tool: keep(request.tool),
            prompt: keep(request.prompt),
            protocol_version: keep(request.protocol_version),
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

#[cfg(test)]
mod tests {
    use super::*;

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
