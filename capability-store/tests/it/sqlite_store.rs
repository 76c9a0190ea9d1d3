//! The SQLite store on its own: migrations, bad input, the ledger, revocations, the record
//! round trip, the sink's chain, resume, failure and retry, checkpoints and tampering.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capability::audit::Reason;
use capability::audit::{
    AuditRecord, AuditSink, ChainProblem, CheckpointEvery, GENESIS, Verdict, verify_chains,
};
use capability::gate::{ApprovalLedger, Consumed, PublicKey, SecretKey};
use capability_store::sqlite::SqliteStore;
use capability_store::{SCHEMA_VERSION, SinkOptions, Store};
use serde_json::json;

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sqlite-store");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(name);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

fn migrated(name: &str) -> (PathBuf, SqliteStore) {
    let path = scratch(name);
    let store = SqliteStore::open(&path).expect("open");
    assert_eq!(store.migrate().expect("migrate"), SCHEMA_VERSION);
    (path, store)
}

fn record(i: u64) -> AuditRecord {
    AuditRecord {
        writer: String::new(),
        seq: 0,
        time: "2026-03-01T10:00:00.123Z".to_owned(),
        agent: "triage-bot".to_owned(),
        call_id: Some(format!("call-{i}")),
        phase: i
            .is_multiple_of(2)
            .then_some(capability::audit::Phase::Outcome),
        method: i.is_multiple_of(3).then(|| "resources/read".to_owned()),
        principal: match i % 3 {
            0 => None,
            1 => Some(capability::audit::Principal::new("token:9f86d081884c")),
            _ => Some(
                capability::audit::Principal::new("alice")
                    .client_id("ops-console")
                    .issuer("http://127.0.0.1:9000"),
            ),
        },
        role: "monitor".to_owned(),
        session: format!("s-{i}"),
        step: Some("triage".to_owned()),
        incident_id: Some("INC-2026-0042".to_owned()),
        provider: Some("k8s".to_owned()),
        tool: "list_pods".to_owned(),
        descriptor_hash: "ab".repeat(32),
        policy_version: Some("v7".to_owned()),
        verdict: Verdict::Allowed,
        reasons: vec![],
        input: json!({ "i": i }),
        input_digest: format!("hmac-sha256:{}", "00".repeat(32)),
        input_size: 7,
        output_digest: Some(format!("hmac-sha256:{}", "11".repeat(32))),
        output_size: Some(12),
        latency_us: Some(100 + i),
        success: Some(true),
        error: None,
        prev: String::new(),
        hash: String::new(),
    }
}

#[test]
fn operations_on_an_unmigrated_database_say_to_migrate() {
    let path = scratch("unmigrated.db");
    let store = SqliteStore::open(&path).expect("open");
    let error = store.ledger().consume("a", 1).expect_err("not migrated");
    assert!(error.message.contains("capability db migrate"), "{error}");
    assert!(store.read_trail().is_err());
    assert!(store.daily_stats().is_err());
    assert!(store.revocations().revoke("g").is_err());
    let Err(error) = store.audit_sink(SinkOptions::writer("w")) else {
        panic!("a sink on an unmigrated database")
    };
    assert!(
        error.to_string().contains("capability db migrate"),
        "{error}"
    );
}

#[test]
fn migrate_is_idempotent_and_a_newer_schema_is_refused() {
    let (path, store) = migrated("newer.db");
    assert_eq!(store.migrate().expect("again"), SCHEMA_VERSION);
    // Another build migrated it further.
    exec(
        &path,
        "INSERT INTO capability_schema_version VALUES (99, 'later')",
    )
    .expect("a newer schema");
    let fresh = SqliteStore::open(&path).expect("open");
    let error = fresh.migrate().expect_err("newer");
    assert!(
        error.message.contains("99") && error.message.contains(&SCHEMA_VERSION.to_string()),
        "{error}"
    );
    let error = fresh.ledger().consume("a", 1).expect_err("newer");
    assert!(error.message.contains("schema version 99"), "{error}");
}

/// A busy timeout past what the clock can hold (`Duration::MAX`: wait as long as it takes) opens,
/// migrates and records; before, opening a new file panicked adding it to the clock.
#[test]
fn a_busy_timeout_past_the_clock_is_no_bound_and_panics_nothing() {
    let path = scratch("unbounded.db");
    let store = SqliteStore::open_with_timeout(&path, Duration::MAX).expect("open");
    assert_eq!(store.migrate().expect("migrate"), SCHEMA_VERSION);
    let sink = store
        .audit_sink(SinkOptions::writer("unbounded"))
        .expect("sink");
    sink.append(record(1)).expect("append");
    assert_eq!(
        count(&path, "SELECT count(*) FROM mcp_audit_log").expect("count"),
        1
    );
}

/// Runs raw SQL on the file, as another process (or an attacker with write access) would.
fn exec(path: &PathBuf, sql: &str) -> rusqlite::Result<()> {
    rusqlite::Connection::open(path)?.execute_batch(sql)
}

fn count(path: &PathBuf, sql: &str) -> rusqlite::Result<i64> {
    rusqlite::Connection::open(path)?.query_row(sql, [], |row| row.get(0))
}

/// Holds the database's write lock until dropped.
fn hold_write_lock(path: &PathBuf) -> rusqlite::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open(path)?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    Ok(conn)
}

#[test]
fn concurrent_migrations_apply_once() {
    let path = scratch("concurrent-migrate.db");
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || SqliteStore::open(&path).and_then(|s| s.migrate()))
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().expect("thread"), Ok(SCHEMA_VERSION));
    }
    let rows = count(&path, "SELECT COUNT(*) FROM capability_schema_version").expect("count");
    assert_eq!(rows, i64::from(SCHEMA_VERSION), "one row per migration");
}

#[test]
fn a_directory_or_a_foreign_file_is_a_clear_error() {
    let dir = scratch("a-directory");
    std::fs::create_dir_all(&dir).expect("dir");
    let error = SqliteStore::open(&dir).expect_err("directory");
    assert!(error.message.contains("directory"), "{error}");
    let text = scratch("not-a-db.txt");
    std::fs::write(&text, "hello, this is not a database at all\n").expect("write");
    let error = SqliteStore::open(&text).expect_err("text file");
    assert!(error.message.contains("not a SQLite database"), "{error}");
    let missing = scratch("no-such-dir").join("sub").join("state.db");
    let error = SqliteStore::open(&missing).expect_err("missing directory");
    assert!(error.message.contains("cannot open"), "{error}");
    assert!(error.store.starts_with("sqlite:"), "{error}");
}

#[test]
fn the_ledger_consumes_once_across_stores_and_restarts() {
    let (path, store) = migrated("ledger.db");
    let other = SqliteStore::open(&path).expect("second store");
    assert_eq!(
        store.ledger().consume("ap-1", u64::MAX),
        Ok(Consumed::First)
    );
    assert_eq!(
        other.ledger().consume("ap-1", u64::MAX),
        Ok(Consumed::Again)
    );
    drop((store, other));
    let restarted = SqliteStore::open(&path).expect("restarted");
    assert_eq!(restarted.ledger().consume("ap-1", 5), Ok(Consumed::Again));
    assert_eq!(restarted.ledger().consume("ap-2", 5), Ok(Consumed::First));
    // Pruning forgets only ids expired more than a day ago.
    let ledger = restarted.sqlite_ledger();
    assert_eq!(ledger.prune(5 + 86_400), Ok(0));
    assert_eq!(ledger.prune(6 + 86_400), Ok(1));
    assert_eq!(ledger.consume("ap-1", u64::MAX), Ok(Consumed::Again));
}

#[test]
fn a_database_locked_beyond_the_timeout_is_an_error_not_a_consumption() {
    let (path, _store) = migrated("locked.db");
    let impatient = SqliteStore::open_with_timeout(&path, Duration::from_millis(50)).expect("open");
    let ledger = impatient.ledger();
    let revocations = impatient.revocations();
    let lock = hold_write_lock(&path).expect("lock");
    let error = ledger.consume("ap-locked", u64::MAX).expect_err("locked");
    assert!(error.message.contains("locked"), "{error}");
    assert!(revocations.revoke("g").is_err());
    drop(lock);
    // Not consumed by the failed attempt.
    assert_eq!(ledger.consume("ap-locked", u64::MAX), Ok(Consumed::First));
}

#[test]
fn revocations_are_seen_by_every_store_at_once() {
    let (path, a) = migrated("revocations.db");
    let b = SqliteStore::open(&path).expect("second store");
    assert_eq!(b.revocations().revoked_among(&["g1", "g2"]), Ok(vec![]));
    a.revocations().revoke("g2").expect("revoke");
    a.revocations()
        .revoke("g2")
        .expect("revoking twice is fine");
    assert_eq!(
        b.revocations().revoked_among(&["g1", "g2", "g3"]),
        Ok(vec!["g2".to_owned()])
    );
    assert_eq!(b.revocations().revoked_among(&[]), Ok(vec![]));
}

#[test]
fn records_round_trip_exactly() {
    let (_path, store) = migrated("roundtrip.db");
    let sink = store.sink(SinkOptions::writer("w-rt")).expect("sink");
    let mut wild = record(1);
    wild.agent = "agent-ü-日本-🦀".to_owned();
    wild.input = json!({
        "nested": { "list": [1, -2, 3.5, null, true, "ß"], "empty": {}, "deep": [[[]]] },
        "big": u64::MAX, "neg": i64::MIN, "float": 1e-7, "quote": "\"'\\\n\t",
    });
    wild.reasons = vec![
        Reason::text("tool `x` is not allowed"),
        Reason::text("ümlaut"),
        Reason::deny(&capability::authz::DenyReason::NotAllowed),
    ];
    let mut bare = record(2);
    bare.step = None;
    bare.incident_id = None;
    bare.provider = None;
    bare.policy_version = None;
    bare.verdict = Verdict::Denied;
    bare.output_digest = None;
    bare.output_size = None;
    bare.latency_us = None;
    bare.success = None;
    let mut failed = record(3);
    failed.success = Some(false);
    failed.error = Some("apiserver timeout".to_owned());
    failed.verdict = Verdict::AuditFailed;
    let written: Vec<AuditRecord> = [wild, bare, failed]
        .into_iter()
        .map(|r| sink.append(r).expect("append"))
        .collect();
    assert_eq!(written[0].prev, GENESIS);
    assert_eq!(written[1].prev, written[0].hash);
    let trail = store.read_trail().expect("trail");
    assert_eq!(trail.records, written);
    for r in &trail.records {
        assert_eq!(r.compute_hash(), r.hash);
        assert_eq!(r.writer, "w-rt");
    }
}

#[test]
fn an_incident_id_over_64_characters_is_refused_and_not_in_the_chain() {
    let (_path, store) = migrated("incident.db");
    let sink = store.sink(SinkOptions::writer("w")).expect("sink");
    let mut long = record(1);
    long.incident_id = Some("I".repeat(65));
    assert!(sink.append(long).is_err());
    sink.append(record(2)).expect("the next record is fine");
    assert_eq!(store.read_trail().expect("trail").records[0].seq, 1);
}

#[test]
fn a_sink_resumes_its_writer_chain() {
    let (_path, store) = migrated("resume.db");
    let first = store.sink(SinkOptions::writer("w-resume")).expect("sink");
    let a = first.append(record(1)).expect("append");
    drop(first);
    let second = store.sink(SinkOptions::writer("w-resume")).expect("sink");
    let b = second.append(record(2)).expect("append");
    assert_eq!((b.seq, b.prev.as_str()), (2, a.hash.as_str()));
    let other = store.sink(SinkOptions::writer("w-other")).expect("sink");
    assert_eq!(other.append(record(3)).expect("append").seq, 1);
    let trail = store.read_trail().expect("trail");
    assert!(verify_chains(&trail.records, &trail.checkpoints, None).is_intact());
}

#[test]
fn a_failed_commit_is_not_in_the_chain_and_the_next_record_follows_the_last_committed() {
    let (path, store) = migrated("retry.db");
    let impatient = SqliteStore::open_with_timeout(&path, Duration::from_millis(50)).expect("open");
    let sink = impatient
        .sink(SinkOptions::writer("w-retry"))
        .expect("sink");
    let lock = hold_write_lock(&path).expect("lock");
    let error = sink.append(record(1)).expect_err("locked");
    assert!(error.to_string().contains("locked"), "{error}");
    drop(lock);
    let first = sink.append(record(2)).expect("append");
    assert_eq!(
        (first.seq, first.prev.as_str()),
        (1, GENESIS),
        "the record whose commit failed is not in the chain"
    );
    // In the middle of a chain too: the next record follows the last one committed.
    let lock = hold_write_lock(&path).expect("lock");
    assert!(sink.append(record(3)).is_err());
    drop(lock);
    let second = sink.append(record(4)).expect("append");
    assert_eq!((second.seq, second.prev.as_str()), (2, first.hash.as_str()));
    let trail = store.read_trail().expect("trail");
    assert_eq!(trail.records.len(), 2);
    assert!(verify_chains(&trail.records, &[], None).is_intact());
}

fn signed_trail(name: &str) -> (PathBuf, SqliteStore, PublicKey) {
    let (path, store) = migrated(name);
    let key = SecretKey::generate().expect("key");
    let public = key.public_key();
    let mut options = SinkOptions::writer("w-signed");
    options.checkpoints = Some((
        Arc::new(key),
        CheckpointEvery {
            records: 4,
            interval: Duration::from_secs(3600),
        },
    ));
    let sink = store.sink(options).expect("sink");
    for i in 0..10 {
        sink.append(record(i)).expect("append");
    }
    sink.close().expect("close");
    assert!(sink.append(record(99)).is_err(), "closed");
    (path, store, public)
}

#[test]
fn checkpoints_vouch_for_the_chain() {
    let (_path, store, key) = signed_trail("signed.db");
    let trail = store.read_trail().expect("trail");
    let seqs: Vec<u64> = trail.checkpoints.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, vec![4, 8, 10]);
    let report = verify_chains(&trail.records, &trail.checkpoints, Some(&key));
    assert!(report.is_intact(), "{report:?}");
}

#[test]
fn a_cut_tail_is_detected_with_the_key() {
    let (path, store, key) = signed_trail("tail-cut.db");
    exec(&path, "DELETE FROM mcp_audit_log WHERE seq > 8").expect("cut");
    let trail = store.read_trail().expect("trail");
    // Without the key the shorter chain looks whole; with it, the cut shows.
    assert!(verify_chains(&trail.records, &trail.checkpoints, None).is_intact());
    let report = verify_chains(&trail.records, &trail.checkpoints, Some(&key));
    assert!(
        report.writers[0].problems.contains(&ChainProblem::TailCut {
            checkpoint_seq: 10,
            last_seq: 8
        }),
        "{report:?}"
    );
}

#[test]
fn a_recomputed_chain_is_detected_with_the_key() {
    let (path, store, key) = signed_trail("recomputed.db");
    let mut records = store.read_trail().expect("trail").records;
    // The attacker edits record 6 and computes every later hash again.
    records[5].input = json!({ "i": "forged" });
    for i in 5..records.len() {
        records[i].prev = records[i - 1].hash.clone();
        records[i].hash = records[i].compute_hash();
        exec(
            &path,
            &format!(
                "UPDATE mcp_audit_log SET input = '{}', prev_hash = '{}', hash = '{}' WHERE seq = {}",
                capability_store::row::input_json(&records[i].input),
                records[i].prev,
                records[i].hash,
                records[i].seq
            ),
        )
        .expect("update");
    }
    let trail = store.read_trail().expect("trail");
    assert!(verify_chains(&trail.records, &trail.checkpoints, None).is_intact());
    let report = verify_chains(&trail.records, &trail.checkpoints, Some(&key));
    let problems = &report.writers[0].problems;
    assert!(
        problems.contains(&ChainProblem::Recomputed { seq: 8 }),
        "{problems:?}"
    );
    assert!(
        problems.contains(&ChainProblem::Recomputed { seq: 10 }),
        "{problems:?}"
    );
}

use crate::support::proposals;

#[test]
fn sqlite_kept_proposals_wait_once_and_go_when_used() {
    let (_path, store) = migrated("proposals");
    proposals::kept_proposals_wait_once_and_go_when_used(&store);
}

use crate::support::versions;

#[test]
fn sqlite_tool_versions_keep_first_last_and_pins() {
    let (_path, store) = migrated("tool_versions");
    versions::tool_versions_keep_first_last_and_pins(&store);
}

#[test]
fn sqlite_daily_stats_follow_every_insert_delete_and_update() {
    let (path, store) = migrated("stats_follow");
    let conn = rusqlite::Connection::open(&path).expect("open");
    versions::stats_follow_every_insert_delete_and_update(&store, &|sql| {
        conn.execute_batch(sql).expect(sql);
    });
}

/// A database at schema 5 with records in its log: after migration 6 its `mcp_daily_stats`
/// is what the records give (the first read folds them into the sums), and records written
/// after add to them.
#[test]
fn sqlite_migration_6_sums_the_records_already_there() {
    let path = scratch("at_schema_5.db");
    let conn = rusqlite::Connection::open(&path).expect("open");
    let migrations = [
        include_str!("../../migrations/sqlite/0001_init.sql"),
        include_str!("../../migrations/sqlite/0002_calls.sql"),
        include_str!("../../migrations/sqlite/0003_principal.sql"),
        include_str!("../../migrations/sqlite/0004_loop_guards.sql"),
        include_str!("../../migrations/sqlite/0005_proposals.sql"),
    ];
    conn.execute_batch(
        "CREATE TABLE capability_schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
    )
    .expect("version table");
    for (i, sql) in migrations.iter().enumerate() {
        conn.execute_batch(sql).expect("migration");
        conn.execute(
            "INSERT INTO capability_schema_version VALUES (?1, '2026-01-01T00:00:00Z')",
            [i + 1],
        )
        .expect("version");
    }
    // The records, written by a store at this build's schema, copied into the old log.
    let (source, writer) = migrated("schema_6_source.db");
    let sink = writer.audit_sink(SinkOptions::writer("w")).expect("sink");
    for record in versions::varied_records(200) {
        sink.append(record).expect("append");
    }
    sink.close().expect("close");
    conn.execute("ATTACH ?1 AS source", [source.display().to_string()])
        .expect("attach");
    conn.execute_batch(
        "INSERT INTO main.mcp_audit_log SELECT * FROM source.mcp_audit_log; DETACH source",
    )
    .expect("copy");
    drop(conn);

    let store = SqliteStore::open(&path).expect("open");
    assert_eq!(store.migrate().expect("migrate"), SCHEMA_VERSION);
    let records = store.read_trail().expect("trail").records;
    assert_eq!(records.len(), 200);
    let stats = store.daily_stats().expect("stats");
    assert_eq!(stats, capability_store::DailyStats::from_records(&records));
    assert_eq!(stats, writer.daily_stats().expect("stats"));
    let more = store
        .audit_sink(SinkOptions::writer("later"))
        .expect("sink");
    for record in versions::varied_records(50) {
        more.append(record).expect("append");
    }
    more.close().expect("close");
    let records = store.read_trail().expect("trail").records;
    assert_eq!(
        store.daily_stats().expect("stats"),
        capability_store::DailyStats::from_records(&records)
    );
}

const CHILD: &str = "CAPABILITY_SQLITE_STORE_CHILD";

/// Run by `a_second_open_keeps_the_processs_locks_so_no_record_is_lost` in another process:
/// counts the log's rows on standard output and closes its connection (the last one, if it
/// thinks so, checkpoints the WAL and deletes it).
#[test]
#[ignore = "run by a test above as a child process"]
fn child_counts_and_closes() {
    let Some(path) = std::env::var_os(CHILD) else {
        return;
    };
    let conn = rusqlite::Connection::open(path).expect("open");
    let n: i64 = conn
        .query_row("SELECT count(*) FROM mcp_audit_log", [], |row| row.get(0))
        .expect("count");
    println!("ROWS {n}");
    drop(conn);
}

/// What another process counts in the log.
fn counted_elsewhere(path: &std::path::Path) -> i64 {
    let output = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "sqlite_store::child_counts_and_closes",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD, path)
        .output()
        .expect("child");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("ROWS ").and_then(|n| n.parse().ok()))
        .expect("a count")
}

/// A process that opens its store a second time (a gateway's trail, its approval ledger and
/// its tool versions are one file), and asks a file's kind, keeps its locks on the file:
/// another process that reads and closes in between does not delete the WAL under its
/// writer, so the records appended afterwards are seen by the next process (and would survive
/// the writer being killed).
#[test]
fn a_second_open_keeps_the_processs_locks_so_no_record_is_lost() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let (path, store) = migrated("second_open.db");
    let sink = store.audit_sink(SinkOptions::writer("w")).expect("sink");
    for i in 0..10 {
        sink.append(record(i)).expect("append");
    }
    let again = SqliteStore::open(&path).expect("open again");
    again.tool_versions(None, None).expect("read");
    assert_eq!(
        capability_store::target_kind(&path.display().to_string()),
        capability_store::TargetKind::Sqlite
    );
    assert_eq!(counted_elsewhere(&path), 10);
    for i in 10..20 {
        sink.append(record(i)).expect("append");
    }
    assert_eq!(
        counted_elsewhere(&path),
        20,
        "the records appended after another process closed are not in the database"
    );
    sink.close().expect("close");
}

/// The view is exact with nothing folded yet (the whole log its tail), and the same once the
/// store folded the tail into the sums.
#[test]
fn sqlite_daily_stats_are_exact_before_and_after_folding() {
    let (path, store) = migrated("stats_folding.db");
    let sink = store.audit_sink(SinkOptions::writer("w")).expect("sink");
    for record in versions::varied_records(300) {
        sink.append(record).expect("append");
    }
    let conn = rusqlite::Connection::open(&path).expect("open");
    let view = || -> Vec<String> {
        let mut statement = conn
            .prepare(
                "SELECT concat_ws('|', day, role, provider, tool, calls, allowed, denied, \
                 errors, degraded, p50_latency_us, p95_latency_us) \
                 FROM mcp_daily_stats ORDER BY day, role, provider, tool",
            )
            .expect("view");
        statement
            .query_map([], |row| row.get(0))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("rows")
    };
    let folded = || -> i64 {
        conn.query_row("SELECT last_rowid FROM mcp_daily_folded", [], |row| {
            row.get(0)
        })
        .expect("mark")
    };
    assert_eq!(folded(), 0, "nothing folded yet");
    let before = view();
    let expected =
        capability_store::DailyStats::from_records(&store.read_trail().expect("trail").records);
    assert_eq!(before.len(), expected.len());
    assert_eq!(
        store.daily_stats().expect("stats"),
        expected,
        "folded, then read"
    );
    assert_eq!(folded(), 300);
    assert_eq!(view(), before);
    sink.close().expect("close");
}
