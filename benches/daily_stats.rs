//! `mcp_daily_stats` over 1,000,000 records, in PostgreSQL and in SQLite: reading the view
//! schema 6 maintains (PostgreSQL: sums kept by triggers as deltas, compacted first; SQLite:
//! sums of the records up to a mark, the tail folded first; each timed apart) against the full scan it replaced (schema 2's view, the same `GROUP BY` over
//! the log), in one run, rounds interleaved. And what the
//! triggers cost a writer: inserting records in batches of 100 with them against without
//! them (disabled in PostgreSQL, dropped in a copy in SQLite), interleaved likewise.
//! The 1,000,000 records are inserted before anything is folded in SQLite: the first read
//! folds them all (printed).
//!
//! The records: 30 days, 4 roles, 3 providers, 10 tools (3,600 keys), latencies from 50 us to
//! 2 s. PostgreSQL: the tests' throwaway server (`fsync` on), or `CAPABILITY_TEST_POSTGRES_URL`;
//! without one it prints `SKIPPED` and measures SQLite only.
//!
//! `cargo bench -p capability-bench --bench daily_stats`

use capability_testkit::pg;

use std::path::PathBuf;
use std::time::Instant;

use capability_store::Store;
use capability_store::postgres::PgStore;
use capability_store::sqlite::SqliteStore;

const ROWS: u64 = 1_000_000;
const ROUNDS: usize = 5;
const BATCH: u64 = 100;
const BATCHES: u64 = 200;

/// Schema 2's view in PostgreSQL: the scan `mcp_daily_stats` was until schema 6.
const PG_SCAN: &str = "SELECT (time AT TIME ZONE 'UTC')::date AS day, agent_role AS role,
       COALESCE(provider, '') AS provider, tool,
       count(*) FILTER (WHERE phase IS DISTINCT FROM 'outcome') AS calls,
       count(*) FILTER (WHERE verdict = 'allowed' AND phase IS DISTINCT FROM 'outcome') AS allowed,
       count(*) FILTER (WHERE verdict = 'denied') AS denied,
       count(*) FILTER (WHERE success = false) AS errors,
       count(*) FILTER (WHERE verdict = 'degraded') AS degraded,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY latency_us)
           FILTER (WHERE latency_us IS NOT NULL) AS p50_latency_us,
       percentile_disc(0.95) WITHIN GROUP (ORDER BY latency_us)
           FILTER (WHERE latency_us IS NOT NULL) AS p95_latency_us
FROM mcp_audit_log GROUP BY 1, 2, 3, 4";

/// Schema 2's view in SQLite.
const SQLITE_SCAN: &str = "WITH ran AS (
    SELECT substr(time, 1, 10) AS day, agent_role AS role, COALESCE(provider, '') AS provider,
           tool, latency_us, ROW_NUMBER() OVER w AS rank,
           COUNT(*) OVER (PARTITION BY substr(time, 1, 10), agent_role,
                          COALESCE(provider, ''), tool) AS n
    FROM mcp_audit_log WHERE latency_us IS NOT NULL
    WINDOW w AS (PARTITION BY substr(time, 1, 10), agent_role, COALESCE(provider, ''), tool
                 ORDER BY latency_us)
), percentiles AS (
    SELECT day, role, provider, tool,
           MAX(CASE WHEN rank = (n * 50 + 99) / 100 THEN latency_us END) AS p50_latency_us,
           MAX(CASE WHEN rank = (n * 95 + 99) / 100 THEN latency_us END) AS p95_latency_us
    FROM ran GROUP BY day, role, provider, tool
), counts AS (
    SELECT substr(time, 1, 10) AS day, agent_role AS role, COALESCE(provider, '') AS provider,
           tool, COUNT(CASE WHEN phase IS NULL OR phase = 'intent' THEN 1 END) AS calls
    FROM mcp_audit_log GROUP BY 1, 2, 3, 4
)
SELECT c.*, p.p50_latency_us, p.p95_latency_us FROM counts c LEFT JOIN percentiles p
    ON p.day = c.day AND p.role = c.role AND p.provider = c.provider AND p.tool = c.tool";

/// `n` records from `first` (numbered `seq`), as one INSERT ... SELECT. `series` is the
/// backend's row source of `i` from `first` to `first + n - 1`, `time` its expression of the
/// record's time from `i`.
fn insert(series: &str, time: &str, random: &str, spread: bool) -> String {
    // Spread: each record of a batch of another role, provider and tool (up to 120 keys a
    // batch, the triggers' worst case). Clustered: a batch over 5 tools of one role and
    // provider, as concurrent calls of one gateway commit together.
    let (role, provider, tool) = if spread {
        ("i % 4", "i % 3", "i % 10")
    } else {
        ("i / 1000 % 4", "i / 1000 % 3", "i / 20 % 10")
    };
    format!(
        "INSERT INTO mcp_audit_log (writer_id, seq, time, agent_name, agent_role, session_id,
             provider, tool, descriptor_hash, verdict, reasons, input, input_digest, input_size,
             latency_us, success, prev_hash, hash, phase)
         SELECT 'bench', i, {time}, 'bot', 'role-' || ({role}), 's',
             CASE {provider} WHEN 0 THEN NULL ELSE 'p' || ({provider}) END,
             'tool-' || ({tool}), 'h',
             CASE WHEN i % 17 = 0 THEN 'denied' WHEN i % 101 = 0 THEN 'degraded'
                  ELSE 'allowed' END,
             '[]', '{{}}', 'd', 1,
             CASE WHEN i % 2 = 0 THEN NULL ELSE 50 + ({random}) END,
             CASE WHEN i % 2 = 0 THEN NULL ELSE i % 13 <> 0 END, 'p', 'h',
             CASE WHEN i % 2 = 0 THEN 'intent' ELSE 'outcome' END
         FROM {series}"
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    sqlite();
    postgres();
}

fn sqlite() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("daily-stats-bench");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("stats.db");
    let plain = dir.join("plain.db");
    for p in [&path, &plain] {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
        }
    }
    let store = SqliteStore::open(&path).expect("open");
    store.migrate().expect("migrate");
    let sqlite_series = |first: u64, n: u64| {
        format!(
            "(WITH RECURSIVE c(i) AS (SELECT {first} UNION ALL SELECT i + 1 FROM c \
             WHERE i < {}) SELECT i FROM c)",
            first + n - 1
        )
    };
    let time = "strftime('%Y-%m-%dT%H:%M:%S.000Z', 1790000000 + (i % 30) * 86400 + i % 86400, \
                'unixepoch')";
    let random = "abs(random()) % 2000000 * (abs(random()) % 1000) / 1000 / 1000";
    let conn = rusqlite::Connection::open(&path).expect("open");
    let started = Instant::now();
    conn.execute_batch(&insert(&sqlite_series(1, ROWS), time, random, true))
        .expect("fill");
    println!(
        "sqlite: {ROWS} records inserted (triggers on) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    store.daily_stats().expect("the first read");
    println!(
        "sqlite: the first read, folding all {ROWS} records: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // The same database without the triggers, for the writer's baseline (schema 6's insert
    // trigger fires only for a rowid already folded; its condition is checked on every row).
    conn.execute("VACUUM INTO ?1", [plain.display().to_string()])
        .expect("copy");
    let bare = rusqlite::Connection::open(&plain).expect("open");
    bare.execute_batch(
        "DROP TRIGGER mcp_daily_stats_insert; DROP TRIGGER mcp_daily_stats_delete;
         DROP TRIGGER mcp_daily_stats_update; PRAGMA journal_mode = WAL;",
    )
    .expect("drop triggers");
    conn.execute_batch("PRAGMA synchronous = FULL")
        .expect("sync");
    bare.execute_batch("PRAGMA synchronous = FULL")
        .expect("sync");
    let (mut maintained, mut scan, mut folds) = (vec![], vec![], vec![]);
    let mut writes: [Vec<f64>; 4] = Default::default();
    let mut next = ROWS + 1;
    for _ in 0..ROUNDS {
        // The store folds the log's tail (the last round's writes) when it reads; timed apart.
        let t = Instant::now();
        store.daily_stats().expect("stats");
        folds.push(ms(t));
        let t = Instant::now();
        let rows = store.daily_stats().expect("stats").len();
        maintained.push(ms(t));
        let t = Instant::now();
        let mut statement = conn.prepare_cached(SQLITE_SCAN).expect("scan");
        let scanned = statement.query_map([], |_| Ok(())).expect("scan").count();
        scan.push(ms(t));
        assert_eq!(rows, scanned, "the same keys");
        for (k, (target, spread)) in [(&conn, true), (&bare, true), (&conn, false), (&bare, false)]
            .into_iter()
            .enumerate()
        {
            let t = Instant::now();
            for b in 0..BATCHES {
                let rows = insert(
                    &sqlite_series(next + b * BATCH, BATCH),
                    time,
                    random,
                    spread,
                );
                target
                    .execute_batch(&format!("BEGIN; {rows}; COMMIT"))
                    .expect("insert");
            }
            writes[k].push(ms(t) * 1e3 / (BATCHES * BATCH) as f64);
            if k % 2 == 1 {
                next += BATCHES * BATCH;
            }
        }
    }
    println!(
        "sqlite: folding the tail ({} records, a round's writes) and reading: {:.1} ms",
        2 * BATCHES * BATCH,
        median(folds)
    );
    report("sqlite", maintained, scan, writes);
}

/// The medians: reads, then writes as [spread with, spread without, clustered with, clustered
/// without] the triggers.
fn report(backend: &str, maintained: Vec<f64>, scan: Vec<f64>, writes: [Vec<f64>; 4]) {
    let (maintained, scan) = (median(maintained), median(scan));
    println!(
        "{backend}: mcp_daily_stats over {ROWS} records: maintained {maintained:.1} ms, full \
         scan {scan:.1} ms ({:.1}x faster)",
        scan / maintained
    );
    let [spread_with, spread_without, with, without] = writes.map(median);
    for (shape, with, without) in [
        ("spread", spread_with, spread_without),
        ("clustered", with, without),
    ] {
        println!(
            "{backend}: insert, batches of {BATCH}, {shape} keys: {with:.1} us/record with the \
             triggers, {without:.1} us/record without ({:.2}x)",
            with / without
        );
    }
}

fn postgres() {
    let (_server, base) = match std::env::var(pg::URL_VAR) {
        Ok(url) => (None, url),
        Err(_) => match pg::Server::start(&[]) {
            Ok(server) => {
                let url = server.url().to_owned();
                (Some(server), url)
            }
            Err(why) => {
                println!("SKIPPED: daily_stats on PostgreSQL: no PostgreSQL: {why}");
                return;
            }
        },
    };
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).expect("connect");
    admin
        .batch_execute("DROP SCHEMA IF EXISTS bench_stats CASCADE; CREATE SCHEMA bench_stats")
        .expect("schema");
    let url = pg::with_schema(&base, "bench_stats");
    let store = PgStore::connect(&url).expect("connect");
    store.migrate().expect("migrate");
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let series = |first: u64, n: u64| {
        format!(
            "generate_series({first}::bigint, {}::bigint) AS i",
            first + n - 1
        )
    };
    let time = "to_timestamp(1790000000 + (i % 30) * 86400 + i % 86400)";
    let random = "(random() ^ 3 * 2000000)::bigint";
    let started = Instant::now();
    client
        .batch_execute(&insert(&series(1, ROWS), time, random, true))
        .expect("fill");
    client.batch_execute("ANALYZE").expect("analyze");
    println!(
        "postgres: {ROWS} records inserted (triggers on) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let (mut maintained, mut scan, mut compactions) = (vec![], vec![], vec![]);
    let mut writes: [Vec<f64>; 4] = Default::default();
    let mut next = ROWS + 1;
    for round in 0..ROUNDS {
        // The writers compact every 5 s; the read measured is the view's, compacted.
        let t = Instant::now();
        client
            .batch_execute("SELECT capability_daily_stats_compact()")
            .expect("compact");
        compactions.push(ms(t));
        let t = Instant::now();
        let rows = store.daily_stats().expect("stats").len();
        maintained.push(ms(t));
        let t = Instant::now();
        let scanned = client.query(PG_SCAN, &[]).expect("scan").len();
        scan.push(ms(t));
        // Records written with the triggers disabled (below) are in the log only.
        if round == 0 {
            assert_eq!(rows, scanned, "the same keys");
        }
        for (k, (on, spread)) in [(true, true), (false, true), (true, false), (false, false)]
            .into_iter()
            .enumerate()
        {
            let toggle = if on { "ENABLE" } else { "DISABLE" };
            client
                .batch_execute(&format!("ALTER TABLE mcp_audit_log {toggle} TRIGGER USER"))
                .expect("toggle");
            let t = Instant::now();
            for b in 0..BATCHES {
                let rows = insert(&series(next + b * BATCH, BATCH), time, random, spread);
                client.batch_execute(&rows).expect("insert");
            }
            writes[k].push(ms(t) * 1e3 / (BATCHES * BATCH) as f64);
            next += BATCHES * BATCH;
        }
    }
    client
        .batch_execute("ALTER TABLE mcp_audit_log ENABLE TRIGGER USER")
        .expect("enable");
    println!(
        "postgres: compacting the deltas of {} records (a round's writes): {:.1} ms",
        4 * BATCHES * BATCH,
        median(compactions)
    );
    report("postgres", maintained, scan, writes);
}
