//! Audited calls per second into SQLite with 8 threads (`AuditedDispatch` into the group-commit
//! `SqliteSink`, each call returning only once its record is committed), against inserting the
//! same rows directly in batches, in the same run, on the same disk, with the same durability
//! (`synchronous = FULL`, WAL). Also: reading `mcp_daily_stats` (a view) over those rows.
//!
//! `cargo bench -p capability-bench --bench store`

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use capability::CapabilityManifest;
use capability::audit::{AuditRecord, AuditedDispatch, Budget, Caller, Outcome};
use capability::authz::{Ceiling, ToolContext};
use capability_store::sqlite::SqliteStore;
use capability_store::{SinkOptions, Store};
use serde_json::json;

const THREADS: usize = 8;
const CALLS_PER_THREAD: u64 = 1_500;

fn fresh(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("store-bench");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(name);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

fn open(path: &Path) -> SqliteStore {
    let store = SqliteStore::open(path).unwrap_or_else(|e| panic!("{e}"));
    store.migrate().unwrap_or_else(|e| panic!("{e}"));
    store
}

/// 8 threads calling one tool through one dispatch into one SQLite sink: calls per second (each
/// call is two records, its intent and its outcome), and the records.
fn audited(path: &Path) -> (f64, Vec<AuditRecord>) {
    audited_with(path, true)
}

/// [`audited`], with `mcp_daily_stats`' triggers (schema 6) kept or dropped first.
fn audited_with(path: &Path, triggers: bool) -> (f64, Vec<AuditRecord>) {
    let store = open(path);
    if !triggers {
        rusqlite::Connection::open(path)
            .and_then(|c| {
                c.execute_batch(
                    "DROP TRIGGER mcp_daily_stats_insert; DROP TRIGGER mcp_daily_stats_delete;
                     DROP TRIGGER mcp_daily_stats_update;",
                )
            })
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let sink = Arc::new(
        store
            .sink(SinkOptions::writer("bench-audited"))
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let dispatch = Arc::new(AuditedDispatch::new(sink.clone()).with_budget(Budget {
        max_calls: u32::MAX,
        max_denials: u32::MAX,
    }));
    let tool = CapabilityManifest::builder("list_pods")
        .provider("k8s")
        .read_only(true)
        .scope("k8s:read")
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (dispatch, tool) = (dispatch.clone(), tool.clone());
            scope.spawn(move || {
                let ctx = ToolContext::new("monitor", format!("s-{t}"), Ceiling::ReadOnly)
                    .with_scopes(["k8s:read"]);
                let caller = Caller::new("bench").step("loop");
                for i in 0..CALLS_PER_THREAD {
                    let input = json!({ "namespace": "checkout", "i": i, "thread": t });
                    let out: Outcome<u64, String> =
                        dispatch.call(&ctx, caller, &tool, &input, || Ok(i));
                    assert!(matches!(out, Outcome::Done(_)), "the call did not run");
                }
            });
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    let records = store.read_trail().unwrap_or_else(|e| panic!("{e}")).records;
    // An intent and an outcome per call.
    let calls = THREADS as u64 * CALLS_PER_THREAD;
    assert_eq!(records.len() as u64, 2 * calls);
    (calls as f64 / elapsed, records)
}

/// The same rows inserted directly, `batch` per transaction, one thread, through the same
/// insert statement the sink uses (`SqliteStore::insert_records`); rows per second.
fn direct(path: &Path, records: &[AuditRecord], batch: usize) -> f64 {
    let store = open(path);
    let start = Instant::now();
    for chunk in records.chunks(batch) {
        store
            .insert_records(chunk)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    records.len() as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: a quick smoke run is enough.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    // Disk timings on a shared machine are noisy: interleave 3 rounds, report the medians.
    let (mut audited_rates, mut direct_8s, mut direct_256s) = (vec![], vec![], vec![]);
    let mut untriggered = vec![];
    let mut records = Vec::new();
    for _ in 0..3 {
        let (rate, rows) = audited(&fresh("audited.db"));
        audited_rates.push(rate);
        untriggered.push(audited_with(&fresh("untriggered.db"), false).0);
        direct_8s.push(direct(&fresh("direct-8.db"), &rows, THREADS));
        direct_256s.push(direct(&fresh("direct-256.db"), &rows, 256));
        records = rows;
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (audited_rate, direct_8, direct_256) = (
        median(audited_rates),
        median(direct_8s),
        median(direct_256s),
    );
    let store = open(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("store-bench/audited.db"));
    let start = Instant::now();
    let stats = store.daily_stats().unwrap_or_else(|e| panic!("{e}"));
    let stats_ms = start.elapsed().as_secs_f64() * 1e3;
    let record_rate = 2.0 * audited_rate;
    println!(
        "sqlite audited, {THREADS} threads: {audited_rate:>9.0} calls/s, {record_rate:>9.0} \
         records/s ({} records)",
        records.len()
    );
    let untriggered = median(untriggered);
    println!(
        "sqlite audited without the stats triggers: {untriggered:>9.0} calls/s ({:.2}x)",
        audited_rate / untriggered
    );
    println!("sqlite direct, batches of {THREADS}:    {direct_8:>9.0} rows/s");
    println!("sqlite direct, batches of 256:  {direct_256:>9.0} rows/s");
    println!(
        "ratio audited records / direct rows (8): {:.2}; / direct rows (256): {:.2} (goal >= 0.8)",
        record_rate / direct_8,
        record_rate / direct_256
    );
    println!(
        "mcp_daily_stats (view) over {} rows: {stats_ms:.1} ms, {} groups",
        records.len(),
        stats.len()
    );
}
