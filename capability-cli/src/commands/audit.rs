//! `capability audit verify`, `capability audit stats` and `capability db migrate`: a trail in
//! a JSON Lines file, a SQLite database or PostgreSQL.

use std::io::{self, Write};
use std::path::Path;

use capability::audit::{AuditRecord, ChainsReport, TrailCounts, VerifyReport};
use capability::gate::PublicKey;
use capability_store::{DailyStats, RowProblem, Store, TargetKind, target_kind};
use serde_json::json;

use crate::Failure;
use crate::out::{self, Out};
use capability_gateway::escape::escape;

/// `capability db migrate <target>`: applies the shipped migrations.
pub fn migrate(target: &str, out: &mut Out) -> Result<u8, Failure> {
    if target_kind(target) == TargetKind::Jsonl {
        return Err(Failure::input(format!(
            "{target} is a JSON Lines trail, not a database: it needs no migration"
        )));
    }
    if target_kind(target) == TargetKind::Sqlite {
        capability_gateway::files::not_a_link(Path::new(target))
            .map_err(|e| Failure::input(e.to_string()))?;
    }
    let store = open_to_migrate(target)?;
    let version = store.migrate().map_err(|e| Failure::input(e.to_string()))?;
    writeln!(out, "{}: schema version {version}", store.describe())?;
    Ok(0)
}

/// Opens a store to read from: a SQLite path that does not exist is an error, never a new
/// empty database (only `db migrate` creates one).
pub(crate) fn open(target: &str) -> Result<Box<dyn Store>, Failure> {
    if target_kind(target) == TargetKind::Sqlite && !Path::new(target).exists() {
        return Err(Failure::input(format!(
            "{target}: no such file (create a database with `capability db migrate {target}`)"
        )));
    }
    capability_store::open(target).map_err(|e| Failure::input(e.to_string()))
}

/// Opens (or creates) a store to migrate.
fn open_to_migrate(target: &str) -> Result<Box<dyn Store>, Failure> {
    capability_store::open(target).map_err(|e| Failure::input(e.to_string()))
}

/// Every record of a trail: a JSON Lines file in file order, up to its first bad record (said
/// on standard error: `what` covers less, e.g. `the replay covers`); a database by time,
/// writer and seq. With the JSON Lines file's report.
pub(crate) fn read(
    target: &str,
    what: &str,
) -> Result<(Vec<AuditRecord>, Option<VerifyReport>), Failure> {
    if target_kind(target) != TargetKind::Jsonl {
        let mut records = open(target)?
            .read_trail()
            .map_err(|e| Failure::input(e.to_string()))?
            .records;
        records.sort_by(|a, b| (&a.time, &a.writer, a.seq).cmp(&(&b.time, &b.writer, b.seq)));
        return Ok((records, None));
    }
    let (records, report) =
        capability::audit::read_jsonl(target).map_err(|e| Failure::input(e.to_string()))?;
    if let Some(problem) = &report.problem {
        out::note(format_args!(
            "capability: {target}: {problem}; {what} the {} records before it",
            report.records
        ));
    }
    Ok((records, Some(report)))
}

fn public_key(path: &Path) -> Result<PublicKey, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::input(format!("cannot read {}: {e}", path.display())))?;
    PublicKey::from_text(&text).map_err(|e| Failure::input(format!("{}: {e}", path.display())))
}

/// Checks the trail; exit 1 names what is wrong. With `key` (a public key file), also the
/// signed checkpoints: a cut-off tail and a recomputed chain.
pub fn verify(target: &str, key: Option<&Path>, json: bool, out: &mut Out) -> Result<u8, Failure> {
    let key = key.map(public_key).transpose()?;
    let verifier = key
        .as_ref()
        .map(|k| k as &dyn capability::audit::CheckpointVerifier);
    match target_kind(target) {
        TargetKind::Jsonl => {
            let path = Path::new(target);
            let report = match verifier {
                Some(key) => capability::audit::tlog::verify_jsonl_with_trees(path, key),
                None => capability::audit::verify_jsonl(path),
            }
            .map_err(|e| Failure::input(e.to_string()))?;
            print_jsonl(target, &report, verifier.is_some(), json, out)
        }
        TargetKind::Sqlite | TargetKind::Postgres => {
            let store = open(target)?;
            let trail = store
                .read_trail()
                .map_err(|e| Failure::input(e.to_string()))?;
            let report = trail.verify(verifier);
            let counts = TrailCounts::of(&trail.records, trail.checkpoints.len());
            let rows = (&trail.problems[..], counts);
            print_chains(
                &store.describe(),
                &report,
                rows,
                verifier.is_some(),
                json,
                out,
            )
        }
    }
}

fn print_jsonl(
    target: &str,
    report: &VerifyReport,
    keyed: bool,
    json: bool,
    out: &mut Out,
) -> Result<u8, Failure> {
    let code = u8::from(!report.is_intact());
    if json {
        let problem = report
            .problem
            .as_ref()
            .map(|p| json!({ "line": p.line, "kind": p.kind.code(), "message": p.to_string() }));
        let chain: Vec<String> = report
            .chain_problems
            .iter()
            .map(|p| p.to_string())
            .collect();
        out.json(&json!({
            "path": target,
            "intact": report.is_intact(),
            "records": report.records,
            "checkpoints": report.checkpoints.len(),
            "checkpoints_verified": keyed,
            "problem": problem,
            "chain_problems": chain,
            "unfinished": report.unfinished,
            "counts": report.counts,
        }))?;
        return Ok(code);
    }
    match &report.problem {
        None if report.chain_problems.is_empty() => writeln!(
            out,
            "{target}: {}; chain intact{}",
            report.counts,
            if keyed {
                format!(", {} signed checkpoints verified", report.checkpoints.len())
            } else {
                checkpoint_hint(report.checkpoints.len())
            }
        )?,
        None => {}
        Some(problem) => writeln!(
            out,
            "{target}: {problem} ({} intact records before it)",
            report.records
        )?,
    }
    for problem in &report.chain_problems {
        writeln!(out, "{target}: {problem}")?;
    }
    for call in &report.unfinished {
        writeln!(out, "{target}: {}", escape(&call.to_string()))?;
    }
    Ok(code)
}

fn checkpoint_hint(checkpoints: usize) -> String {
    if checkpoints == 0 {
        String::new()
    } else {
        " (checkpoints not verified: give the signer's public key with --key to detect a \
         cut-off tail or a recomputed chain)"
            .to_owned()
    }
}

fn print_chains(
    describe: &str,
    report: &ChainsReport,
    (rows, counts): (&[RowProblem], TrailCounts),
    keyed: bool,
    json: bool,
    out: &mut Out,
) -> Result<u8, Failure> {
    let intact = report.is_intact() && rows.is_empty();
    let code = u8::from(!intact);
    if json {
        let writers: Vec<serde_json::Value> = report
            .writers
            .iter()
            .map(|w| {
                json!({
                    "writer": w.writer,
                    "records": w.records,
                    "checkpointed": w.checkpointed,
                    "problems": w.problems.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
                    "unfinished": w.unfinished,
                })
            })
            .collect();
        let rows: Vec<serde_json::Value> = rows
            .iter()
            .map(|p| {
                json!({
                    "writer": p.writer, "seq": p.seq, "column": p.column,
                    "found": p.found, "expected": p.expected, "message": p.to_string(),
                })
            })
            .collect();
        out.json(&json!({
            "store": describe,
            "intact": intact,
            "records": report.records(),
            "checkpoints_verified": keyed,
            "writers": writers,
            "rows": rows,
            "counts": counts,
        }))?;
        return Ok(code);
    }
    for writer in &report.writers {
        let name = if writer.writer.is_empty() {
            "(unnamed writer)"
        } else {
            &writer.writer
        };
        if writer.problems.is_empty() {
            writeln!(
                out,
                "{describe}: writer {}: {} records, chain intact{}",
                escape(name),
                writer.records,
                if keyed {
                    format!(", checkpointed to record {}", writer.checkpointed)
                } else {
                    String::new()
                }
            )?;
        }
        for problem in &writer.problems {
            writeln!(out, "{describe}: writer {}: {problem}", escape(name))?;
        }
        for call in &writer.unfinished {
            writeln!(
                out,
                "{describe}: writer {}: {}",
                escape(name),
                escape(&call.to_string())
            )?;
        }
    }
    for row in rows {
        writeln!(out, "{describe}: {}", escape(&row.to_string()))?;
    }
    writeln!(
        out,
        "{describe}: {} writers, {counts}; {}",
        report.writers.len(),
        if intact {
            "every chain intact"
        } else if report.is_intact() {
            "every chain intact, but rows were edited: NOT intact"
        } else {
            "NOT intact"
        }
    )?;
    if !keyed {
        out::note(format_args!(
            "capability: checkpoints not verified: give the signer's public key with --key to \
             detect a cut-off tail or a recomputed chain"
        ));
    }
    Ok(code)
}

/// Per day, role, provider and tool: calls, allowed, denied, errors, degraded, p50/p95 latency
/// (`mcp_daily_stats` for a database; computed by the same rules for a JSON Lines trail, up to
/// its first bad record, said so on standard error, exit 1). The last line says what was
/// counted: calls, and how they relate to the records `audit verify` counts.
pub fn stats(target: &str, json: bool, out: &mut Out) -> Result<u8, Failure> {
    let (rows, counts, code) = match target_kind(target) {
        TargetKind::Jsonl => {
            let (records, report) = read(target, "the statistics cover")?;
            let broken = report.as_ref().is_some_and(|r| r.problem.is_some());
            let counts = report.map(|r| r.counts);
            (DailyStats::from_records(&records), counts, u8::from(broken))
        }
        TargetKind::Sqlite | TargetKind::Postgres => {
            let rows = open(target)?
                .daily_stats()
                .map_err(|e| Failure::input(e.to_string()))?;
            (rows, None, 0)
        }
    };
    let calls: u64 = rows.iter().map(|r| r.calls).sum();
    if json {
        out.json(&json!({ "target": target, "calls": calls, "counts": counts, "rows": rows }))?;
        return Ok(code);
    }
    let head = [
        "DAY", "ROLE", "TOOL", "CALLS", "ALLOWED", "DENIED", "ERRORS", "DEGRADED", "P50", "P95",
    ];
    let ms =
        |v: Option<u64>| v.map_or("-".to_owned(), |us| format!("{:.3} ms", us as f64 / 1000.0));
    let mut table = vec![head.map(str::to_owned).to_vec()];
    for row in &rows {
        let tool = if row.provider.is_empty() {
            row.tool.clone()
        } else {
            format!("{}/{}", row.provider, row.tool)
        };
        let counts = [row.calls, row.allowed, row.denied, row.errors, row.degraded];
        let mut cells = vec![escape(&row.day), escape(&row.role), escape(&tool)];
        cells.extend(counts.iter().map(u64::to_string));
        cells.extend([ms(row.p50_latency_us), ms(row.p95_latency_us)]);
        table.push(cells);
    }
    print_table(out, &table, 3)?;
    match counts {
        Some(counts) => writeln!(out, "\n{target}: {counts}")?,
        None => writeln!(
            out,
            "\n{target}: {calls} calls (every record but an outcome: a call that ran is two \
             records, its intent and its outcome, and `audit verify` counts both)"
        )?,
    }
    Ok(code)
}

/// A table: each column as wide as its widest cell; columns from `right` on aligned right.
pub(crate) fn print_table(out: &mut Out, table: &[Vec<String>], right: usize) -> io::Result<()> {
    let width = |c: usize| table.iter().map(|r| r[c].chars().count()).max();
    let widths: Vec<usize> = (0..table[0].len()).filter_map(width).collect();
    for row in table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &w))| {
                if c >= right {
                    format!("{cell:>w$}")
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}
