//! PostgreSQL store: migrations, the ledger, revocations, the audit sink's exact round trip,
//! its chain across restarts and threads, and what bad URLs and credentials give.

use capability_testkit::pg;

use std::sync::{Arc, Barrier};

use capability_audit::{AuditRecord, GENESIS, Verdict, verify_chains};
use capability_gate::Consumed;
use capability_store::postgres::PgStore;
use capability_store::{SCHEMA_VERSION, SinkOptions, Store};
use serde_json::json;

fn store(test: &str) -> Option<PgStore> {
    let url = pg::schema_url(test)?;
    let store = PgStore::connect(&url).expect("connect");
    assert_eq!(store.migrate().expect("migrate"), SCHEMA_VERSION);
    Some(store)
}

/// A record as the dispatcher makes it, before the sink completes it.
fn record(tool: &str, i: u64) -> AuditRecord {
    AuditRecord {
        writer: String::new(),
        seq: 0,
        time: "2026-03-01T12:34:56.789Z".into(),
        agent: "triage-bot".into(),
        call_id: Some(format!("call-{i}")),
        phase: Some(capability::audit::Phase::Intent),
        method: Some("tools/call".into()),
        principal: match i % 3 {
            0 => None,
            1 => Some(capability::audit::Principal::new("token:9f86d081884c")),
            _ => Some(
                capability::audit::Principal::new("alice\u{0}")
                    .client_id("ops-console")
                    .issuer("http://127.0.0.1:9000"),
            ),
        },
        role: "monitor".into(),
        session: "s-1".into(),
        step: Some("triage".into()),
        incident_id: Some("INC-2026-0042".into()),
        provider: Some("k8s".into()),
        tool: tool.into(),
        descriptor_hash: "ab".repeat(32),
        policy_version: Some("v7".into()),
        verdict: Verdict::Allowed,
        reasons: vec![],
        input: json!({"ns": "prod", "i": i}),
        input_digest: format!("hmac-sha256:{}", "cd".repeat(32)),
        input_size: 20,
        output_digest: Some(format!("hmac-sha256:{}", "ef".repeat(32))),
        output_size: Some(3),
        latency_us: Some(100 + i),
        success: Some(true),
        error: None,
        prev: String::new(),
        hash: String::new(),
    }
}

#[test]
fn migrations_are_idempotent_locked_and_refuse_a_newer_schema() {
    let Some(url) = pg::schema_url("migrations") else {
        return;
    };
    // Before migrating, every operation names the command to run.
    let store = PgStore::connect(&url).expect("connect");
    let error = store
        .ledger()
        .consume("a-1", u64::MAX)
        .expect_err("unmigrated");
    assert!(error.message.contains("capability db migrate"), "{error}");
    assert!(!error.to_string().contains(pg::password(&url)), "{error}");
    let error = store
        .audit_sink(SinkOptions::writer("w"))
        .err()
        .expect("unmigrated");
    assert!(
        error.to_string().contains("capability db migrate"),
        "{error}"
    );

    // Eight connections migrating at once: all succeed, one schema, one version row.
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (url, barrier) = (url.clone(), barrier.clone());
            std::thread::spawn(move || {
                let store = PgStore::connect(&url).expect("connect");
                barrier.wait();
                store.migrate()
            })
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().expect("thread"), Ok(SCHEMA_VERSION));
    }
    assert_eq!(store.migrate(), Ok(SCHEMA_VERSION), "again: nothing to do");
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let rows: i64 = client
        .query_one("SELECT count(*) FROM capability_schema_version", &[])
        .expect("count")
        .get(0);
    assert_eq!(rows, i64::from(SCHEMA_VERSION), "one row per migration");
    assert_eq!(store.ledger().consume("a-1", u64::MAX), Ok(Consumed::First));

    // A database a newer build migrated: refused, naming both versions, and left unchanged.
    client
        .execute(
            "INSERT INTO capability_schema_version (version) VALUES (99)",
            &[],
        )
        .expect("insert");
    let error = store.migrate().expect_err("newer");
    assert!(
        error.message.contains("99") && error.message.contains(&SCHEMA_VERSION.to_string()),
        "{error}"
    );
    let fresh = PgStore::connect(&url).expect("connect");
    let error = fresh.ledger().consume("a-2", u64::MAX).expect_err("newer");
    assert!(error.message.contains("newer"), "{error}");
}

#[test]
fn bad_urls_and_credentials_are_clear_errors_without_the_password() {
    let Some(url) = pg::schema_url("bad_urls") else {
        return;
    };
    let password = pg::password(&url).to_owned();
    for bad in [
        "postgres://",
        "postgres://u@h:notaport/db",
        "postgres://u@%ZZ/db",
    ] {
        let error = PgStore::connect(bad).expect_err(bad);
        assert!(!error.message.is_empty(), "{bad}");
    }
    let wrong = url.replace(&password, "not-the-password");
    let error = PgStore::connect(&wrong).expect_err("wrong password");
    assert!(error.message.contains("password"), "{error}");
    assert!(!error.to_string().contains("not-the-password"), "{error}");
    assert!(!error.store.contains("not-the-password"), "{error}");
    let elsewhere = url.replace("%2Ftmp%2F", "%2Ftmp%2Fnowhere-");
    let error = PgStore::connect(&elsewhere).expect_err("no server there");
    assert!(!error.to_string().contains(&password), "{error}");
    let store = PgStore::connect(&url).expect("connect");
    assert!(
        !store.describe().contains(&password),
        "{}",
        store.describe()
    );
    // The password as a parameter: not in the name either.
    let as_parameter = format!(
        "{}&password={password}",
        url.replace(&format!(":{password}@"), "@")
    );
    let store = PgStore::connect(&as_parameter).expect("connect");
    assert!(
        !store.describe().contains(&password),
        "{}",
        store.describe()
    );
    let wrong = as_parameter.replace(&password, "not-the-password");
    let error = PgStore::connect(&wrong).expect_err("wrong password");
    assert!(!error.to_string().contains("not-the-password"), "{error}");
}

#[test]
fn an_approval_is_consumed_once_among_racing_threads() {
    let Some(store) = store("ledger") else {
        return;
    };
    let ledger = store.ledger();
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (ledger, barrier) = (ledger.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                ledger.consume("approval-1", 1_800_000_600)
            })
        })
        .collect();
    let results: Vec<_> = threads
        .into_iter()
        .map(|t| t.join().expect("thread").expect("consume"))
        .collect();
    assert_eq!(results.iter().filter(|r| **r == Consumed::First).count(), 1);
    assert_eq!(ledger.consume("approval-1", 0), Ok(Consumed::Again));
    assert_eq!(ledger.consume("approval-2", u64::MAX), Ok(Consumed::First));
}

#[test]
fn revocations_are_shared_and_ordered() {
    let Some(store) = store("revocations") else {
        return;
    };
    let (a, b) = (store.revocations(), store.revocations());
    assert_eq!(a.revoked_among(&["g1", "g2", "g3"]), Ok(vec![]));
    b.revoke("g3").expect("revoke");
    b.revoke("g1").expect("revoke");
    b.revoke("g1").expect("twice is fine");
    assert_eq!(
        a.revoked_among(&["g1", "g2", "g3"]),
        Ok(vec!["g1".to_owned(), "g3".to_owned()])
    );
}

#[test]
fn records_round_trip_exactly_and_their_chain_verifies() {
    let Some(store) = store("round_trip") else {
        return;
    };
    let sink = store.audit_sink(SinkOptions::writer("w-1")).expect("sink");
    let mut odd = Vec::new();
    let mut r = record("list_pods", 1);
    r.input = json!({"a": 1.0, "b": 1e300, "c": -0.0, "z": [true, null, "\u{0}x"], "é": "ü"});
    odd.push(r);
    let mut r = record("list_pods", 2);
    r.error = Some("bad \u{0} byte".into());
    r.success = Some(false);
    r.output_digest = None;
    r.output_size = None;
    r.agent = "agent\u{0}".into();
    odd.push(r);
    let mut r = record("list_pods", 3);
    r.latency_us = Some(u64::MAX);
    r.input_size = u64::MAX;
    r.incident_id = Some("I".repeat(65));
    odd.push(r);
    let mut r = record("list_pods", 4);
    r.time = "2026-02-30T00:00:00.000Z".into();
    r.verdict = Verdict::Denied;
    r.reasons = vec![
        capability::audit::Reason::text("no \"quotes\" here"),
        capability::audit::Reason::audit_failed("второй \u{0}"),
    ];
    r.step = None;
    r.provider = None;
    r.policy_version = None;
    r.incident_id = None;
    odd.push(r);
    odd.push(record("get_logs", 5));
    let written: Vec<AuditRecord> = odd
        .into_iter()
        .map(|r| sink.append(r).expect("append"))
        .collect();
    assert_eq!(written[0].prev, GENESIS);
    assert_eq!(written[4].seq, 5);
    let trail = store.read_trail().expect("trail");
    // Exactly as written: the same canonical JSON (1.0 and 1 are one number there), so the
    // same hash.
    let lines =
        |records: &[AuditRecord]| records.iter().map(AuditRecord::to_line).collect::<Vec<_>>();
    assert_eq!(
        lines(&trail.records),
        lines(&written),
        "read back exactly as written"
    );
    for record in &trail.records {
        assert_eq!(record.compute_hash(), record.hash, "record {}", record.seq);
    }
    let report = verify_chains(&trail.records, &trail.checkpoints, None);
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.records(), 5);
}

#[test]
fn a_writer_goes_on_from_its_last_record_and_refuses_an_edited_one() {
    let Some(url) = pg::schema_url("resume") else {
        return;
    };
    let store = PgStore::connect(&url).expect("connect");
    store.migrate().expect("migrate");
    for round in 0..2 {
        let sink = store.audit_sink(SinkOptions::writer("w-1")).expect("sink");
        for i in 0..3 {
            let written = sink.append(record("list_pods", i)).expect("append");
            assert_eq!(written.seq, round * 3 + i + 1);
        }
        sink.close().expect("close");
        assert!(sink.append(record("list_pods", 9)).is_err(), "closed");
    }
    let other = store.audit_sink(SinkOptions::writer("w-2")).expect("sink");
    assert_eq!(other.append(record("x", 0)).expect("append").seq, 1);
    let trail = store.read_trail().expect("trail");
    assert!(verify_chains(&trail.records, &[], None).is_intact());
    assert_eq!(trail.records.len(), 7);

    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    client
        .execute(
            "UPDATE mcp_audit_log SET tool = 'edited' WHERE writer_id = 'w-1' AND seq = 6",
            &[],
        )
        .expect("edit");
    let error = store
        .audit_sink(SinkOptions::writer("w-1"))
        .err()
        .expect("refused");
    assert!(error.to_string().contains("edited"), "{error}");
}

#[test]
fn eight_threads_share_one_chain_through_group_commit() {
    let Some(store) = store("group_commit") else {
        return;
    };
    let sink = store.audit_sink(SinkOptions::writer("w-1")).expect("sink");
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let sink = sink.clone();
            std::thread::spawn(move || {
                (0..250)
                    .map(|i| {
                        sink.append(record("list_pods", t * 1000 + i))
                            .expect("append")
                            .seq
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("thread"))
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=2000).collect::<Vec<_>>());
    let trail = store.read_trail().expect("trail");
    assert_eq!(trail.records.len(), 2000);
    assert!(verify_chains(&trail.records, &[], None).is_intact());
}

use crate::support::proposals;

#[test]
fn postgres_kept_proposals_wait_once_and_go_when_used() {
    let Some(store) = store("kept_proposals") else {
        return;
    };
    proposals::kept_proposals_wait_once_and_go_when_used(&store);
}

/// The blocking client runs a runtime of its own: used from a thread of an async runtime (a
/// gateway's, an rmcp server's) it must not try to start it there (which panics), nor close a
/// connection there when the store is dropped.
#[test]
fn postgres_store_used_and_dropped_on_an_async_runtime_thread() {
    let Some(store) = store("on_a_runtime") else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        assert_eq!(
            store.ledger().consume("on-a-runtime", u64::MAX / 2),
            Ok(Consumed::First)
        );
        assert_eq!(store.migrate(), Ok(SCHEMA_VERSION));
        assert!(store.proposals(0).expect("proposals").is_empty());
        let sink = store
            .audit_sink(SinkOptions::writer("on-a-runtime"))
            .expect("sink");
        sink.close().expect("close");
        drop(store);
    });
}

use crate::support::versions;

#[test]
fn postgres_tool_versions_keep_first_last_and_pins() {
    let Some(store) = store("tool_versions") else {
        return;
    };
    versions::tool_versions_keep_first_last_and_pins(&store);
}

/// Also from a session whose search path is not the schema's: the triggers fold into the
/// schema's own sums.
#[test]
fn postgres_daily_stats_follow_every_insert_delete_and_update() {
    let Some(url) = pg::schema_url("stats_follow") else {
        return;
    };
    let store = PgStore::connect(&url).expect("connect");
    store.migrate().expect("migrate");
    let schema = format!("t_stats_follow_{}", std::process::id());
    let base = pg::shared_url().expect("the shared server");
    let client =
        std::sync::Mutex::new(postgres::Client::connect(&base, postgres::NoTls).expect("connect"));
    versions::stats_follow_every_insert_delete_and_update(&store, &|sql| {
        let qualified = sql.replace("mcp_audit_log", &format!("{schema}.mcp_audit_log"));
        client
            .lock()
            .expect("client")
            .batch_execute(&qualified)
            .expect(sql);
    });
}

/// A database at schema 5 with records in its log: migration 6 sums them.
#[test]
fn postgres_migration_6_sums_the_records_already_there() {
    let Some(source_url) = pg::schema_url("schema_6_source") else {
        return;
    };
    let Some(url) = pg::schema_url("at_schema_5") else {
        return;
    };
    let writer = PgStore::connect(&source_url).expect("connect");
    writer.migrate().expect("migrate");
    let sink = writer.audit_sink(SinkOptions::writer("w")).expect("sink");
    for record in versions::varied_records(200) {
        sink.append(record).expect("append");
    }
    sink.close().expect("close");

    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    client
        .batch_execute(
            "CREATE TABLE capability_schema_version (
                 version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        )
        .expect("version table");
    let migrations = [
        include_str!("../../migrations/postgres/0001_init.sql"),
        include_str!("../../migrations/postgres/0002_calls.sql"),
        include_str!("../../migrations/postgres/0003_principal.sql"),
        include_str!("../../migrations/postgres/0004_loop_guards.sql"),
        include_str!("../../migrations/postgres/0005_proposals.sql"),
    ];
    for (i, sql) in migrations.iter().enumerate() {
        client.batch_execute(sql).expect("migration");
        let version = i32::try_from(i + 1).expect("version");
        client
            .execute(
                "INSERT INTO capability_schema_version (version) VALUES ($1)",
                &[&version],
            )
            .expect("version");
    }
    let source_schema = format!("t_schema_6_source_{}", std::process::id());
    client
        .batch_execute(&format!(
            "INSERT INTO mcp_audit_log SELECT * FROM {source_schema}.mcp_audit_log"
        ))
        .expect("copy");
    drop(client);

    let store = PgStore::connect(&url).expect("connect");
    assert_eq!(store.migrate().expect("migrate"), SCHEMA_VERSION);
    let records = store.read_trail().expect("trail").records;
    assert_eq!(records.len(), 200);
    let stats = store.daily_stats().expect("stats");
    assert_eq!(stats, capability_store::DailyStats::from_records(&records));
    assert_eq!(stats, writer.daily_stats().expect("stats"));
}

/// The view is exact with the writers' deltas not yet compacted (what Grafana reads between
/// two compactions), and the same once they are.
#[test]
fn postgres_daily_stats_are_exact_before_and_after_compaction() {
    let Some(url) = pg::schema_url("stats_compaction") else {
        return;
    };
    let store = PgStore::connect(&url).expect("connect");
    store.migrate().expect("migrate");
    let sink = store.audit_sink(SinkOptions::writer("w")).expect("sink");
    for record in versions::varied_records(300) {
        sink.append(record).expect("append");
    }
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let view = |client: &mut postgres::Client| -> Vec<String> {
        client
            .query(
                "SELECT concat_ws('|', day, role, provider, tool, calls, allowed, denied, \
                 errors, degraded, p50_latency_us, p95_latency_us) \
                 FROM mcp_daily_stats ORDER BY day, role, provider, tool",
                &[],
            )
            .expect("view")
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    let deltas = |client: &mut postgres::Client| -> i64 {
        client
            .query_one("SELECT count(*) FROM mcp_daily_count_deltas", &[])
            .expect("deltas")
            .get(0)
    };
    assert!(
        deltas(&mut client) > 0,
        "the writer's deltas wait for compaction"
    );
    let before = view(&mut client);
    let expected =
        capability_store::DailyStats::from_records(&store.read_trail().expect("trail").records);
    assert_eq!(before.len(), expected.len());
    assert_eq!(
        store.daily_stats().expect("stats"),
        expected,
        "compacted, then read"
    );
    assert_eq!(deltas(&mut client), 0);
    assert_eq!(view(&mut client), before);
    sink.close().expect("close");
}
