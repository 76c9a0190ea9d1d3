//! A trail read for a person: `capability audit sessions` (who called, when, how it went) and
//! `capability audit replay` (one session's calls in order, each intent joined to its outcome,
//! with the human's consent that let it run), from a JSON Lines file or a database.

use std::io::Write;

use capability::audit::{Call, join_calls};
use capability_gateway::escape::escape;
use serde_json::json;

use crate::Failure;
use crate::commands::audit::{print_table, read};
use crate::out::{self, Out};

/// The sessions of a trail, by their first call: principal, role, first and last call time,
/// and the calls (allowed, denied, held for an approval, approved, failed). Exit 1 for a
/// broken JSON Lines trail (listed up to its first bad record).
pub fn sessions(target: &str, json: bool, out: &mut Out) -> Result<u8, Failure> {
    let (records, report) = read(target, "the list covers")?;
    let code = u8::from(report.is_some_and(|r| r.problem.is_some()));
    let sessions = capability::audit::sessions(&records);
    if json {
        out.json(&json!({ "target": target, "sessions": sessions }))?;
        return Ok(code);
    }
    let head = "SESSION PRINCIPAL ROLE FIRST LAST CALLS ALLOWED DENIED HELD APPROVED FAILED";
    let mut table = vec![head.split(' ').map(str::to_owned).collect::<Vec<_>>()];
    for s in &sessions {
        let listed = |names: &[String]| match names.join(", ") {
            none if none.is_empty() => "-".to_owned(),
            names => escape(&names),
        };
        let mut row = vec![escape(&s.session), listed(&s.principals), listed(&s.roles)];
        row.extend([escape(&s.first), escape(&s.last)]);
        let refused = s.denied + s.degraded + s.audit_failed;
        let counts = [s.calls, s.allowed, refused, s.held, s.approved, s.failed];
        row.extend(counts.iter().map(u64::to_string));
        table.push(row);
    }
    print_table(out, &table, 5)?;
    writeln!(
        out,
        "\n{} sessions in {target} (DENIED: refused by the policy, a spent budget or an \
         unwritable trail; HELD among them: refused until a human approves; replay one with \
         `capability audit replay {target} --session <SESSION>`)",
        sessions.len()
    )?;
    Ok(code)
}

/// One session's tool calls, in order (a JSON Lines trail in file order; a database by time,
/// writer and seq): step, tool, verdict, the redacted input, the output's keyed digest and size,
/// latency, and who approved it. A broken JSON Lines trail is replayed up to its first bad
/// record, said so on standard error, exit 1; a session with no call is exit 1 too.
pub fn replay(target: &str, session: &str, json: bool, out: &mut Out) -> Result<u8, Failure> {
    let (mut records, report) = read(target, "the replay covers")?;
    let broken = report.is_some_and(|r| r.problem.is_some());
    records.retain(|r| r.session == session);
    if records.is_empty() {
        out::note(format_args!(
            "capability: {target}: no call of session `{}`",
            escape(session)
        ));
    }
    let code = u8::from(broken || records.is_empty());
    let calls = join_calls(&records);
    if json {
        let calls: Vec<serde_json::Value> = calls.iter().map(call_json).collect();
        out.json(&json!({ "target": target, "session": session, "calls": calls }))?;
        return Ok(code);
    }
    for (n, call) in calls.iter().enumerate() {
        let (r, end) = (call.first, call.end());
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
        let consent = call.consent();
        let reasons: Vec<&str> = call
            .reasons()
            .into_iter()
            .filter(|x| x.as_consent().is_none())
            .map(|x| x.message())
            .collect();
        let outcome = match (&end.error, &end.output_digest, end.output_size) {
            _ if call.started_only() => "started, no outcome recorded".to_owned(),
            (Some(error), _, _) => format!("error: {error}"),
            (None, Some(digest), Some(size)) => format!("output {size} B {digest}"),
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
        if let Some(consent) = consent {
            writeln!(out, "     consent: {}", escape(&consent.to_string()))?;
        }
    }
    Ok(code)
}

/// A call of a replay, as JSON.
fn call_json(c: &Call<'_>) -> serde_json::Value {
    let (r, end) = (c.first, c.end());
    let consent = c
        .consent()
        .map(|c| json!({ "kind": c.kind, "id": c.id, "by": c.by }));
    let reasons: Vec<&str> = c.reasons().into_iter().map(|x| x.message()).collect();
    json!({
        "time": r.time, "writer": r.writer, "seq": r.seq, "call_id": r.call_id,
        "method": r.method, "agent": r.agent, "role": r.role, "step": r.step,
        "principal": r.principal, "incident_id": r.incident_id, "provider": r.provider,
        "tool": r.tool, "verdict": r.verdict, "reasons": reasons, "consent": consent,
        "input": r.input, "output_digest": end.output_digest, "output_size": end.output_size,
        "latency_us": end.latency_us, "success": end.success, "error": end.error,
        "status": c.status(),
    })
}
