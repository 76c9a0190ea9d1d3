//! `capability audit verify`, `capability audit stats` and `capability db migrate`: a trail in
//! a JSON Lines file, a SQLite database or PostgreSQL.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use capability::audit::{AuditRecord, VerifyReport};
use capability_store::{DailyStats, Store, TargetKind, target_kind};
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

/// Opens a store to read from (never a new empty database).
pub(crate) fn open(target: &str) -> Result<Box<dyn Store>, Failure> {
    capability_gateway::evidence::open_store(target).map_err(Failure::input)
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

/// `capability audit verify`: every record and each writer's chain.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// The trail: a `.jsonl` file, a SQLite database path, or `postgres://...`.
    #[arg(value_name = "PATH_OR_URL")]
    target: String,
    /// The public key (a `.pub` file from `capability keygen`) the checkpoints are signed
    /// with; repeat for a rotated key (the rotations recorded in the trail are read).
    #[arg(long, value_name = "FILE")]
    key: Vec<PathBuf>,
    /// A key rotation statement kept apart from the trail; repeat.
    #[arg(long, value_name = "FILE", requires = "key")]
    rotation: Vec<PathBuf>,
    /// A witness's public key file: its cosignature on each writer's latest tree checkpoint
    /// counts (`audit witness-submit` stores them); repeat.
    #[arg(long = "witness-key", value_name = "FILE", requires = "key")]
    witness_keys: Vec<PathBuf>,
    /// How many `--witness-key` witnesses must have cosigned (default: all).
    #[arg(long, value_name = "K", requires = "witness_keys")]
    witnesses: Option<usize>,
    /// Look for missing checkpoints up to this time (UTC, as the trail writes times: when a
    /// copy was taken), not now.
    #[arg(long, value_name = "TIME")]
    at: Option<String>,
    /// Print JSON on standard output.
    #[arg(long)]
    json: bool,
}

/// Checks the trail; exit 1 names what is wrong (`capability_gateway::evidence::verify`).
pub fn verify(args: &VerifyArgs, out: &mut Out) -> Result<u8, Failure> {
    let options = capability_gateway::evidence::VerifyOptions {
        keys: &args.key,
        rotations: &args.rotation,
        witness_keys: &args.witness_keys,
        witnesses: args.witnesses,
        at: args.at.as_deref(),
    };
    let verified =
        capability_gateway::evidence::verify(&args.target, &options).map_err(Failure::input)?;
    match args.json {
        true => out.json(&verified.json)?,
        false => out.write_all(verified.text.as_bytes())?,
    }
    if let Some(note) = verified.note.filter(|_| !args.json) {
        out::note(note);
    }
    Ok(u8::from(!verified.intact))
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
