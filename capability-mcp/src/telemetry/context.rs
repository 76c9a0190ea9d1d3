//! The trace context a request carries in `_meta`, the sides and transports, and the
//! [`Telemetry`] a program installs.

use std::fmt;
use std::sync::OnceLock;

use serde_json::{Map, Value};
use tracing::Span;

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
}
