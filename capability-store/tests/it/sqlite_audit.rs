//! Acceptance, the audit trail on SQLite across real OS processes: several processes call tools
//! through `AuditedDispatch` into one file and leave exactly the expected rows, every writer's
//! chain verifies against its signed checkpoints, `mcp_daily_stats` agrees with a grouping
//! computed here, and a writer killed with SIGKILL loses at most the record in flight.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capability::CapabilityManifest;
use capability::audit::{
    AuditError, AuditRecord, AuditSink, AuditedDispatch, Budget, Caller, CheckpointEvery,
    DigestKey, Outcome, Phase, Verdict, verify_chains,
};
use capability::authz::{Ceiling, ToolContext};
use capability::gate::SecretKey;
use capability_store::sqlite::{SqliteSink, SqliteStore};
use capability_store::{DailyStats, SinkOptions, Store};
use serde_json::json;

const CHILD: &str = "CAPABILITY_STORE_AUDIT_CHILD";
const PROCESSES: usize = 4;
const CALLS: u64 = 300;

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sqlite-audit");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(name);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

fn tool(provider: &str, name: &str, read_only: bool, scope: &str) -> CapabilityManifest {
    let builder = CapabilityManifest::builder(name)
        .provider(provider)
        .scope(scope);
    let builder = if read_only {
        builder.read_only(true)
    } else {
        builder.destructive(false)
    };
    builder.build().expect("tool")
}

fn child(part: &str, db: &Path, key: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    command
        .args([
            "--exact",
            "sqlite_audit::child_process",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD, part)
        .env("CHILD_DB", db)
        .env("CHILD_KEY", key)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

#[test]
fn several_processes_leave_every_row_and_every_chain_verifies() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let db = scratch("processes.db");
    let store = SqliteStore::open(&db).expect("open");
    store.migrate().expect("migrate");
    let key = SecretKey::generate().expect("key");
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| child("calls", &db, &key.to_text()).spawn().expect("spawn"))
        .collect();
    for c in children {
        let output = c.wait_with_output().expect("child");
        assert!(output.status.success(), "{output:?}");
    }
    let trail = store.read_trail().expect("trail");
    // One record per call that did not run, an intent and an outcome per call that did.
    let phase = |p: Phase| trail.records.iter().filter(|r| r.phase == Some(p)).count() as u64;
    let intents = phase(Phase::Intent);
    assert_eq!(intents, phase(Phase::Outcome));
    assert_eq!(
        trail.records.len() as u64,
        PROCESSES as u64 * CALLS + intents
    );
    let report = verify_chains(&trail.records, &trail.checkpoints, Some(&key.public_key()));
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.writers.len(), PROCESSES);
    for writer in &report.writers {
        assert!(writer.records > CALLS);
        assert_eq!(writer.checkpointed, writer.records);
        assert!(writer.unfinished.is_empty());
    }
    let stats = store.daily_stats().expect("stats");
    assert_eq!(stats, group_by(&trail.records));
    let verdicts = |v: Verdict| trail.records.iter().filter(|r| r.verdict == v).count();
    assert!(verdicts(Verdict::Denied) > 0 && verdicts(Verdict::Degraded) > 0);
    assert!(stats.iter().any(|s| s.errors > 0), "{stats:?}");
}

/// `mcp_daily_stats` computed here from the records: GROUP BY day, role, provider, tool, with
/// nearest-rank percentiles of the latencies of the calls that ran.
fn group_by(records: &[AuditRecord]) -> Vec<DailyStats> {
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
    let percentile = |sorted: &[u64], p: f64| -> Option<u64> {
        let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
        sorted.get(rank.max(1) - 1).copied()
    };
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
            // A call once: its intent when it ran, its one record when it did not.
            let call = |r: &AuditRecord| r.phase != Some(Phase::Outcome);
            DailyStats {
                day,
                role,
                provider,
                tool,
                calls: count(&call),
                allowed: count(&|r| call(r) && r.verdict == Verdict::Allowed),
                denied: count(&|r| r.verdict == Verdict::Denied),
                errors: count(&|r| r.success == Some(false)),
                degraded: count(&|r| r.verdict == Verdict::Degraded),
                p50_latency_us: percentile(&latencies, 50.0),
                p95_latency_us: percentile(&latencies, 95.0),
            }
        })
        .collect()
}

#[test]
fn a_writer_killed_with_sigkill_loses_at_most_the_record_in_flight() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let db = scratch("killed.db");
    let store = SqliteStore::open(&db).expect("open");
    store.migrate().expect("migrate");
    let mut writer = child("endless", &db, "").spawn().expect("spawn");
    let stdout = writer.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let acked = |line: &str| {
        line.strip_prefix("ACK ")
            .and_then(|n| n.parse::<u64>().ok())
    };
    let start = Instant::now();
    let mut last = 0;
    while last < 200 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the writer wrote too little"
        );
        let line = lines.next().expect("the writer stopped").expect("line");
        last = acked(&line).unwrap_or(last);
    }
    writer.kill().expect("SIGKILL");
    // Acknowledgements printed before the kill are still in the pipe.
    for line in lines.map_while(Result::ok) {
        last = acked(&line).unwrap_or(last);
    }
    let _ = writer.wait();
    let trail = store.read_trail().expect("trail");
    let report = verify_chains(&trail.records, &trail.checkpoints, None);
    assert!(report.is_intact(), "{report:?}");
    let rows = trail.records.len() as u64;
    assert!(
        rows == last || rows == last + 1,
        "{rows} rows, {last} appends acknowledged: only the record in flight may be lost or unacknowledged"
    );
}

/// A sink that reports each record once `append` returned: what the writer knows is durable.
struct Acking(SqliteSink);

impl AuditSink for Acking {
    fn append(&self, record: AuditRecord) -> Result<AuditRecord, AuditError> {
        let record = self.0.append(record)?;
        println!("ACK {}", record.seq);
        Ok(record)
    }
    fn ready(&self) -> Result<(), AuditError> {
        self.0.ready()
    }
    fn digest_key(&self) -> Result<&DigestKey, AuditError> {
        self.0.digest_key()
    }
}

#[test]
#[ignore = "run by the tests above as a child process"]
fn child_process() {
    let (Ok(part), Some(db)) = (std::env::var(CHILD), std::env::var_os("CHILD_DB")) else {
        return;
    };
    let store = SqliteStore::open(&db).expect("open");
    let mut options = SinkOptions::writer(capability_store::row::new_writer_id());
    if let Ok(text) = std::env::var("CHILD_KEY")
        && !text.is_empty()
    {
        let key = SecretKey::from_text(&text).expect("key");
        let every = CheckpointEvery {
            records: 64,
            interval: Duration::from_secs(3600),
        };
        options.checkpoints = Some((Arc::new(key), every));
    }
    let sink = store.sink(options).expect("sink");
    let list = tool("k8s", "list_pods", true, "k8s:read");
    let restart = tool("k8s", "restart_pod", false, "k8s:write");
    let query = tool("db", "query", true, "db:read");
    let caller = Caller::new("worker").step("triage");
    if part == "endless" {
        let dispatch = AuditedDispatch::new(Arc::new(Acking(sink))).with_budget(Budget {
            max_calls: u32::MAX,
            max_denials: u32::MAX,
        });
        let ctx = ToolContext::new("monitor", "s", Ceiling::ReadOnly).with_scopes(["k8s:read"]);
        for i in 0u64.. {
            let _: Outcome<u64, String> =
                dispatch.call(&ctx, caller, &list, &json!({ "i": i }), || Ok(i));
        }
        return;
    }
    let sink = Arc::new(sink);
    let dispatch = AuditedDispatch::new(sink.clone()).with_budget(Budget {
        max_calls: 50,
        max_denials: u32::MAX,
    });
    for i in 0..CALLS {
        let session = format!("s-{}", i / 60);
        let ctx = if i % 2 == 0 {
            ToolContext::new("monitor", session, Ceiling::ReadOnly).with_scopes(["k8s:read"])
        } else {
            ToolContext::new("analyst", session, Ceiling::ReadOnly)
                .with_scopes(["db:read", "k8s:read"])
        };
        let target = match i % 5 {
            0 => &restart,
            1 | 2 => &query,
            _ => &list,
        };
        let input = json!({ "i": i, "note": "ünïcode ✓" });
        let _: Outcome<u64, String> = dispatch.call(&ctx, caller, target, &input, || {
            // Latencies spread over 0.5 ms, so the percentiles tell ranks apart.
            std::thread::sleep(Duration::from_micros(i * 37 % 500));
            if i % 7 == 3 {
                Err("backend timeout".to_owned())
            } else {
                Ok(i)
            }
        });
    }
    sink.close().expect("close");
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
