//! Audited calls per second into PostgreSQL with 8 threads (one writer, group commit), against
//! inserting the same rows directly in the same run: in batches of the size group commit
//! formed (what the sink adds over the inserts it makes: goal at least 0.8), and in batches of
//! 1,000 (the database's ceiling). Goal: at least 5,000 audited calls/s.
//!
//! The benchmark starts its own throwaway server (the tests' harness, `fsync` on); extra server
//! settings in `CAPABILITY_BENCH_PG_SETTINGS` (space-separated `name=value`), or an existing
//! server in `CAPABILITY_TEST_POSTGRES_URL`. Without PostgreSQL it prints `SKIPPED`.
//!
//! `cargo bench -p capability-bench --bench store_pg`

use capability_testkit::pg;

use std::time::{Duration, Instant};

use capability::CapabilityManifest;
use capability::audit::{AuditRecord, AuditedDispatch, Budget, Caller, Outcome};
use capability::authz::{Ceiling, ToolContext};
use capability_store::postgres::PgStore;
use capability_store::{SinkOptions, Store};
use serde_json::json;

const THREADS: usize = 8;
const CALLS_PER_THREAD: usize = 2_500;
const ROUNDS: usize = 5;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let settings = std::env::var("CAPABILITY_BENCH_PG_SETTINGS").unwrap_or_default();
    let settings: Vec<&str> = settings.split_whitespace().collect();
    let (_server, base) = match std::env::var(pg::URL_VAR) {
        Ok(url) => (None, url),
        Err(_) => match pg::Server::start(&settings) {
            Ok(server) => {
                let url = server.url().to_owned();
                (Some(server), url)
            }
            Err(why) => {
                println!("SKIPPED: store_pg: no PostgreSQL: {why}");
                return;
            }
        },
    };
    println!(
        "store_pg: {THREADS} threads x {CALLS_PER_THREAD} audited calls, {ROUNDS} rounds, \
         server settings: {settings:?}"
    );
    let mut results = Vec::new();
    for round in 0..ROUNDS {
        let audited = store(&base, &format!("bench_audited_{round}"));
        let (calls_per_s, records, group) = audited_run(&audited);
        // The same without `mcp_daily_stats`' triggers (schema 6): what they cost a writer.
        let bare = store(&base, &format!("bench_bare_{round}"));
        postgres::Client::connect(&bare.1, postgres::NoTls)
            .and_then(|mut c| c.batch_execute("ALTER TABLE mcp_audit_log DISABLE TRIGGER USER"))
            .expect("disable the triggers");
        let (untriggered, _, _) = audited_run(&bare);
        let batch = group.round().max(1.0) as usize;
        let same_batches = direct_run(
            &store(&base, &format!("bench_same_{round}")),
            &records,
            batch,
        );
        let big_batches = direct_run(
            &store(&base, &format!("bench_big_{round}")),
            &records,
            1_000,
        );
        println!(
            "round {round}: audited {calls_per_s:>8.0} calls/s, {:>8.0} records/s (mean group \
             commit {group:.1} records) | direct, batches of {batch}: {same_batches:>8.0} \
             rows/s, ratio {:.2} | direct, batches of 1000: {big_batches:>8.0} rows/s, ratio \
             {:.2} | without the stats triggers: {untriggered:>8.0} calls/s",
            2.0 * calls_per_s,
            2.0 * calls_per_s / same_batches,
            2.0 * calls_per_s / big_batches
        );
        results.push((calls_per_s, same_batches, big_batches, untriggered));
    }
    let median = |f: fn(&(f64, f64, f64, f64)) -> f64| {
        let mut values: Vec<f64> = results.iter().map(f).collect();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let (audited, same, big) = (median(|r| r.0), median(|r| r.1), median(|r| r.2));
    let untriggered = median(|r| r.3);
    println!(
        "median: audited {audited:.0} calls/s (goal >= 5000), {:.0} records/s | direct, same \
         batches {same:.0} rows/s, records ratio {:.2} (goal >= 0.8) | direct, batches of 1000 \
         {big:.0} rows/s, records ratio {:.2} | without the stats triggers {untriggered:.0} \
         calls/s ({:.2}x)",
        2.0 * audited,
        2.0 * audited / same,
        2.0 * audited / big,
        audited / untriggered
    );
}

/// A migrated store in a fresh schema, and its URL.
fn store(base: &str, schema: &str) -> (PgStore, String) {
    let mut client = postgres::Client::connect(base, postgres::NoTls).expect("connect");
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .expect("schema");
    let url = pg::with_schema(base, schema);
    let store = PgStore::connect(&url).expect("connect");
    store.migrate().expect("migrate");
    (store, url)
}

/// 8 threads calling through one audited dispatch: calls/s (two records each: the intent and
/// the outcome), the records, the mean group size.
fn audited_run((store, url): &(PgStore, String)) -> (f64, Vec<AuditRecord>, f64) {
    let sink = store
        .audit_sink(SinkOptions::writer("bench"))
        .expect("sink");
    let dispatch = AuditedDispatch::new(sink.clone()).with_budget(Budget {
        max_calls: u32::MAX,
        max_denials: u32::MAX,
    });
    let tool = CapabilityManifest::builder("list_pods")
        .provider("k8s")
        .read_only(true)
        .build()
        .expect("manifest");
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (dispatch, tool) = (&dispatch, &tool);
            scope.spawn(move || {
                let ctx = ToolContext::new("monitor", format!("s-{t}"), Ceiling::ReadOnly);
                let caller = Caller::new("bench").step("loop");
                for i in 0..CALLS_PER_THREAD {
                    let input = json!({ "namespace": "checkout", "i": i });
                    let out: Outcome<_, String> = dispatch.call(&ctx, caller, tool, &input, || {
                        Ok(json!(["api-0", "api-1", "api-2"]))
                    });
                    assert!(out.is_done());
                }
            });
        }
    });
    let elapsed = start.elapsed();
    sink.close().expect("close");
    let records = store.read_trail().expect("trail").records;
    // An intent and an outcome per call.
    assert_eq!(records.len(), 2 * THREADS * CALLS_PER_THREAD);
    (
        per_second(THREADS * CALLS_PER_THREAD, elapsed),
        records,
        mean_group(url),
    )
}

/// The mean number of records per transaction: rows over distinct inserting transactions.
fn mean_group(url: &str) -> f64 {
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    client
        .query_one(
            "SELECT count(*)::float8 / count(DISTINCT xmin::text) FROM mcp_audit_log",
            &[],
        )
        .expect("group size")
        .get(0)
}

/// The same rows inserted directly in batches of `batch`, one transaction each, by one thread.
fn direct_run((store, _): &(PgStore, String), records: &[AuditRecord], batch: usize) -> f64 {
    let start = Instant::now();
    for chunk in records.chunks(batch) {
        store.insert_records(chunk).expect("insert");
    }
    per_second(records.len(), start.elapsed())
}

fn per_second(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}
