//! The cost of one audited call, single-threaded, into each sink a deployment uses: memory,
//! the JSON Lines file (one `write` per record), SQLite (WAL, `synchronous = FULL`: a durable
//! commit per record) and PostgreSQL (`fsync` on: a commit per record), against the same call
//! authorized and run unaudited. Rounds are interleaved (every sink once per round), and each
//! figure is the median of the rounds' means.
//!
//! A call that runs writes its intent before it runs and its outcome after: two records, and on
//! a durable store two commits, where one record was written before the intent existed. Run
//! this bench on both sides of that change to see what it costs.
//!
//! PostgreSQL: the tests' throwaway server (or `CAPABILITY_TEST_POSTGRES_URL`); without one,
//! that column says `skipped`.
//!
//! `cargo bench -p capability-bench --bench audit_sinks`

use capability_testkit::pg;

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use capability::CapabilityManifest;
use capability::audit::{
    AuditSink, AuditedDispatch, Budget, Caller, FlushPolicy, JsonlSink, MemorySink, Outcome,
};
use capability::authz::{Ceiling, ToolContext};
use capability_store::postgres::PgStore;
use capability_store::sqlite::SqliteStore;
use capability_store::{SinkOptions, Store};
use serde_json::json;

const ROUNDS: usize = 9;

fn main() {
    // `cargo test --benches` runs this without `--bench`: nothing to time then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-sinks-bench");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let tool = CapabilityManifest::builder("list_pods")
        .provider("k8s")
        .read_only(true)
        .scope("k8s:read")
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let ctx = ToolContext::new("monitor", "bench", Ceiling::ReadOnly).with_scopes(["k8s:read"]);
    let caller = Caller::new("bench").step("loop");
    let input = json!({ "namespace": "checkout", "label_selector": "app=api,tier=web" });
    let run = || Ok::<_, String>(json!(["api-0", "api-1", "api-2"]));

    let unlimited = |sink: Arc<dyn AuditSink>| {
        AuditedDispatch::new(sink).with_budget(Budget {
            max_calls: u32::MAX,
            max_denials: u32::MAX,
        })
    };
    let memory = unlimited(Arc::new(MemorySink::new()));
    let jsonl = unlimited(Arc::new(
        JsonlSink::open(dir.join("trail.jsonl"), FlushPolicy::EveryRecord)
            .unwrap_or_else(|e| panic!("{e}")),
    ));
    let sqlite_store = SqliteStore::open(dir.join("state.db")).unwrap_or_else(|e| panic!("{e}"));
    sqlite_store.migrate().unwrap_or_else(|e| panic!("{e}"));
    let sqlite = unlimited(Arc::new(
        sqlite_store
            .sink(SinkOptions::writer("bench"))
            .unwrap_or_else(|e| panic!("{e}")),
    ));
    let (_server, pg_url) = pg::bench_schema("audit_sinks", "bench_sinks");
    let postgres = pg_url.map(|url| {
        let store = PgStore::connect(&url).unwrap_or_else(|e| panic!("{e}"));
        store.migrate().unwrap_or_else(|e| panic!("{e}"));
        let sink = store
            .audit_sink(SinkOptions::writer("bench"))
            .unwrap_or_else(|e| panic!("{e}"));
        unlimited(sink)
    });

    let unaudited = || {
        if ctx.authorize(black_box(&tool)).is_ok() {
            black_box(run()).ok();
        }
    };
    let audited = |d: &AuditedDispatch| {
        let out: Outcome<_, String> = d.call(&ctx, caller, &tool, black_box(&input), run);
        assert!(out.is_done(), "the call did not run");
    };
    // Mean ns per call over `n` calls.
    let time = |n: u32, f: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..n {
            f();
        }
        start.elapsed().as_nanos() as f64 / f64::from(n)
    };
    let mut samples: [Vec<f64>; 5] = Default::default();
    for _ in 0..ROUNDS {
        samples[0].push(time(20_000, &unaudited));
        samples[1].push(time(5_000, &|| audited(&memory)));
        samples[2].push(time(5_000, &|| audited(&jsonl)));
        samples[3].push(time(200, &|| audited(&sqlite)));
        if let Some(pg) = &postgres {
            samples[4].push(time(200, &|| audited(pg)));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let figures: Vec<Option<f64>> = samples.iter_mut().map(median).collect();
    let us = |f: Option<f64>| match f {
        Some(ns) => format!("{:.2} us", ns / 1e3),
        None => "skipped".to_owned(),
    };
    println!(
        "audit_sinks: per audited call, single thread, median of {ROUNDS} interleaved rounds: \
         unaudited {} | memory {} | JSON Lines {} | SQLite {} | PostgreSQL {}",
        us(figures[0]),
        us(figures[1]),
        us(figures[2]),
        us(figures[3]),
        us(figures[4])
    );
    let _ = std::fs::remove_dir_all(&dir);
}
