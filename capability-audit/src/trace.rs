//! Observability in the ecosystem's terms: each audited call is a `tracing` span with the
//! OpenTelemetry GenAI attributes, and every record is also a `tracing` event.
//!
//! The span's static name is `execute_tool`; its `otel.name` field, which
//! `tracing-opentelemetry` takes as the span name, is `execute_tool {tool}`. Its fields:
//!
//! - `gen_ai.operation.name = "execute_tool"`, `gen_ai.tool.name`, `gen_ai.tool.call.id` (an id
//!   made for the call, unique in the process: the `call_id` of its records), and on failure
//!   `error.type`: `tool_error`,
//!   `denied`, `degraded`, `audit_failed`, `panic` or `cancelled` (with
//!   `otel.status_code = "ERROR"`);
//! - ours, under `capability.`: `capability.method` (the MCP method, for calls that came over
//!   MCP), `capability.agent`, `capability.role`, `capability.session`,
//!   `capability.step`, `capability.incident_id`, `capability.provider`,
//!   `capability.descriptor_hash`, `capability.policy_version`, `capability.verdict`
//!   (`allowed`, `denied`, `degraded`, `audit_failed`) and `capability.audit.seq` (the record's
//!   place in its chain, once written).
//!
//! The tool's own code runs inside the span, so its events and spans nest under it.
//!
//! When the call is made inside an `mcp.server` span (an MCP front's span of the client's
//! request), that span gets the call's `capability.role`, `capability.principal`,
//! `capability.policy_version`, `capability.verdict` and `capability.audit.seq` too. No other
//! span is touched (not the span of another call the call is made in).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::Span;
use tracing::field::Empty;

use crate::*;

/// What a call's span starts with.
pub(crate) struct CallFields<'a> {
    pub(crate) tool: &'a str,
    pub(crate) method: Option<&'a str>,
    pub(crate) call_id: &'a str,
    pub(crate) provider: Option<&'a str>,
    pub(crate) descriptor_hash: &'a str,
    pub(crate) agent: &'a str,
    pub(crate) role: &'a str,
    pub(crate) session: &'a str,
    /// The principal's key ([`Principal::key`](crate::Principal::key)), if authenticated.
    pub(crate) principal: Option<String>,
    pub(crate) step: Option<&'a str>,
    pub(crate) incident: Option<&'a str>,
    pub(crate) policy_version: Option<&'a str>,
}

/// The name of the span an MCP front makes for a client's request.
const MCP_SERVER_SPAN: &str = "mcp.server";

/// The span of one audited call, and the span it was made in.
pub(crate) struct CallSpan {
    span: Span,
    /// The `mcp.server` span the call began in (or none): it gets the call's verdict and
    /// record too.
    outer: Span,
}

impl std::ops::Deref for CallSpan {
    type Target = Span;

    fn deref(&self) -> &Span {
        &self.span
    }
}

impl CallSpan {
    /// The record's place in its chain, once written.
    pub(crate) fn record_seq(&self, seq: u64) {
        self.span.record("capability.audit.seq", seq);
        self.outer.record("capability.audit.seq", seq);
    }
}

/// The span of one audited call (disabled, and free, when no subscriber wants it).
pub(crate) fn call_span(call: &CallFields<'_>) -> CallSpan {
    let current = Span::current();
    let outer = if current
        .metadata()
        .is_some_and(|m| m.name() == MCP_SERVER_SPAN)
    {
        current
    } else {
        Span::none()
    };
    if !outer.is_disabled() {
        outer.record("capability.role", call.role);
        if let Some(principal) = &call.principal {
            outer.record("capability.principal", principal.as_str());
        }
        if let Some(version) = call.policy_version {
            outer.record("capability.policy_version", version);
        }
    }
    let span = tracing::info_span!(
        target: "capability::audit",
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", call.tool),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.tool,
        gen_ai.tool.call.id = %call.call_id,
        capability.method = call.method,
        error.type = Empty,
        capability.verdict = Empty,
        capability.agent = %call.agent,
        capability.role = %call.role,
        capability.session = %call.session,
        capability.principal = call.principal.as_deref(),
        capability.step = call.step,
        capability.incident_id = call.incident,
        capability.provider = call.provider,
        capability.descriptor_hash = %call.descriptor_hash,
        capability.policy_version = call.policy_version,
        capability.audit.seq = Empty,
    );
    CallSpan { span, outer }
}

/// Records how the call ended: its verdict and, on failure, the kind of error.
pub(crate) fn end_span(span: &CallSpan, verdict: Verdict, error_type: Option<&'static str>) {
    let verdict = match verdict {
        Verdict::Allowed => "allowed",
        Verdict::Denied => "denied",
        Verdict::Degraded => "degraded",
        Verdict::AuditFailed => "audit_failed",
    };
    span.record("capability.verdict", verdict);
    span.outer.record("capability.verdict", verdict);
    if let Some(error_type) = error_type {
        span.record("error.type", error_type);
        span.record("otel.status_code", "ERROR");
    }
}

/// A call id unique in this process and unlikely to repeat across processes: a random prefix
/// drawn once, and a counter.
pub(crate) fn new_call_id() -> String {
    static PREFIX: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let prefix = *PREFIX.get_or_init(|| {
        let mut bytes = [0u8; 8];
        match getrandom::fill(&mut bytes) {
            Ok(()) => u64::from_le_bytes(bytes),
            // No randomness: the process id and the clock still tell processes apart.
            Err(_) => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                nanos ^ (u64::from(std::process::id()) << 32)
            }
        }
    });
    format!(
        "call_{prefix:016x}{:08x}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

pub(crate) fn emit_trace(record: &AuditRecord) {
    tracing::event!(
        target: "capability::audit",
        tracing::Level::INFO,
        seq = record.seq,
        agent = %record.agent,
        role = %record.role,
        session = %record.session,
        principal = record.principal.as_ref().map(crate::Principal::key).as_deref(),
        step = record.step.as_deref(),
        incident_id = record.incident_id.as_deref(),
        provider = record.provider.as_deref(),
        tool = %record.tool,
        descriptor_hash = %record.descriptor_hash,
        policy_version = record.policy_version.as_deref(),
        call_id = record.call_id.as_deref(),
        phase = record.phase.map(Phase::as_str),
        method = record.method.as_deref(),
        verdict = ?record.verdict,
        reasons = %Reasons(&record.reasons),
        input_digest = %record.input_digest,
        input_size = record.input_size,
        output_digest = record.output_digest.as_deref(),
        output_size = record.output_size,
        latency_us = record.latency_us,
        success = record.success,
        error = record.error.as_deref(),
        "tool call"
    );
}

/// The reasons' messages, `; ` between them.
struct Reasons<'a>(&'a [Reason]);

impl std::fmt::Display for Reasons<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, reason) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(reason.message())?;
        }
        Ok(())
    }
}
