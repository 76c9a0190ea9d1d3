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

mod context;
mod operation;

pub use context::{
    AlreadyInstalled, BAGGAGE, Ended, SessionEnded, Side, TRACEPARENT, TRACESTATE, Telemetry,
    TraceContext, Transport, install, installed,
};
pub use operation::{Ending, Operation, Request, Session};
