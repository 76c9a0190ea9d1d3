//! The same checks of `mcp_tool_versions` and of the maintained `mcp_daily_stats` on every
//! store.

use capability_audit::{AuditRecord, Phase, Verdict};
use capability_store::{DailyStats, SinkOptions, Store, ToolHash};
use serde_json::json;

fn tool(server: &str, tool: &str, hash: &str) -> ToolHash {
    ToolHash {
        server: server.to_owned(),
        tool: tool.to_owned(),
        descriptor_hash: hash.repeat(64 / hash.len()),
    }
}

/// A row as the test compares it: server, tool, the hash's first digit, first seen, last
/// seen, pinned by, pinned at.
type Seen<'a> = (
    &'a str,
    &'a str,
    char,
    u64,
    u64,
    Option<&'a str>,
    Option<u64>,
);

/// A descriptor is first seen once and last seen at its latest sighting (an older sighting
/// does not move it back); a changed descriptor is a row of its own; a pin records who and
/// when, and a later sighting keeps the pin; the filters select a server and a tool.
pub fn tool_versions_keep_first_last_and_pins(store: &dyn Store) {
    let v1 = [
        tool("git", "git_status", "a"),
        tool("git", "git_reset", "b"),
    ];
    store.saw_tools(&v1, 1_000).expect("seen");
    store.saw_tools(&v1, 2_000).expect("seen again");
    store.saw_tools(&v1[..1], 1_500).expect("an older sighting");
    store
        .pinned_tools(&[tool("git", "git_reset", "b")], "alice", 2_500)
        .expect("pinned");
    // The descriptor of git_reset changed, then the server was seen again.
    store
        .saw_tools(
            &[tool("git", "git_reset", "c"), tool("time", "now", "d")],
            3_000,
        )
        .expect("changed");
    store.saw_tools(&v1[1..], 3_500).expect("the old one again");

    let all = store.tool_versions(None, None).expect("read");
    let rows: Vec<Seen<'_>> = all
        .iter()
        .map(|v| {
            (
                v.server.as_str(),
                v.tool.as_str(),
                v.descriptor_hash.chars().next().unwrap_or('?'),
                v.first_seen,
                v.last_seen,
                v.pinned_by.as_deref(),
                v.pinned_at,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "git",
                "git_reset",
                'b',
                1_000,
                3_500,
                Some("alice"),
                Some(2_500)
            ),
            ("git", "git_reset", 'c', 3_000, 3_000, None, None),
            ("git", "git_status", 'a', 1_000, 2_000, None, None),
            ("time", "now", 'd', 3_000, 3_000, None, None),
        ]
    );
    assert_eq!(
        store.tool_versions(Some("time"), None).expect("read").len(),
        1
    );
    assert_eq!(
        store
            .tool_versions(Some("git"), Some("git_reset"))
            .expect("read")
            .len(),
        2
    );
    assert!(
        store
            .tool_versions(None, Some("nothing"))
            .expect("read")
            .is_empty()
    );
    // A pin again moves the pin, not the first sighting.
    store
        .pinned_tools(&[tool("git", "git_reset", "b")], "bob", 4_000)
        .expect("pinned again");
    let again = store
        .tool_versions(Some("git"), Some("git_reset"))
        .expect("read");
    assert_eq!(again[0].pinned_by.as_deref(), Some("bob"));
    assert_eq!(
        (again[0].first_seen, again[0].last_seen, again[0].pinned_at),
        (1_000, 4_000, Some(4_000))
    );
}

/// Records over three days, two roles, two providers (one none), every verdict, both phases,
/// latencies from 0 to hours, some failed.
pub fn varied_records(n: u64) -> Vec<AuditRecord> {
    (0..n)
        .map(|i| AuditRecord {
            writer: String::new(),
            seq: 0,
            time: format!("2026-03-0{}T23:59:59.{:03}Z", 1 + i % 3, i % 1000),
            agent: "bot".to_owned(),
            call_id: Some(format!("call-{}", i / 2)),
            phase: match i % 4 {
                0 => None,
                1 => Some(Phase::Intent),
                _ => Some(Phase::Outcome),
            },
            method: None,
            principal: None,
            role: ["monitor", "operator"][(i / 3 % 2) as usize].to_owned(),
            session: "s".to_owned(),
            step: None,
            incident_id: None,
            provider: [Some("k8s".to_owned()), None][(i / 5 % 2) as usize].clone(),
            tool: ["list_pods", "restart"][(i / 7 % 2) as usize].to_owned(),
            descriptor_hash: "ab".repeat(32),
            policy_version: None,
            verdict: [Verdict::Allowed, Verdict::Denied, Verdict::Degraded][(i / 11 % 3) as usize],
            reasons: vec![],
            input: json!({ "i": i }),
            input_digest: format!("hmac-sha256:{}", "00".repeat(32)),
            input_size: 7,
            output_digest: None,
            output_size: None,
            latency_us: (i % 6 != 0).then(|| {
                (i * 7_919 * (1 + i % 5)).wrapping_pow(1 + (i % 3) as u32) % 20_000_000_000
            }),
            success: [None, Some(true), Some(false)][(i / 2 % 3) as usize],
            error: None,
            prev: String::new(),
            hash: String::new(),
        })
        .collect()
}

/// `mcp_daily_stats` follows the log as records are written, deleted and edited (by anyone
/// with SQL: `exec` runs a statement on the store's database), and always equals the stats
/// computed from the records the log holds.
pub fn stats_follow_every_insert_delete_and_update(store: &dyn Store, exec: &dyn Fn(&str)) {
    let check = |when: &str| {
        let records = store.read_trail().expect("trail").records;
        let stats = store.daily_stats().expect("stats");
        assert_eq!(stats, DailyStats::from_records(&records), "{when}");
        records.len()
    };
    let sink = store.audit_sink(SinkOptions::writer("w")).expect("sink");
    for record in varied_records(300) {
        sink.append(record).expect("append");
    }
    assert_eq!(check("after 300 appends"), 300);
    let stats = store.daily_stats().expect("stats");
    assert_eq!(stats.len(), 3 * 2 * 2 * 2, "{stats:?}");
    assert!(
        stats.iter().any(|s| s.p95_latency_us > Some(1_000_000)),
        "latencies over a second are rounded, not lost: {stats:?}"
    );
    exec("DELETE FROM mcp_audit_log WHERE seq % 3 = 0");
    assert_eq!(check("after deleting a third"), 200);
    exec(
        "UPDATE mcp_audit_log SET agent_role = 'edited', latency_us = latency_us + 1 WHERE seq % 5 = 0",
    );
    check("after editing a fifth");
    // The newest records go, and new ones follow (SQLite gives them the rowids freed).
    exec("DELETE FROM mcp_audit_log WHERE seq > (SELECT max(seq) - 20 FROM mcp_audit_log)");
    check("after deleting the newest");
    for record in varied_records(30) {
        sink.append(record).expect("append");
    }
    check("after appending again");
    exec("DELETE FROM mcp_audit_log WHERE tool = 'restart'");
    check("after deleting a tool's records");
    assert!(
        store
            .daily_stats()
            .expect("stats")
            .iter()
            .all(|s| s.tool != "restart"),
        "a key with no records left is not a row"
    );
    exec("DELETE FROM mcp_audit_log");
    assert!(store.daily_stats().expect("stats").is_empty());
    sink.close().expect("close");
}
