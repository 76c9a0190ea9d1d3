//! What both backends share: how an [`AuditRecord`] maps to the columns of `mcp_audit_log`, the
//! percentile rule of `mcp_daily_stats`, and the writer-id generator.
//!
//! The column values of one record, in the order of [`AUDIT_COLUMNS`]:
//!
//! | column | record field | value |
//! |---|---|---|
//! | `writer_id`, `seq` | `writer`, `seq` | as is |
//! | `time` | `time` | RFC 3339 text (SQLite); `timestamptz` (PostgreSQL) |
//! | `agent_name`, `agent_role`, `session_id` | `agent`, `role`, `session` | as is |
//! | `incident_id`, `flywheel_node` | `incident_id`, `step` | nullable |
//! | `provider`, `tool`, `descriptor_hash`, `policy_version` | same names | `provider`, `policy_version` nullable |
//! | `verdict` | `verdict` | [`verdict_name`]: `allowed`, `denied`, `degraded`, `audit_failed` |
//! | `reasons` | `reasons` | [`reasons_json`]: a JSON array of reasons (objects; strings in older records) |
//! | `input` | `input` | [`input_json`]: canonical JSON of the redacted input |
//! | `input_digest`, `input_size`, `output_digest`, `output_size`, `latency_us` | same names | sizes and latency as integers |
//! | `success` | `success` | nullable boolean (SQLite: 1, 0) |
//! | `error` | `error` | nullable |
//! | `prev_hash`, `hash` | `prev`, `hash` | as is |
//! | `call_id`, `phase`, `method` | same names | nullable; `phase` is `intent` or `outcome` |
//! | `principal`, `client_id`, `issuer` | `principal`'s `sub`, `client_id`, `iss` | nullable; `principal` NULL when no edge authenticated the caller |
//!
//! Read back, a row gives the same record, so its [`compute_hash`](AuditRecord::compute_hash)
//! is the stored `hash`.
//!
//! **Percentiles** of `mcp_daily_stats` are nearest-rank over the latencies of the calls that
//! ran (`latency_us` not null): the p-th percentile of n latencies sorted ascending is the one
//! at 1-based rank `ceil(p * n / 100)`, computed in integers as [`nearest_rank`], each latency
//! first rounded down to three significant digits ([`latency_bucket`]): the databases keep a
//! count per rounded latency, not every record's.

use capability_audit::{AuditRecord, Phase, Reason, Verdict};
use serde_json::Value;

/// The columns of `mcp_audit_log`, in the order the backends bind them.
pub const AUDIT_COLUMNS: [&str; 30] = [
    "writer_id",
    "seq",
    "time",
    "agent_name",
    "agent_role",
    "session_id",
    "incident_id",
    "flywheel_node",
    "provider",
    "tool",
    "descriptor_hash",
    "policy_version",
    "verdict",
    "reasons",
    "input",
    "input_digest",
    "input_size",
    "output_digest",
    "output_size",
    "latency_us",
    "success",
    "error",
    "prev_hash",
    "hash",
    "call_id",
    "phase",
    "method",
    "principal",
    "client_id",
    "issuer",
];

/// The `verdict` column's text.
pub fn verdict_name(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Allowed => "allowed",
        Verdict::Denied => "denied",
        Verdict::Degraded => "degraded",
        Verdict::AuditFailed => "audit_failed",
    }
}

/// The verdict of a `verdict` column's text; `None` for anything else.
pub fn parse_verdict(text: &str) -> Option<Verdict> {
    match text {
        "allowed" => Some(Verdict::Allowed),
        "denied" => Some(Verdict::Denied),
        "degraded" => Some(Verdict::Degraded),
        "audit_failed" => Some(Verdict::AuditFailed),
        _ => None,
    }
}

/// The `reasons` column: a JSON array of the reasons, canonical.
pub fn reasons_json(reasons: &[Reason]) -> String {
    let value = serde_json::to_value(reasons).unwrap_or_else(|_| Value::Array(Vec::new()));
    capability_core::json::to_canonical_json(&value)
}

/// The reasons of a `reasons` column.
pub fn parse_reasons(text: &str) -> Result<Vec<Reason>, String> {
    serde_json::from_str(text)
        .map_err(|e| format!("column reasons is not a JSON array of reasons: {e}"))
}

/// The `principal`, `client_id` and `issuer` columns of a record.
pub fn principal_columns(
    principal: Option<&capability_audit::Principal>,
) -> (Option<&str>, Option<&str>, Option<&str>) {
    match principal {
        None => (None, None, None),
        Some(p) => (
            Some(p.subject.as_str()),
            p.client_id.as_deref(),
            p.issuer.as_deref(),
        ),
    }
}

/// The principal of the `principal`, `client_id` and `issuer` columns; an error when a client
/// or issuer is there without a principal.
pub fn parse_principal(
    subject: Option<String>,
    client_id: Option<String>,
    issuer: Option<String>,
) -> Result<Option<capability_audit::Principal>, String> {
    match subject {
        Some(subject) => Ok(Some(capability_audit::Principal {
            subject,
            client_id,
            issuer,
        })),
        None if client_id.is_none() && issuer.is_none() => Ok(None),
        None => Err("columns client_id or issuer hold a value, but principal is NULL".to_owned()),
    }
}

/// The `phase` column's text.
pub fn phase_name(phase: Option<Phase>) -> Option<&'static str> {
    phase.map(Phase::as_str)
}

/// The phase of a `phase` column; an error for anything but `intent`, `outcome` or NULL.
pub fn parse_phase(text: Option<&str>) -> Result<Option<Phase>, String> {
    match text {
        None => Ok(None),
        Some("intent") => Ok(Some(Phase::Intent)),
        Some("outcome") => Ok(Some(Phase::Outcome)),
        Some(other) => Err(format!(
            "column phase holds `{other}`, not intent or outcome"
        )),
    }
}

/// The `input` column: the canonical JSON of the redacted input.
pub fn input_json(input: &Value) -> String {
    capability_core::json::to_canonical_json(input)
}

/// The input of an `input` column.
pub fn parse_input(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("column input is not JSON: {e}"))
}

/// The 1-based rank of the `percent`-th percentile among `n` sorted values, nearest-rank:
/// `ceil(percent * n / 100)`, at least 1.
pub const fn nearest_rank(percent: u64, n: u64) -> u64 {
    let rank = (percent * n).div_ceil(100);
    if rank == 0 { 1 } else { rank }
}

/// A latency as `mcp_daily_stats` keeps it: rounded down to three significant digits (under
/// 1,000 exact: 999 stays 999, 1234 is 1230, 98765 is 98700), so at most 1% below it. The
/// databases compute the same in SQL (`capability_latency_bucket` in PostgreSQL).
pub const fn latency_bucket(latency_us: u64) -> u64 {
    let mut step = 1;
    let mut rest = latency_us;
    while rest >= 1000 {
        rest /= 10;
        step *= 10;
    }
    rest * step
}

/// A writer id unique to this process: `hostname-pid-random` (8 random hex digits), for
/// [`SinkOptions::writer`](crate::SinkOptions). Two processes, or two sinks of one process,
/// get different ids.
pub fn new_writer_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let mut bytes = [0u8; 4];
    if getrandom::fill(&mut bytes).is_err() {
        // No randomness: a per-process counter and the time still separate the sinks.
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        bytes = (nanos ^ NEXT.fetch_add(1, Ordering::Relaxed).rotate_left(24)).to_be_bytes();
    }
    format!(
        "{host}-{}-{}",
        std::process::id(),
        capability_rules::hex::encode(&bytes)
    )
}

/// Whether a record's fields fit the schema: `incident_id` at most 64 characters.
pub fn check_record(record: &AuditRecord) -> Result<(), String> {
    match &record.incident_id {
        Some(id) if id.chars().count() > 64 => Err(format!(
            "incident_id is {} characters long; at most 64 fit `incident_id VARCHAR(64)`",
            id.chars().count()
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_keep_three_significant_digits() {
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(999), 999);
        assert_eq!(latency_bucket(1000), 1000);
        assert_eq!(latency_bucket(1239), 1230);
        assert_eq!(latency_bucket(98_765), 98_700);
        assert_eq!(latency_bucket(i64::MAX as u64), 9_220_000_000_000_000_000);
        assert_eq!(latency_bucket(u64::MAX), 18_400_000_000_000_000_000);
    }

    #[test]
    fn nearest_rank_is_the_ceiling() {
        assert_eq!(nearest_rank(50, 1), 1);
        assert_eq!(nearest_rank(50, 2), 1);
        assert_eq!(nearest_rank(50, 3), 2);
        assert_eq!(nearest_rank(95, 20), 19);
        assert_eq!(nearest_rank(95, 21), 20);
        assert_eq!(nearest_rank(95, 100), 95);
        assert_eq!(nearest_rank(50, 0), 1);
    }

    #[test]
    fn verdicts_round_trip() {
        for v in [
            Verdict::Allowed,
            Verdict::Denied,
            Verdict::Degraded,
            Verdict::AuditFailed,
        ] {
            assert_eq!(parse_verdict(verdict_name(v)), Some(v));
        }
        assert_eq!(parse_verdict("ALLOWED"), None);
    }

    #[test]
    fn writer_ids_differ() {
        let (a, b) = (new_writer_id(), new_writer_id());
        assert_ne!(a, b);
        assert!(a.contains(&format!("-{}-", std::process::id())), "{a}");
    }
}
