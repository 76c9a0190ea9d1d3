//! Every record is also a `tracing` event.

use crate::*;

pub(crate) fn emit_trace(record: &AuditRecord) {
    tracing::event!(
        target: "capability::audit",
        tracing::Level::INFO,
        seq = record.seq,
        agent = %record.agent,
        role = %record.role,
        session = %record.session,
        step = record.step.as_deref(),
        provider = record.provider.as_deref(),
        tool = %record.tool,
        descriptor_hash = %record.descriptor_hash,
        policy_version = record.policy_version.as_deref(),
        verdict = ?record.verdict,
        reasons = ?record.reasons,
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
