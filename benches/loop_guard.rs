//! The cost of the ghost-loop guards per loop start, single-threaded, against the in-process
//! circuit breaker's decision (`admit` and `success`) measured in the same run: a guarded start
//! that misses (the lease taken, the cache asked twice, the start recorded, the lease checked,
//! the outcome cached, the lease released: the loop itself does nothing) and one that hits (the
//! cache read, the hit recorded), over the in-memory stores, SQLite and PostgreSQL. Also one
//! single-row read of each store: what a breaker shared through the store would add to every
//! model turn. The audit sink is in memory throughout, so the figures are the guards' own.
//! Rounds are interleaved; each figure is the median of the rounds' means.
//!
//! PostgreSQL: the tests' throwaway server (or `CAPABILITY_TEST_POSTGRES_URL`); without one,
//! those columns say `skipped`.
//!
//! `cargo bench -p capability-bench --bench loop_guard`

use capability_testkit::pg;

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use capability::audit::{AuditedDispatch, Caller, DigestKey, MemorySink};
use capability::authz::{Ceiling, ToolContext};
use capability_agent::breaker::Breaker;
use capability_agent::driver::LoopOutcome;
use capability_agent::guard::{Guarded, LoopGuard, MemoryCache, MemoryLeases, ResultCache};
use capability_store::Store;
use capability_store::postgres::PgStore;
use capability_store::sqlite::SqliteStore;

const ROUNDS: usize = 7;

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("loop-guard-bench");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let key = DigestKey::from_bytes(&[9; 32]).unwrap_or_else(|e| panic!("{e}"));
    let dispatch = AuditedDispatch::new(Arc::new(MemorySink::new())).with_policy_version("p/1");
    let ctx = ToolContext::new("monitor", "bench", Ceiling::ReadOnly);
    let caller = Caller::new("bench");

    let sqlite = SqliteStore::open(dir.join("state.db")).unwrap_or_else(|e| panic!("{e}"));
    sqlite.migrate().unwrap_or_else(|e| panic!("{e}"));
    let (_server, pg_url) = pg::bench_schema("loop_guard", "bench_guard");
    let postgres = pg_url.map(|url| {
        let store = PgStore::connect(&url).unwrap_or_else(|e| panic!("{e}"));
        store.migrate().unwrap_or_else(|e| panic!("{e}"));
        store
    });

    let guard_of = |leases, cache| LoopGuard::new(leases, cache, key.clone());
    let memory = guard_of(Arc::new(MemoryLeases::new()), Arc::new(MemoryCache::new()));
    let on_sqlite = guard_of(sqlite.leases(), sqlite.loop_cache());
    let on_pg = postgres
        .as_ref()
        .map(|store| guard_of(store.leases(), store.loop_cache()));
    let sqlite_cache = sqlite.loop_cache();
    let pg_cache = postgres.as_ref().map(|store| store.loop_cache());

    let breaker = Breaker::new(5, Duration::from_secs(30));
    let decide = || {
        if black_box(breaker.admit("anthropic")).is_ok() {
            breaker.success("anthropic");
        }
    };
    let fresh = AtomicU64::new(0);
    let answer = || LoopOutcome::Answer {
        text: "disk full on db-2".into(),
        iterations: 1,
        tool_calls: 0,
    };
    let miss = |guard: &LoopGuard| {
        let incident = format!("miss-{}", fresh.fetch_add(1, Ordering::Relaxed));
        let out = guard
            .run(&dispatch, &incident, &ctx, caller, answer)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(out, Guarded::Ran { .. }), "{out:?}");
    };
    let hit = |guard: &LoopGuard| {
        let out = guard
            .run(&dispatch, "repeated", &ctx, caller, answer)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(out, Guarded::Cached(_)), "{out:?}");
    };
    for guard in [Some(&memory), Some(&on_sqlite), on_pg.as_ref()]
        .into_iter()
        .flatten()
    {
        guard
            .run(&dispatch, "repeated", &ctx, caller, answer)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let read = |cache: &Arc<dyn ResultCache>| {
        black_box(cache.get("absent", 0).unwrap_or_else(|e| panic!("{e}")));
    };
    let time = |n: u32, f: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..n {
            f();
        }
        start.elapsed().as_nanos() as f64 / f64::from(n)
    };
    let mut samples: [Vec<f64>; 10] = Default::default();
    for _ in 0..ROUNDS {
        samples[0].push(time(100_000, &decide));
        samples[1].push(time(2_000, &|| miss(&memory)));
        samples[2].push(time(20_000, &|| hit(&memory)));
        samples[3].push(time(100, &|| miss(&on_sqlite)));
        samples[4].push(time(1_000, &|| hit(&on_sqlite)));
        samples[5].push(time(2_000, &|| read(&sqlite_cache)));
        if let (Some(guard), Some(cache)) = (&on_pg, &pg_cache) {
            samples[6].push(time(100, &|| miss(guard)));
            samples[7].push(time(1_000, &|| hit(guard)));
            samples[8].push(time(1_000, &|| read(cache)));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let figures: Vec<Option<f64>> = samples.iter_mut().map(median).collect();
    let base = figures[0].unwrap_or(f64::NAN);
    let show = |f: Option<f64>| match f {
        Some(ns) => format!("{:.1} us ({:.0}x)", ns / 1e3, ns / base),
        None => "skipped".to_owned(),
    };
    println!(
        "loop_guard: median of {ROUNDS} interleaved rounds, against the in-process breaker \
         decision {:.3} us:\n  memory: start (miss) {} | hit {}\n  SQLite: start (miss) {} | \
         hit {} | one row read (a shared breaker's decision) {}\n  PostgreSQL: start (miss) {} | \
         hit {} | one row read {}",
        base / 1e3,
        show(figures[1]),
        show(figures[2]),
        show(figures[3]),
        show(figures[4]),
        show(figures[5]),
        show(figures[6]),
        show(figures[7]),
        show(figures[8]),
    );
    let _ = std::fs::remove_dir_all(&dir);
}
