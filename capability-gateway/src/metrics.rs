//! The engine's counters in Prometheus' text exposition format (version 0.0.4), which
//! `capability gateway --metrics <address>` and `capability proxy --metrics` serve at
//! `/metrics` (the endpoint is the command's; [`Builder::metrics`](crate::Builder::metrics)
//! gives the engine the counters).
//!
//! Every figure but one comes from the audit records as they are written (a [`MeteredSink`]
//! around the trail's sink), so the metrics count exactly what the trail holds:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `capability_calls_total` | counter | `server`, `tool`, `role`, `verdict` (`allowed`, `denied`, `held`: a call held for a human's approval, with a proposal, `degraded`, `audit_failed`) |
//! | `capability_denials_total` | counter | `server`, `tool`, `role`, `reason` (each reason code of a refusal; a held call is no denial) |
//! | `capability_call_errors_total` | counter | `server`, `tool`, `role` (calls that ran and failed) |
//! | `capability_call_duration_seconds` | histogram | `server`, `tool` (calls that ran) |
//! | `capability_sessions_total` | counter | (sessions seen) |
//! | `capability_reloads_total` | counter | `outcome` (`done`, `refused`) |
//! | `capability_audit_write_errors_total` | counter | (records the trail refused) |
//! | `capability_proposals_pending` | gauge | (proposals waiting for an approval of this gateway, read from its store at each scrape; absent without `[approvals]`) |
//!
//! A call is counted once, as in `mcp_daily_stats` (by its intent when it ran, by its one
//! record when it did not). Label values are what the records hold (a tool name a client made
//! up included), so each family keeps at most [`MAX_SERIES`] label sets: later ones are
//! counted under the value `(other)`, and a client cannot grow the gateway's memory with names.
//! The approvals page's notices (`approvals/...`) are no calls, and are not counted.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use capability::audit::{AuditError, AuditRecord, AuditSink, DigestKey, Phase, Verdict};

/// The label sets each family keeps; more are counted under `(other)`.
pub const MAX_SERIES: usize = 10_000;

/// The most sessions remembered to count them once; later ones are not counted.
const MAX_SESSIONS: usize = 1_000_000;

/// The upper bounds of `capability_call_duration_seconds`' buckets.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Where the gauge of pending proposals is read at each scrape (the engine's store).
type Pending = Box<dyn Fn() -> Option<u64> + Send + Sync>;

/// The counters, shared by the sink that feeds them and the endpoint that serves them.
#[derive(Default)]
pub struct Metrics {
    state: Mutex<State>,
    pending: Mutex<Option<Pending>>,
}

#[derive(Default)]
struct State {
    calls: Family<u64>,
    denials: Family<u64>,
    errors: Family<u64>,
    durations: Family<Histogram>,
    sessions: HashSet<String>,
    sessions_total: u64,
    reloads: Family<u64>,
    audit_errors: u64,
}

/// One metric's series, by label values, at most [`MAX_SERIES`].
struct Family<T> {
    series: BTreeMap<Vec<String>, T>,
}

impl<T> Default for Family<T> {
    fn default() -> Self {
        Family {
            series: BTreeMap::new(),
        }
    }
}

impl<T: Default> Family<T> {
    fn get(&mut self, labels: Vec<String>) -> &mut T {
        let labels = if self.series.len() >= MAX_SERIES && !self.series.contains_key(&labels) {
            labels.iter().map(|_| "(other)".to_owned()).collect()
        } else {
            labels
        };
        self.series.entry(labels).or_default()
    }
}

#[derive(Default, Clone)]
struct Histogram {
    /// Per bucket of [`BUCKETS`], the observations at or under its bound (not cumulative).
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Metrics {
    /// What `record`, just written to the trail, adds.
    pub fn record(&self, record: &AuditRecord) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let server = record.provider.clone().unwrap_or_default();
        let codes: Vec<&str> = record.reasons.iter().map(|r| r.code()).collect();
        if record
            .method
            .as_deref()
            .is_some_and(|m| m.starts_with("approvals/"))
        {
            return;
        }
        if let Some(outcome) = codes.iter().find_map(|c| match *c {
            "reloaded" => Some("done"),
            "reload_refused" => Some("refused"),
            _ => None,
        }) {
            *state.reloads.get(vec![outcome.to_owned()]) += 1;
            return;
        }
        if state.sessions.len() < MAX_SESSIONS && state.sessions.insert(record.session.clone()) {
            state.sessions_total += 1;
        }
        let call = record.phase != Some(Phase::Outcome);
        let labels = vec![server.clone(), record.tool.clone(), record.role.clone()];
        // Held back for a human's approval (a proposal made): its own verdict, no denial.
        let held = record.verdict == Verdict::Denied && codes.contains(&"approval_required");
        if call {
            let mut with_verdict = labels.clone();
            with_verdict.push(
                if held {
                    "held"
                } else {
                    verdict(record.verdict)
                }
                .to_owned(),
            );
            *state.calls.get(with_verdict) += 1;
        }
        if record.verdict == Verdict::Denied && !held {
            for code in &codes {
                let mut with_reason = labels.clone();
                with_reason.push((*code).to_owned());
                *state.denials.get(with_reason) += 1;
            }
        }
        if record.success == Some(false) {
            *state.errors.get(labels) += 1;
        }
        if let Some(latency) = record.latency_us {
            let seconds = latency as f64 / 1e6;
            let histogram = state.durations.get(vec![server, record.tool.clone()]);
            if let Some(i) = BUCKETS.iter().position(|bound| seconds <= *bound) {
                histogram.counts[i] += 1;
            }
            histogram.count += 1;
            histogram.sum += seconds;
        }
    }

    /// Reads the gauge `capability_proposals_pending` from `pending` at each scrape (`None`
    /// from it leaves the gauge out).
    pub fn count_pending(&self, pending: impl Fn() -> Option<u64> + Send + Sync + 'static) {
        *self.pending.lock().unwrap_or_else(PoisonError::into_inner) = Some(Box::new(pending));
    }

    /// A record the trail refused.
    pub fn audit_error(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .audit_errors += 1;
    }

    /// The text exposition (`text/plain; version=0.0.4`).
    pub fn render(&self) -> String {
        // Read before the counters are locked: the store may take a moment.
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(|pending| pending());
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::new();
        counters(
            &mut out,
            "capability_calls_total",
            "Tool calls (and other requests) decided, by server, tool, role and verdict.",
            &["server", "tool", "role", "verdict"],
            &state.calls,
        );
        counters(
            &mut out,
            "capability_denials_total",
            "Refused calls, by server, tool, role and each reason code of the refusal.",
            &["server", "tool", "role", "reason"],
            &state.denials,
        );
        counters(
            &mut out,
            "capability_call_errors_total",
            "Calls that ran and failed, by server, tool and role.",
            &["server", "tool", "role"],
            &state.errors,
        );
        let _ = writeln!(
            out,
            "# HELP capability_call_duration_seconds How long the calls that ran took, by \
             server and tool.\n# TYPE capability_call_duration_seconds histogram"
        );
        for (labels, histogram) in &state.durations.series {
            let base = label_text(&["server", "tool"], labels);
            let mut cumulative = 0;
            for (bound, count) in BUCKETS.iter().zip(histogram.counts) {
                cumulative += count;
                let _ = writeln!(
                    out,
                    "capability_call_duration_seconds_bucket{{{base},le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "capability_call_duration_seconds_bucket{{{base},le=\"+Inf\"}} {}\n\
                 capability_call_duration_seconds_sum{{{base}}} {}\n\
                 capability_call_duration_seconds_count{{{base}}} {}",
                histogram.count, histogram.sum, histogram.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP capability_sessions_total Sessions seen (each counted once).\n\
             # TYPE capability_sessions_total counter\ncapability_sessions_total {}",
            state.sessions_total
        );
        counters(
            &mut out,
            "capability_reloads_total",
            "Reloads of the policy, servers and lockfiles, by outcome.",
            &["outcome"],
            &state.reloads,
        );
        let _ = writeln!(
            out,
            "# HELP capability_audit_write_errors_total Records the audit trail refused.\n\
             # TYPE capability_audit_write_errors_total counter\n\
             capability_audit_write_errors_total {}",
            state.audit_errors
        );
        if let Some(pending) = pending {
            let _ = writeln!(
                out,
                "# HELP capability_proposals_pending Proposals waiting for an approval of this \
                 gateway.\n# TYPE capability_proposals_pending gauge\n\
                 capability_proposals_pending {pending}"
            );
        }
        out
    }
}

fn verdict(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Allowed => "allowed",
        Verdict::Denied => "denied",
        Verdict::Degraded => "degraded",
        Verdict::AuditFailed => "audit_failed",
    }
}

fn counters(out: &mut String, name: &str, help: &str, names: &[&str], family: &Family<u64>) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (labels, value) in &family.series {
        let _ = writeln!(out, "{name}{{{}}} {value}", label_text(names, labels));
    }
}

/// `name="value",...`, each value escaped as the format asks (`\\`, `\"`, `\n`).
fn label_text(names: &[&str], values: &[String]) -> String {
    let mut text = String::new();
    for (i, (name, value)) in names.iter().zip(values).enumerate() {
        if i > 0 {
            text.push(',');
        }
        let _ = write!(text, "{name}=\"");
        for c in value.chars() {
            match c {
                '\\' => text.push_str("\\\\"),
                '"' => text.push_str("\\\""),
                '\n' => text.push_str("\\n"),
                c => text.push(c),
            }
        }
        text.push('"');
    }
    text
}

/// The trail's sink, counting what it writes into [`Metrics`].
pub struct MeteredSink {
    inner: Arc<dyn AuditSink>,
    metrics: Arc<Metrics>,
}

impl MeteredSink {
    /// `inner`, counted into `metrics`.
    pub fn new(inner: Arc<dyn AuditSink>, metrics: Arc<Metrics>) -> MeteredSink {
        MeteredSink { inner, metrics }
    }
}

impl AuditSink for MeteredSink {
    fn append(&self, record: AuditRecord) -> Result<AuditRecord, AuditError> {
        match self.inner.append(record) {
            Ok(written) => {
                self.metrics.record(&written);
                Ok(written)
            }
            Err(error) => {
                self.metrics.audit_error();
                Err(error)
            }
        }
    }

    fn append_in_place(&self, record: &mut AuditRecord) -> Result<(), AuditError> {
        match self.inner.append_in_place(record) {
            Ok(()) => {
                self.metrics.record(record);
                Ok(())
            }
            Err(error) => {
                self.metrics.audit_error();
                Err(error)
            }
        }
    }

    fn ready(&self) -> Result<(), AuditError> {
        self.inner.ready()
    }

    fn close(&self) -> Result<(), AuditError> {
        self.inner.close()
    }

    fn digest_key(&self) -> Result<&DigestKey, AuditError> {
        self.inner.digest_key()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as the gateway writes it, with `changes` over its fields.
    fn record(changes: serde_json::Value) -> AuditRecord {
        let mut value = serde_json::json!({
            "agent": "mcp-client", "call_id": "c1", "descriptor_hash": "ab", "error": null,
            "hash": "h", "input": {}, "input_digest": "d", "input_size": 2, "latency_us": null,
            "method": "tools/call", "output_digest": null, "output_size": null,
            "phase": "intent", "policy_version": "m1", "prev": "p", "provider": "git",
            "reasons": [], "role": "viewer", "seq": 1, "session": "s1", "step": null,
            "success": null, "time": "2026-12-02T03:23:33.973Z", "tool": "git_status",
            "verdict": "allowed", "writer": "w"
        });
        for (key, change) in changes.as_object().expect("an object") {
            value[key] = change.clone();
        }
        serde_json::from_value(value).expect("a record")
    }

    #[test]
    fn a_call_counts_once_its_latency_and_failure_from_its_outcome_and_reloads_apart() {
        let metrics = Metrics::default();
        metrics.record(&record(serde_json::json!({})));
        metrics.record(&record(serde_json::json!({
            "phase": "outcome", "latency_us": 1_500, "success": false
        })));
        metrics.record(&record(serde_json::json!({
            "phase": null, "verdict": "denied", "tool": "git_reset", "session": "s2",
            "reasons": [{"reason": "not_allowed", "message": "no"},
                        {"reason": "ceiling", "message": "no"}]
        })));
        metrics.record(&record(serde_json::json!({
            "phase": null, "tool": "gateway/reload", "provider": null,
            "reasons": [{"reason": "reload_refused", "message": "bad file"}]
        })));
        metrics.audit_error();
        let text = metrics.render();
        let has = |line: &str| text.lines().any(|l| l == line);
        for line in [
            r#"capability_calls_total{server="git",tool="git_status",role="viewer",verdict="allowed"} 1"#,
            r#"capability_calls_total{server="git",tool="git_reset",role="viewer",verdict="denied"} 1"#,
            r#"capability_denials_total{server="git",tool="git_reset",role="viewer",reason="not_allowed"} 1"#,
            r#"capability_denials_total{server="git",tool="git_reset",role="viewer",reason="ceiling"} 1"#,
            r#"capability_call_errors_total{server="git",tool="git_status",role="viewer"} 1"#,
            r#"capability_call_duration_seconds_bucket{server="git",tool="git_status",le="0.001"} 0"#,
            r#"capability_call_duration_seconds_bucket{server="git",tool="git_status",le="0.0025"} 1"#,
            r#"capability_call_duration_seconds_bucket{server="git",tool="git_status",le="+Inf"} 1"#,
            r#"capability_call_duration_seconds_sum{server="git",tool="git_status"} 0.0015"#,
            "capability_sessions_total 2",
            r#"capability_reloads_total{outcome="refused"} 1"#,
            "capability_audit_write_errors_total 1",
        ] {
            assert!(has(line), "{line} missing from:\n{text}");
        }
        assert!(
            !text.contains("gateway/reload"),
            "a reload is not a call: {text}"
        );
    }

    #[test]
    fn a_held_call_is_its_own_verdict_and_pending_proposals_a_gauge() {
        let metrics = Metrics::default();
        let held = serde_json::json!({
            "phase": null, "verdict": "denied", "tool": "git_reset",
            "reasons": [{"reason": "approval_required", "proposal": "p1", "message": "held"}]
        });
        metrics.record(&record(held));
        // The approvals page's notices are no calls.
        metrics.record(&record(serde_json::json!({
            "phase": null, "method": "approvals/approve", "tool": "git_reset",
            "reasons": [{"reason": "approved", "message": "alice approved p1"}]
        })));
        let text = metrics.render();
        assert!(
            text.lines().any(|l| l
                == r#"capability_calls_total{server="git",tool="git_reset",role="viewer",verdict="held"} 1"#),
            "{text}"
        );
        assert!(!text.contains("verdict=\"denied\""), "{text}");
        assert!(!text.contains("verdict=\"allowed\""), "{text}");
        assert!(!text.contains("capability_denials_total{"), "{text}");
        assert!(!text.contains("capability_proposals_pending"), "{text}");
        metrics.count_pending(|| Some(3));
        let text = metrics.render();
        assert!(
            text.contains(
                "# TYPE capability_proposals_pending gauge\ncapability_proposals_pending 3\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped_and_series_are_bounded() {
        assert_eq!(
            label_text(
                &["tool", "role"],
                &["a\"b\\c\nd".to_owned(), "r".to_owned()]
            ),
            r#"tool="a\"b\\c\nd",role="r""#
        );
        let mut family: Family<u64> = Family::default();
        for i in 0..MAX_SERIES + 5 {
            *family.get(vec![format!("tool-{i}")]) += 1;
        }
        assert_eq!(family.series.len(), MAX_SERIES + 1);
        assert_eq!(family.series[&vec!["(other)".to_owned()]], 5);
        // A label set it already keeps is still counted as itself.
        *family.get(vec!["tool-0".to_owned()]) += 1;
        assert_eq!(family.series[&vec!["tool-0".to_owned()]], 2);
    }
}
