//! One audit record: what happened to one call, and the hash that chains it to the last.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Reason;

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

/// Where a record stands in its call: a call that runs has two records sharing one `call_id`,
/// its intent (written before the tool runs) and its outcome (after); a call that does not run
/// has one record, with no phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The call is about to run: written, and durable, before the tool or the server is invoked.
    Intent,
    /// How the call ended: latency, success or error, the output's digest.
    Outcome,
}

impl Phase {
    /// `intent` or `outcome`, as written.
    pub const fn as_str(self) -> &'static str {
        match self {
            Phase::Intent => "intent",
            Phase::Outcome => "outcome",
        }
    }
}

/// Who called, as the edge that authenticated the caller knows it: an OAuth access token's
/// subject, client and issuer, or the entry of the bearer-token table that matched. Written as
/// `{"client_id": .., "iss": .., "sub": ..}` (absent members left out).
///
/// ```
/// use capability::audit::Principal;
///
/// let alice = Principal::new("alice").client_id("ops-console").issuer("https://auth.example.com");
/// assert_eq!(alice.key(), "https://auth.example.com#alice");
/// assert_eq!(Principal::new("token:9f86d081884c").key(), "token:9f86d081884c");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Principal {
    /// Who: a token's `sub`, or `token:<the first 12 hex digits of the token's SHA-256>` for the
    /// bearer-token table.
    #[serde(rename = "sub")]
    pub subject: String,
    /// The OAuth client the token was issued to (`client_id`), if the token says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The token's issuer (`iss`), if it has one.
    #[serde(rename = "iss", default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

impl Principal {
    /// The principal `subject`, of no client or issuer.
    pub fn new(subject: impl Into<String>) -> Self {
        Principal {
            subject: subject.into(),
            client_id: None,
            issuer: None,
        }
    }

    /// Of the client `client_id`.
    pub fn client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = Some(client_id.into());
        self
    }

    /// Issued by `issuer`.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// One text naming the principal, for keys (sessions, budgets, rate limits): `<iss>#<sub>`,
    /// or the subject alone without an issuer. Two issuers' subjects never share a key.
    pub fn key(&self) -> String {
        match &self.issuer {
            Some(issuer) => format!("{issuer}#{}", self.subject),
            None => self.subject.clone(),
        }
    }
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
    /// The call this record belongs to: an intent and its outcome share it (unique per call).
    /// Not written when absent (trails written before calls had ids).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// `intent` or `outcome` for a call that ran; absent for a call that did not run (one
    /// record) and in older trails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The MCP method of the request (`tools/call`, `resources/read`, `prompts/get`,
    /// `completion/complete`, `sampling/createMessage`, ...); absent for a call of a tool in
    /// process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Who called, when an edge authenticated the caller (an OAuth token, the bearer-token
    /// table); absent otherwise, and in older trails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Principal>,
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
    /// What was called: the tool's name; for other methods, the resource's URI, the prompt's
    /// name, or the server request's method.
    pub tool: String,
    /// The tool's descriptor hash.
    pub descriptor_hash: String,
    /// The version of the policy that decided, if it has one.
    pub policy_version: Option<String>,
    /// What happened.
    pub verdict: Verdict,
    /// Why (denial reasons, degrade reason, audit failure), each typed ([`Reason`]).
    pub reasons: Vec<Reason>,
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
        crate::scratch::with_text(|out| {
            self.write_canonical(out, false);
            capability_rules::sha256_hex(out.as_bytes())
        })
    }

    /// The record as one line of canonical JSON (no newline).
    pub fn to_line(&self) -> String {
        // Not sized from `input_size`: a record read from a file says what it likes.
        let mut out = String::with_capacity(1024);
        self.write_canonical(&mut out, true);
        out
    }

    /// Appends the record's line of canonical JSON ([`to_line`](Self::to_line)) to `out`.
    pub fn write_line(&self, out: &mut String) {
        self.write_canonical(out, true);
    }

    /// Sets the record's `hash` ([`compute_hash`](Self::compute_hash)) and appends its line
    /// ([`to_line`](Self::to_line)) to `out`, writing the record's JSON once for both: the line
    /// is the hashed text with the `hash` member put in its place.
    pub fn seal_line(&mut self, out: &mut String) {
        let start = out.len();
        let at = self.write_parts(out, false);
        self.hash = capability_rules::sha256_hex(&out.as_bytes()[start..]);
        self.insert_hash(out, at);
    }

    /// [`seal_line`](Self::seal_line), computing the SHA-256 of `beside` too, side by side with
    /// the record's own hash (`sha_pair::sha256_pair`: cheaper than one after the other).
    /// Returns `beside`'s hash.
    pub(crate) fn seal_line_beside(&mut self, out: &mut String, beside: &[u8]) -> [u8; 32] {
        let start = out.len();
        let at = self.write_parts(out, false);
        let (own, other) = crate::sha_pair::sha256_pair(&out.as_bytes()[start..], beside);
        self.hash = capability_rules::hex::encode(&own);
        self.insert_hash(out, at);
        other
    }

    /// Puts the `hash` member into the record's JSON in `out` at `at`: after the members whose
    /// keys sort before it (there is always one, `agent`), before the comma of the next.
    fn insert_hash(&self, out: &mut String, at: usize) {
        let mut member = String::with_capacity(self.hash.len() + 10);
        member.push_str(",\"hash\":\"");
        member.push_str(&self.hash);
        member.push('"');
        out.insert_str(at, &member);
    }

    /// The record's canonical JSON (RFC 8785: keys sorted, no white space), with or without
    /// `hash`, written directly: the same bytes as serializing the record to a JSON value and
    /// writing that canonically (a test checks), at a fraction of the cost. The keys are
    /// written in sorted order; fields serde skips when empty are skipped here too.
    fn write_canonical(&self, out: &mut String, with_hash: bool) {
        self.write_parts(out, with_hash);
    }

    /// [`write_canonical`](Self::write_canonical), returning the offset in `out` where the
    /// `hash` member is (or would be) written.
    fn write_parts(&self, out: &mut String, with_hash: bool) -> usize {
        let mut object = Object::new(out);
        object.string("agent", &self.agent);
        if let Some(call_id) = &self.call_id {
            object.string("call_id", call_id);
        }
        object.string("descriptor_hash", &self.descriptor_hash);
        object.opt_string("error", self.error.as_deref());
        let at = object.out.len();
        if with_hash {
            object.string("hash", &self.hash);
        }
        if let Some(incident) = &self.incident_id {
            object.string("incident_id", incident);
        }
        object.value("input", &self.input);
        object.string("input_digest", &self.input_digest);
        object.number("input_size", Some(self.input_size));
        object.number("latency_us", self.latency_us);
        if let Some(method) = &self.method {
            object.string("method", method);
        }
        object.opt_string("output_digest", self.output_digest.as_deref());
        object.number("output_size", self.output_size);
        if let Some(phase) = self.phase {
            object.string("phase", phase.as_str());
        }
        object.opt_string("policy_version", self.policy_version.as_deref());
        object.string("prev", &self.prev);
        if let Some(principal) = &self.principal {
            object.principal("principal", principal);
        }
        object.opt_string("provider", self.provider.as_deref());
        object.reasons("reasons", &self.reasons);
        object.string("role", &self.role);
        object.number("seq", Some(self.seq));
        object.string("session", &self.session);
        object.opt_string("step", self.step.as_deref());
        object.raw(
            "success",
            match self.success {
                None => "null",
                Some(true) => "true",
                Some(false) => "false",
            },
        );
        object.string("time", &self.time);
        object.string("tool", &self.tool);
        object.raw(
            "verdict",
            match self.verdict {
                Verdict::Allowed => "\"allowed\"",
                Verdict::Denied => "\"denied\"",
                Verdict::Degraded => "\"degraded\"",
                Verdict::AuditFailed => "\"audit_failed\"",
            },
        );
        if !self.writer.is_empty() {
            object.string("writer", &self.writer);
        }
        object.finish();
        at
    }
}

/// Writes `value` in decimal (what `write!` does, without the formatting machinery).
fn write_u64(out: &mut String, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    // ASCII digits only.
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
}

/// Writes a canonical JSON object member by member; the caller gives the keys in sorted order.
struct Object<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> Object<'a> {
    fn new(out: &'a mut String) -> Self {
        out.push('{');
        Object { out, first: true }
    }

    /// Writes `key` and its colon. The keys are this file's own constants, lowercase names
    /// with nothing to escape (a debug build checks), so they are written as they are.
    fn key(&mut self, key: &'static str) {
        debug_assert!(
            key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "a record key needs no escape: {key}"
        );
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        self.out.push('"');
        self.out.push_str(key);
        self.out.push_str("\":");
    }

    fn raw(&mut self, key: &'static str, json: &str) {
        self.key(key);
        self.out.push_str(json);
    }

    fn string(&mut self, key: &'static str, value: &str) {
        self.key(key);
        capability_rules::write_json_string(self.out, value);
    }

    fn opt_string(&mut self, key: &'static str, value: Option<&str>) {
        match value {
            Some(value) => self.string(key, value),
            None => self.raw(key, "null"),
        }
    }

    fn number(&mut self, key: &'static str, value: Option<u64>) {
        self.key(key);
        match value {
            Some(value) => write_u64(self.out, value),
            None => self.out.push_str("null"),
        }
    }

    fn reasons(&mut self, key: &'static str, reasons: &[Reason]) {
        self.key(key);
        self.out.push('[');
        for (i, reason) in reasons.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            match reason.as_json() {
                Value::String(text) => capability_rules::write_json_string(self.out, text),
                other => capability_core::json::write_canonical_json(self.out, other),
            }
        }
        self.out.push(']');
    }

    fn principal(&mut self, key: &'static str, principal: &Principal) {
        self.key(key);
        let mut inner = Object::new(self.out);
        if let Some(client_id) = &principal.client_id {
            inner.string("client_id", client_id);
        }
        if let Some(issuer) = &principal.issuer {
            inner.string("iss", issuer);
        }
        inner.string("sub", &principal.subject);
        inner.finish();
    }

    fn value(&mut self, key: &'static str, value: &Value) {
        self.key(key);
        capability_core::json::write_canonical_json(self.out, value);
    }

    fn finish(self) {
        self.out.push('}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The reference: the record as a JSON value, written canonically.
    #[test]
    fn a_sealed_line_is_the_line_of_the_record_with_its_hash() {
        for i in 0..40 {
            let mut r = record(i);
            r.hash = "stale".to_owned();
            let mut line = String::from("prefix ");
            r.seal_line(&mut line);
            assert_eq!(r.hash, r.compute_hash(), "record {i}");
            assert_eq!(line, format!("prefix {}", r.to_line()), "record {i}");
        }
    }

    fn written(record: &AuditRecord, with_hash: bool) -> String {
        let mut out = String::new();
        record.write_canonical(&mut out, with_hash);
        out
    }

    fn via_value(record: &AuditRecord, with_hash: bool) -> String {
        let mut value = serde_json::to_value(record).expect("a record serializes");
        if !with_hash {
            value.as_object_mut().expect("an object").remove("hash");
        }
        capability_core::json::to_canonical_json(&value)
    }

    fn record(i: u64) -> AuditRecord {
        let odd = i % 2 == 1;
        AuditRecord {
            writer: if odd {
                format!("host-{i}")
            } else {
                String::new()
            },
            seq: i,
            time: "2026-11-30T12:00:00.000Z".to_owned(),
            agent: "wätcher \u{1F600} \"quoted\" \\ back".to_owned(),
            call_id: odd.then(|| format!("call-{i}")),
            phase: [None, Some(Phase::Intent), Some(Phase::Outcome)][(i % 3) as usize],
            method: (i % 4 == 1).then(|| "resources/read".to_owned()),
            principal: match i % 3 {
                0 => None,
                1 => Some(Principal::new("alice\u{2028}\"")),
                _ => Some(
                    Principal::new("svc")
                        .client_id("client-\u{7f}")
                        .issuer("https://auth.example.com"),
                ),
            },
            role: "monitor\u{0}\u{1f}\u{7f}".to_owned(),
            session: "s\n\t\r\u{8}\u{c}".to_owned(),
            step: odd.then(|| "triage".to_owned()),
            incident_id: odd.then(|| "INC-2026-0042".to_owned()),
            provider: (!odd).then(|| "k8s".to_owned()),
            tool: "list_pods".to_owned(),
            descriptor_hash: "ab".repeat(32),
            policy_version: odd.then(|| "v1".to_owned()),
            verdict: [
                Verdict::Allowed,
                Verdict::Denied,
                Verdict::Degraded,
                Verdict::AuditFailed,
            ][(i % 4) as usize],
            reasons: if odd {
                vec![
                    Reason::text("a \u{2028} b"),
                    Reason::text(""),
                    Reason::deny(&capability_core::authz::DenyReason::MissingScopes {
                        scopes: vec!["k8s:write".to_owned()],
                    }),
                    Reason::audit_failed("disk \u{1b} full"),
                ]
            } else {
                Vec::new()
            },
            input: json!({
                "é": [1, -2, 1.5, 1e21, 0.1, u64::MAX, null, true],
                "a": {"z": "\u{10FFFF}", "b": {}},
                "\u{e000}": "private", "\u{1F600}": "astral",
            }),
            input_digest: "hmac-sha256:00".to_owned(),
            input_size: 12 * i,
            output_digest: odd.then(|| "hmac-sha256:11".to_owned()),
            output_size: odd.then_some(i),
            latency_us: (!odd).then_some(u64::MAX),
            success: [None, Some(true), Some(false)][(i % 3) as usize],
            error: (i % 3 == 2).then(|| "boom \u{1b}[31m".to_owned()),
            prev: GENESIS.to_owned(),
            hash: "cd".repeat(32),
        }
    }

    #[test]
    fn the_direct_writer_gives_the_same_bytes_as_the_value_path() {
        for i in 0..24 {
            let r = record(i);
            assert_eq!(written(&r, true), via_value(&r, true), "record {i}");
            assert_eq!(written(&r, false), via_value(&r, false), "record {i}");
        }
        // Sizes and counters at their limits (a record read from a file says what it likes).
        let mut r = record(1);
        (r.seq, r.input_size, r.output_size, r.latency_us) =
            (u64::MAX, u64::MAX, Some(u64::MAX), Some(u64::MAX));
        assert_eq!(written(&r, true), via_value(&r, true));
    }
}
