//! One audit record: what happened to one call, and the hash that chains it to the last.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `prev` of the first record of a trail.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What happened to a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Authorized, and run.
    Allowed,
    /// Not authorized: it did not run.
    Denied,
    /// Not run: the session is over its budget or degraded; fall back to the non-agentic path.
    Degraded,
    /// Authorized, but not run: the audit record could not be written (fail-closed).
    AuditFailed,
}

/// One line of the audit trail.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// The writer whose chain this record is in (a process, a replica): each writer numbers and
    /// chains its own records. Empty for a single-writer trail (a JSON Lines file), and then
    /// not written, so trails written before writers existed verify unchanged.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub writer: String,
    /// Position in the writer's chain, from 1.
    pub seq: u64,
    /// When the call was decided, UTC, RFC 3339 with milliseconds.
    pub time: String,
    /// The agent.
    pub agent: String,
    /// The agent's role.
    pub role: String,
    /// The session.
    pub session: String,
    /// The workflow step (the flywheel node), if the caller names one.
    pub step: Option<String>,
    /// The incident the call is part of (`INC-2026-0042`), if the caller names one; at most 64
    /// characters. Not written when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident_id: Option<String>,
    /// The tool's provider.
    pub provider: Option<String>,
    /// The tool.
    pub tool: String,
    /// The tool's descriptor hash.
    pub descriptor_hash: String,
    /// The version of the policy that decided, if it has one.
    pub policy_version: Option<String>,
    /// What happened.
    pub verdict: Verdict,
    /// Why (denial reasons, degrade reason, audit failure), as text.
    pub reasons: Vec<String>,
    /// The input, with the tool's sensitive fields replaced by their keyed digest
    /// (`hmac-sha256:<hex>`, see [`redact_sensitive`](crate::redact_sensitive)).
    pub input: Value,
    /// The keyed digest of the input's canonical JSON before redaction: `hmac-sha256:<hex>`,
    /// HMAC-SHA-256 under the sink's [digest key](crate::AuditSink::digest_key). The same input
    /// under the same key gives the same digest; without the key it confirms no guess.
    pub input_digest: String,
    /// Size of the input's canonical JSON, in bytes.
    pub input_size: u64,
    /// The keyed digest of the output's canonical JSON (as for `input_digest`), when the tool
    /// ran and succeeded.
    pub output_digest: Option<String>,
    /// Size of the output's canonical JSON, in bytes.
    pub output_size: Option<u64>,
    /// How long the tool ran, in microseconds (none when it did not run).
    pub latency_us: Option<u64>,
    /// Whether the tool succeeded (none when it did not run).
    pub success: Option<bool>,
    /// The tool's error, when it failed.
    pub error: Option<String>,
    /// The `hash` of the previous record ([`GENESIS`] for the first).
    pub prev: String,
    /// SHA-256 of this record's canonical JSON without `hash`.
    pub hash: String,
}

impl AuditRecord {
    /// The hash this record should carry: SHA-256 of its canonical JSON without `hash`.
    pub fn compute_hash(&self) -> String {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(object) = value.as_object_mut() {
            object.remove("hash");
        }
        capability_rules::sha256_hex(capability_core::json::to_canonical_json(&value).as_bytes())
    }

    /// The record as one line of canonical JSON (no newline).
    pub fn to_line(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        capability_core::json::to_canonical_json(&value)
    }

    /// Sets `hash` and returns the line, converting the record to JSON once.
    pub(crate) fn seal(&mut self) -> String {
        let mut value = serde_json::to_value(&*self).unwrap_or(Value::Null);
        if let Some(object) = value.as_object_mut() {
            object.remove("hash");
        }
        self.hash = capability_rules::sha256_hex(
            capability_core::json::to_canonical_json(&value).as_bytes(),
        );
        if let Some(object) = value.as_object_mut() {
            object.insert("hash".to_owned(), Value::String(self.hash.clone()));
        }
        capability_core::json::to_canonical_json(&value)
    }
}
