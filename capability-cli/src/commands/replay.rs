//! `capability audit replay`: one session's calls in order, each intent joined to its outcome,
//! from a JSON Lines file or a database.

use std::io::Write;

use capability_gateway::escape::escape;
use capability_store::{TargetKind, target_kind};
use serde_json::json;

use crate::Failure;
use crate::commands::audit::open;
use crate::out::{self, Out};

/// One session's tool calls, in order (a JSON Lines trail in file order; a database by time,
/// writer and seq): step, tool, verdict, the redacted input, the output's keyed digest and size,
/// latency. A broken JSON Lines trail is replayed up to its first bad record, said so on
/// standard error, exit 1; a session with no call is exit 1 too.
pub fn replay(target: &str, session: &str, json: bool, out: &mut Out) -> Result<u8, Failure> {
    let (mut records, broken) = match target_kind(target) {
        TargetKind::Jsonl => {
            let (records, report) =
                capability::audit::read_jsonl(target).map_err(|e| Failure::input(e.to_string()))?;
            if let Some(problem) = &report.problem {
                out::note(format_args!(
                    "capability: {target}: {problem}; the replay covers the {} records before it",
                    report.records
                ));
            }
            (records, report.problem.is_some())
        }
        TargetKind::Sqlite | TargetKind::Postgres => {
            let trail = open(target)?
                .read_trail()
                .map_err(|e| Failure::input(e.to_string()))?;
            let mut records = trail.records;
            records.sort_by(|a, b| (&a.time, &a.writer, a.seq).cmp(&(&b.time, &b.writer, b.seq)));
            (records, false)
        }
    };
    records.retain(|r| r.session == session);
    if records.is_empty() {
        out::note(format_args!(
            "capability: {target}: no call of session `{}`",
            escape(session)
        ));
    }
    let code = u8::from(broken || records.is_empty());
    let calls = calls(&records);
    if json {
        let calls: Vec<serde_json::Value> = calls
            .iter()
            .map(|c| {
                let (r, end) = (c.first, c.outcome.unwrap_or(c.first));
                json!({
                    "time": r.time, "writer": r.writer, "seq": r.seq, "call_id": r.call_id,
                    "method": r.method, "agent": r.agent, "role": r.role, "step": r.step,
                    "incident_id": r.incident_id, "provider": r.provider, "tool": r.tool,
                    "verdict": r.verdict,
                    "reasons": r.reasons.iter()
                        .chain(c.outcome.map_or(&[][..], |o| o.reasons.as_slice()))
                        .map(|x| x.message())
                        .collect::<Vec<_>>(),
                    "input": r.input, "output_digest": end.output_digest,
                    "output_size": end.output_size, "latency_us": end.latency_us,
                    "success": end.success, "error": end.error, "status": c.status(),
                })
            })
            .collect();
        out.json(&json!({ "target": target, "session": session, "calls": calls }))?;
        return Ok(code);
    }
    for (n, call) in calls.iter().enumerate() {
        let (r, end) = (call.first, call.outcome.unwrap_or(call.first));
        let tool = match &r.provider {
            Some(provider) => format!("{provider}/{}", r.tool),
            None => r.tool.clone(),
        };
        let tool = match &r.method {
            Some(method) if method != "tools/call" => format!("{method} {tool}"),
            _ => tool,
        };
        let verdict = match serde_json::to_value(r.verdict) {
            Ok(serde_json::Value::String(v)) => v,
            _ => String::new(),
        };
        let reasons: Vec<&str> = r
            .reasons
            .iter()
            .chain(call.outcome.map_or(&[][..], |o| o.reasons.as_slice()))
            .map(|x| x.message())
            .collect();
        let outcome = match (&end.error, &end.output_digest, end.output_size) {
            _ if call.started_only() => "started, no outcome recorded".to_owned(),
            (Some(error), _, _) => format!("error: {error}"),
            (None, Some(digest), Some(size)) => format!("output {size} B {digest}"),
            _ if reasons.is_empty() => String::new(),
            _ => reasons.join("; "),
        };
        let latency = end
            .latency_us
            .map_or_else(|| "-".to_owned(), |us| format!("{us} µs"));
        // Everything but the digests came from agents and tools: escaped, so a tool name or an
        // error text cannot steer the terminal.
        writeln!(
            out,
            "{:>3}  {}  step {}  {}  {}  {}  {}",
            n + 1,
            escape(&r.time),
            escape(r.step.as_deref().unwrap_or("-")),
            escape(&tool),
            verdict,
            latency,
            escape(&outcome)
        )?;
        writeln!(out, "     input {}", escape(&r.input.to_string()))?;
    }
    Ok(code)
}

/// One call of a replay: its first record (the intent, or the one record of a call that did
/// not run) and its outcome, when the call ran and it was recorded.
struct Call<'a> {
    first: &'a capability::audit::AuditRecord,
    outcome: Option<&'a capability::audit::AuditRecord>,
}

impl Call<'_> {
    /// An intent without an outcome.
    fn started_only(&self) -> bool {
        self.first.phase == Some(capability::audit::Phase::Intent) && self.outcome.is_none()
    }

    fn status(&self) -> &'static str {
        if self.started_only() {
            "started, no outcome recorded"
        } else if self.outcome.is_some() || self.first.phase.is_none() {
            "recorded"
        } else {
            "outcome without its intent"
        }
    }
}

/// The records as calls: each outcome joined to its intent (same writer and call id).
fn calls(records: &[capability::audit::AuditRecord]) -> Vec<Call<'_>> {
    use capability::audit::Phase;
    let mut calls: Vec<Call<'_>> = Vec::new();
    let mut open: std::collections::HashMap<(&str, &str), usize> = std::collections::HashMap::new();
    for record in records {
        let key = record
            .call_id
            .as_deref()
            .map(|id| (record.writer.as_str(), id));
        match (record.phase, key) {
            (Some(Phase::Outcome), Some(key)) if open.contains_key(&key) => {
                if let Some(i) = open.remove(&key) {
                    calls[i].outcome = Some(record);
                }
            }
            (Some(Phase::Intent), Some(key)) => {
                open.insert(key, calls.len());
                calls.push(Call {
                    first: record,
                    outcome: None,
                });
            }
            _ => calls.push(Call {
                first: record,
                outcome: None,
            }),
        }
    }
    calls
}
