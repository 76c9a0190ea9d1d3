//! The audit trail in PostgreSQL: 8 processes x 10,000 audited calls give exactly 80,000 rows,
//! every writer's chain verifies with its signed checkpoints, and `mcp_daily_stats` agrees with
//! the records counted here; a writer killed with SIGKILL loses at most the record in flight;
//! a cut-off tail and a recomputed chain are found with the checkpoint key.
//!
//! The writers are this test binary run again with `CAPABILITY_PG_CHILD` set (see `child`).

use capability_testkit::pg;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capability::CapabilityManifest;
use capability::audit::{
    AuditRecord, AuditedDispatch, Budget, Caller, ChainProblem, CheckpointEvery, CheckpointSigner,
    Outcome, Phase, verify_chains,
};
use capability::authz::{Ceiling, ToolContext};
use capability::gate::SecretKey;
use capability_store::postgres::PgStore;
use capability_store::{DailyStats, SinkOptions, Store};
use serde_json::json;

const CHILD: &str = "CAPABILITY_PG_CHILD";
const PROCESSES: usize = 8;
const CALLS: usize = 10_000;
const THREADS: usize = 4;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

/// The checkpoint key every writer of a test signs with (its seed travels to the children).
fn signer(seed: &str) -> Arc<dyn CheckpointSigner> {
    Arc::new(SecretKey::from_text(seed).expect("seed"))
}

fn seed() -> String {
    SecretKey::generate().expect("randomness").to_text()
}

fn options(writer: &str, seed: &str, records: u64) -> SinkOptions {
    let mut options = SinkOptions::writer(writer);
    options.checkpoints = Some((
        signer(seed),
        CheckpointEvery {
            records,
            interval: Duration::from_secs(3600),
        },
    ));
    options
}

fn child_command(vars: &[(&str, &str)]) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    command.args([
        "--exact",
        "pg_audit::child",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (name, value) in vars {
        command.env(name, value);
    }
    command
}

/// Calls through an audited dispatch: a mix of tools, roles, denials and failures.
fn calls(dispatch: &AuditedDispatch, thread: usize, n: usize, mut after: impl FnMut()) {
    let tools = [
        CapabilityManifest::builder("list_pods")
            .provider("k8s")
            .read_only(true)
            .build(),
        CapabilityManifest::builder("get_logs")
            .provider("loki")
            .read_only(true)
            .build(),
        CapabilityManifest::builder("restart_pod")
            .provider("k8s")
            .destructive(true)
            .build(),
        CapabilityManifest::builder("ping").read_only(true).build(),
    ]
    .map(|t| t.expect("manifest"));
    let roles = ["monitor", "analyst"];
    let session = format!("s-{}-{thread}", std::process::id());
    let contexts = roles.map(|r| ToolContext::new(r, session.clone(), Ceiling::ReadOnly));
    let caller = Caller::new("bot").step("triage");
    for i in 0..n {
        let tool = &tools[i % tools.len()];
        let ctx = &contexts[(i / 4) % roles.len()];
        let out: Outcome<u64, String> = dispatch.call(ctx, caller, tool, &json!({"i": i}), || {
            if i % 7 == 0 {
                Err("boom".to_owned())
            } else {
                Ok((i % 13) as u64)
            }
        });
        assert!(!matches!(
            out,
            Outcome::AuditFailed(_) | Outcome::Degrade(_)
        ));
        after();
    }
}

fn dispatch(
    store: &PgStore,
    options: SinkOptions,
) -> (AuditedDispatch, Arc<dyn capability::audit::AuditSink>) {
    let sink = store.audit_sink(options).expect("sink");
    let dispatch = AuditedDispatch::new(sink.clone()).with_budget(Budget {
        max_calls: u32::MAX,
        max_denials: u32::MAX,
    });
    (dispatch, sink)
}

/// The children's side.
#[test]
fn child() {
    let Ok(role) = std::env::var(CHILD) else {
        return;
    };
    let store = PgStore::connect(&env("PG_URL")).expect("connect");
    let writer = env("PG_WRITER");
    let options = options(&writer, &env("PG_SEED"), 1_000);
    match role.as_str() {
        "writer" => {
            let (dispatch, sink) = dispatch(&store, options);
            std::thread::scope(|scope| {
                for t in 0..THREADS {
                    let dispatch = &dispatch;
                    scope.spawn(move || calls(dispatch, t, CALLS / THREADS, || {}));
                }
            });
            sink.close().expect("close");
            println!("RESULT done");
        }
        "killed" => {
            // One thread; after each call returns, one line in the progress file.
            let (dispatch, _sink) = dispatch(&store, options);
            let mut progress = std::fs::OpenOptions::new()
                .append(true)
                .open(env("PG_PROGRESS"))
                .expect("progress file");
            calls(&dispatch, 0, usize::MAX, || {
                progress.write_all(b"x\n").expect("progress");
            });
        }
        other => panic!("unknown child role {other}"),
    }
}

#[test]
fn eight_processes_write_80000_records_that_verify_and_add_up() {
    let Some(url) = pg::schema_url("audit_80k") else {
        return;
    };
    let store = PgStore::connect(&url).expect("connect");
    store.migrate().expect("migrate");
    let seed = seed();
    let started = Instant::now();
    let children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let writer = format!("proc-{p}");
            child_command(&[
                (CHILD, "writer"),
                ("PG_URL", &url),
                ("PG_WRITER", &writer),
                ("PG_SEED", &seed),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn")
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().expect("child");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("RESULT done"),
            "{stdout}"
        );
    }
    eprintln!(
        "{} audited calls in {:?}",
        PROCESSES * CALLS,
        started.elapsed()
    );

    let trail = store.read_trail().expect("trail");
    // Exactly one record per call that did not run, an intent and an outcome per call that did.
    assert_eq!(
        per_call(&trail.records),
        PROCESSES * CALLS,
        "every call on record"
    );
    let intents = phase_count(&trail.records, Phase::Intent);
    assert_eq!(intents, phase_count(&trail.records, Phase::Outcome));
    assert_eq!(trail.records.len(), PROCESSES * CALLS + intents);
    let key = SecretKey::from_text(&seed).expect("seed").public_key();
    let report = verify_chains(&trail.records, &trail.checkpoints, Some(&key));
    assert!(
        report.is_intact(),
        "{:?}",
        report.writers.iter().find(|w| !w.problems.is_empty())
    );
    assert_eq!(report.writers.len(), PROCESSES);
    for writer in &report.writers {
        assert!(writer.records > CALLS as u64);
        assert_eq!(writer.checkpointed, writer.records, "the final checkpoint");
        assert!(writer.unfinished.is_empty(), "{:?}", writer.unfinished);
    }
    let started = Instant::now();
    let stats = store.daily_stats().expect("stats");
    eprintln!(
        "mcp_daily_stats (a view) over {} rows in {:?}",
        trail.records.len(),
        started.elapsed()
    );
    assert_eq!(stats, stats_of(&trail.records));
}

/// The calls the records stand for: one per record but the intents (a call that ran is its
/// intent and its outcome).
fn per_call(records: &[AuditRecord]) -> usize {
    records.len() - phase_count(records, Phase::Intent)
}

fn phase_count(records: &[AuditRecord], phase: Phase) -> usize {
    records.iter().filter(|r| r.phase == Some(phase)).count()
}

/// `mcp_daily_stats` computed here from the records (`percentile_disc`: the first value whose
/// cumulative share reaches the fraction). A call is counted once: by its intent when it ran,
/// by its one record when it did not; its latency and success are its outcome's.
fn stats_of(records: &[AuditRecord]) -> Vec<DailyStats> {
    let mut groups: BTreeMap<(String, String, String, String), Vec<&AuditRecord>> = BTreeMap::new();
    for r in records {
        let key = (
            r.time[..10].to_owned(),
            r.role.clone(),
            r.provider.clone().unwrap_or_default(),
            r.tool.clone(),
        );
        groups.entry(key).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|((day, role, provider, tool), rs)| {
            let count =
                |f: &dyn Fn(&AuditRecord) -> bool| rs.iter().filter(|r| f(r)).count() as u64;
            let mut latencies: Vec<u64> = rs
                .iter()
                .filter_map(|r| r.latency_us)
                .map(three_digits)
                .collect();
            latencies.sort_unstable();
            let disc = |p: f64| {
                let n = latencies.len();
                (n > 0).then(|| latencies[((p * n as f64).ceil() as usize).clamp(1, n) - 1])
            };
            let call = |r: &AuditRecord| r.phase != Some(Phase::Outcome);
            DailyStats {
                day,
                role,
                provider,
                tool,
                calls: count(&call),
                allowed: count(&|r| call(r) && r.verdict == capability::audit::Verdict::Allowed),
                denied: count(&|r| r.verdict == capability::audit::Verdict::Denied),
                errors: count(&|r| r.success == Some(false)),
                degraded: count(&|r| r.verdict == capability::audit::Verdict::Degraded),
                p50_latency_us: disc(0.5),
                p95_latency_us: disc(0.95),
            }
        })
        .collect()
}

#[test]
fn a_writer_killed_with_sigkill_loses_at_most_the_record_in_flight() {
    let Some(url) = pg::schema_url("sigkill") else {
        return;
    };
    let store = PgStore::connect(&url).expect("connect");
    store.migrate().expect("migrate");
    let seed = seed();
    let progress =
        std::env::temp_dir().join(format!("capability-pg-progress-{}", std::process::id()));
    std::fs::write(&progress, "").expect("progress file");
    let progress_path = progress.display().to_string();
    let vars = [
        (CHILD, "killed"),
        ("PG_URL", url.as_str()),
        ("PG_WRITER", "victim"),
        ("PG_SEED", seed.as_str()),
        ("PG_PROGRESS", progress_path.as_str()),
    ];
    let mut child = child_command(&vars)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read(&progress).map_or(0, |p| p.len()) < 2 * 1_500 {
        assert!(Instant::now() < deadline, "the writer made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let returned = std::fs::read(&progress)
        .expect("progress")
        .iter()
        .filter(|b| **b == b'\n')
        .count();
    let _ = std::fs::remove_file(&progress);

    let trail = store.read_trail().expect("trail");
    let rows = trail.records.len();
    let recorded = per_call(&trail.records);
    assert!(
        recorded == returned || recorded == returned + 1,
        "{recorded} calls recorded for {returned} calls that returned"
    );
    let key = SecretKey::from_text(&seed).expect("seed").public_key();
    let report = verify_chains(&trail.records, &trail.checkpoints, Some(&key));
    assert!(report.is_intact(), "{report:?}");
    // The call in flight when the writer was killed may have its intent and no outcome.
    assert!(report.writers[0].unfinished.len() <= 1, "{report:?}");

    // Restarted, the writer goes on from its last committed record.
    let (dispatch, sink) = dispatch(&store, options("victim", &seed, 1_000));
    calls(&dispatch, 0, 3, || {});
    sink.close().expect("close");
    let trail = store.read_trail().expect("trail");
    assert_eq!(per_call(&trail.records), recorded + 3);
    assert!(trail.records.len() > rows + 3);
    let report = verify_chains(&trail.records, &trail.checkpoints, Some(&key));
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.writers[0].checkpointed, trail.records.len() as u64);
}

#[test]
fn a_cut_tail_and_a_recomputed_chain_are_found_with_the_checkpoint_key() {
    let Some(url) = pg::schema_url("tamper") else {
        return;
    };
    let store = PgStore::connect(&url).expect("connect");
    store.migrate().expect("migrate");
    let seed = seed();
    for writer in ["cut", "recomputed"] {
        let (dispatch, sink) = dispatch(&store, options(writer, &seed, 10));
        calls(&dispatch, 0, 25, || {});
        sink.close()
            .expect("close: a final checkpoint at the last record");
    }
    let key = SecretKey::from_text(&seed).expect("seed").public_key();
    let trail = store.read_trail().expect("trail");
    assert!(verify_chains(&trail.records, &trail.checkpoints, Some(&key)).is_intact());
    let last_cut = trail
        .records
        .iter()
        .filter(|r| r.writer == "cut")
        .map(|r| r.seq)
        .max()
        .expect("records");
    assert!(last_cut > 25, "an intent and an outcome per call that ran");

    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    // An attacker with write access cuts the last records off one chain...
    db.execute(
        "DELETE FROM mcp_audit_log WHERE writer_id = 'cut' AND seq > 20",
        &[],
    )
    .expect("cut");
    // ...and edits a record of the other, computing every later hash again.
    let mut chain: Vec<AuditRecord> = trail
        .records
        .into_iter()
        .filter(|r| r.writer == "recomputed")
        .collect();
    chain[4].tool = "innocent".into();
    for i in 4..chain.len() {
        if i > 4 {
            chain[i].prev = chain[i - 1].hash.clone();
        }
        chain[i].hash = chain[i].compute_hash();
        let seq = chain[i].seq as i64;
        db.execute(
            "UPDATE mcp_audit_log SET tool = $1, prev_hash = $2, hash = $3
             WHERE writer_id = 'recomputed' AND seq = $4",
            &[&chain[i].tool, &chain[i].prev, &chain[i].hash, &seq],
        )
        .expect("rewrite");
    }

    let trail = store.read_trail().expect("trail");
    let unkeyed = verify_chains(&trail.records, &trail.checkpoints, None);
    assert!(
        unkeyed.is_intact(),
        "without the key, both chains look intact"
    );
    let report = verify_chains(&trail.records, &trail.checkpoints, Some(&key));
    let problems = |w: &str| {
        report
            .writers
            .iter()
            .find(|r| r.writer == w)
            .map(|r| r.problems.clone())
            .unwrap_or_default()
    };
    assert!(
        problems("cut").contains(&ChainProblem::TailCut {
            checkpoint_seq: last_cut,
            last_seq: 20
        }),
        "{:?}",
        problems("cut")
    );
    assert!(
        problems("recomputed").contains(&ChainProblem::Recomputed { seq: 10 }),
        "{:?}",
        problems("recomputed")
    );
}

/// An attacker with write access puts a row's genuine record into `record_json` (which the
/// reader prefers) and then changes the columns the statistics and dashboards read. The chain
/// still verifies, from `record_json`; every column that no longer says what the record says is
/// named, with its row.
#[test]
fn a_forged_column_behind_a_genuine_record_json_is_named() {
    let Some(url) = pg::schema_url("forged_columns") else {
        return;
    };
    let store = PgStore::connect(&url).expect("connect");
    store.migrate().expect("migrate");
    let seed = seed();
    let (dispatch, sink) = dispatch(&store, options("forger", &seed, 1_000));
    calls(&dispatch, 0, 8, || {});
    sink.close().expect("close");
    let trail = store.read_trail().expect("trail");
    assert!(trail.problems.is_empty(), "{:?}", trail.problems);
    // The outcome of a call that succeeded.
    let original = trail
        .records
        .iter()
        .find(|r| r.success == Some(true))
        .expect("a call that succeeded")
        .clone();
    assert_eq!(original.verdict, capability::audit::Verdict::Allowed);
    let seq = original.seq as i64;

    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    db.execute(
        "UPDATE mcp_audit_log SET record_json = $1::text::json, tool = 'innocent',
             verdict = 'denied', success = false
         WHERE writer_id = 'forger' AND seq = $2",
        &[&original.to_line(), &seq],
    )
    .expect("forge");

    let trail = store.read_trail().expect("trail");
    let key = SecretKey::from_text(&seed).expect("seed").public_key();
    assert!(
        verify_chains(&trail.records, &trail.checkpoints, Some(&key)).is_intact(),
        "the chain alone, read from record_json, says nothing is wrong"
    );
    let named: Vec<(&str, u64, &str)> = trail
        .problems
        .iter()
        .map(|p| (p.writer.as_str(), p.seq, p.column.as_str()))
        .collect();
    assert_eq!(
        named,
        [
            ("forger", original.seq, "tool"),
            ("forger", original.seq, "verdict"),
            ("forger", original.seq, "success")
        ]
    );
    assert!(
        trail.problems[0].to_string().contains("\"innocent\""),
        "{}",
        trail.problems[0]
    );
    // What the attack was for: the statistics read the forged columns.
    let stats = store.daily_stats().expect("stats");
    assert!(stats.iter().any(|s| s.tool == "innocent"), "{stats:?}");
}

/// A latency as the databases keep it for percentiles: its decimal digits after the third
/// replaced by zeros (so 98765 is 98700, 999 is 999).
fn three_digits(latency: u64) -> u64 {
    let digits = latency.to_string();
    let kept: String = digits
        .char_indices()
        .map(|(i, c)| if i < 3 { c } else { '0' })
        .collect();
    kept.parse().expect("digits")
}
