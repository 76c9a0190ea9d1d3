//! `capability audit verify` and `capability audit stats`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use capability::audit::{AuditRecord, Verdict};
use serde_json::json;

use crate::Failure;
use crate::out::{self, Out};

/// Checks the trail; exit 1 names the first bad record.
pub fn verify(path: &Path, json: bool, out: &mut Out) -> Result<u8, Failure> {
    let report =
        capability::audit::verify_jsonl(path).map_err(|e| Failure::input(e.to_string()))?;
    let code = u8::from(report.problem.is_some());
    if json {
        let problem = report.problem.as_ref().map(
            |p| json!({ "line": p.line, "kind": kind_name(&p.kind), "message": p.to_string() }),
        );
        writeln!(
            out,
            "{}",
            json!({
                "path": path.display().to_string(),
                "intact": report.problem.is_none(),
                "records": report.records,
                "problem": problem,
            })
        )?;
    } else {
        match &report.problem {
            None => writeln!(
                out,
                "{}: {} records, chain intact",
                path.display(),
                report.records
            )?,
            Some(problem) => writeln!(
                out,
                "{}: {problem} ({} intact records before it)",
                path.display(),
                report.records
            )?,
        }
    }
    Ok(code)
}

fn kind_name(kind: &capability::audit::ProblemKind) -> &'static str {
    match kind {
        capability::audit::ProblemKind::TornTail => "torn_tail",
        capability::audit::ProblemKind::Malformed(_) => "malformed",
        capability::audit::ProblemKind::NotCanonical => "not_canonical",
        capability::audit::ProblemKind::DuplicateKey(_) => "duplicate_key",
        capability::audit::ProblemKind::Edited => "edited",
        capability::audit::ProblemKind::ChainBroken { .. } => "chain_broken",
    }
}

#[derive(Default)]
struct Row {
    calls: u64,
    denials: u64,
    errors: u64,
    latencies: Vec<u64>,
}

/// Per day, role and tool: calls, denials, errors, p50/p95 latency. A broken trail is counted
/// up to its first bad record, said so on standard error, and exits 1.
pub fn stats(path: &Path, json: bool, out: &mut Out) -> Result<u8, Failure> {
    let (records, report) =
        capability::audit::read_jsonl(path).map_err(|e| Failure::input(e.to_string()))?;
    let mut rows: BTreeMap<(String, String, String), Row> = BTreeMap::new();
    for record in &records {
        let row = rows.entry(key(record)).or_default();
        row.calls += 1;
        if matches!(
            record.verdict,
            Verdict::Denied | Verdict::Degraded | Verdict::AuditFailed
        ) {
            row.denials += 1;
        }
        if record.success == Some(false) {
            row.errors += 1;
        }
        if let Some(latency) = record.latency_us {
            row.latencies.push(latency);
        }
    }
    if let Some(problem) = &report.problem {
        out::note(format_args!(
            "capability: {}: {problem}; the statistics cover the {} records before it",
            path.display(),
            report.records
        ));
    }
    let code = u8::from(report.problem.is_some());
    if json {
        let rows: Vec<serde_json::Value> = rows
            .iter_mut()
            .map(|((day, role, tool), row)| {
                json!({
                    "day": day, "role": role, "tool": tool,
                    "calls": row.calls, "denials": row.denials, "errors": row.errors,
                    "p50_latency_us": percentile(&mut row.latencies, 50),
                    "p95_latency_us": percentile(&mut row.latencies, 95),
                })
            })
            .collect();
        out.json(&json!({
            "path": path.display().to_string(),
            "records": report.records,
            "intact": report.problem.is_none(),
            "rows": rows,
        }))?;
        return Ok(code);
    }
    let mut table = vec![
        [
            "DAY", "ROLE", "TOOL", "CALLS", "DENIALS", "ERRORS", "P50", "P95",
        ]
        .map(str::to_owned),
    ];
    for ((day, role, tool), row) in rows.iter_mut() {
        let ms =
            |v: Option<u64>| v.map_or("-".to_owned(), |us| format!("{:.3} ms", us as f64 / 1000.0));
        table.push([
            day.clone(),
            role.clone(),
            tool.clone(),
            row.calls.to_string(),
            row.denials.to_string(),
            row.errors.to_string(),
            ms(percentile(&mut row.latencies, 50)),
            ms(percentile(&mut row.latencies, 95)),
        ]);
    }
    let widths: Vec<usize> = (0..8)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                if c >= 3 {
                    format!("{cell:>w$}", w = widths[c])
                } else {
                    format!("{cell:<w$}", w = widths[c])
                }
            })
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    writeln!(out, "\n{} records from {}", report.records, path.display())?;
    Ok(code)
}

fn key(record: &AuditRecord) -> (String, String, String) {
    let day = record.time.get(..10).unwrap_or(&record.time).to_owned();
    let tool = match &record.provider {
        Some(provider) => format!("{provider}/{}", record.tool),
        None => record.tool.clone(),
    };
    (day, record.role.clone(), tool)
}

/// The nearest-rank percentile.
fn percentile(values: &mut [u64], p: u64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let rank = (p * values.len() as u64).div_ceil(100).max(1);
    values.get(rank as usize - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&mut v, 50), Some(50));
        assert_eq!(percentile(&mut v, 95), Some(95));
        assert_eq!(percentile(&mut [7], 95), Some(7));
        assert_eq!(percentile(&mut [], 50), None);
        assert_eq!(percentile(&mut [3, 1, 2], 50), Some(2));
    }
}
