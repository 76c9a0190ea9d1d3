//! `capability audit verify` on PostgreSQL reads what it verifies: a row whose columns were
//! changed behind a genuine `record_json` (the columns `audit stats` and the dashboards read)
//! exits 1, naming the row and each column.

use capability_testkit::pg;

use std::sync::Arc;

use capability::CapabilityManifest;
use capability::audit::{AuditedDispatch, Caller, Outcome};
use capability::authz::{Ceiling, ToolContext};
use capability_store::SinkOptions;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_capability");

fn capability(args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(args)
        .output()
        .expect("run capability")
}

#[test]
fn verify_names_each_column_forged_behind_record_json_and_exits_1() {
    let Some(url) = pg::schema_url("cli_forged_columns") else {
        return;
    };
    let migrated = capability(&["db", "migrate", &url]);
    assert!(migrated.status.success(), "{migrated:?}");
    let store = capability_store::open(&url).expect("open");
    let sink = store.audit_sink(SinkOptions::writer("w-1")).expect("sink");
    let dispatch = AuditedDispatch::new(Arc::clone(&sink));
    let list = CapabilityManifest::builder("list_pods")
        .provider("k8s")
        .read_only(true)
        .build()
        .expect("valid");
    let ctx = ToolContext::new("monitor", "s", Ceiling::ReadOnly);
    for i in 0..3u32 {
        let out: Outcome<u32, String> =
            dispatch.call(&ctx, Caller::new("bot"), &list, &json!({ "i": i }), || {
                Ok(i)
            });
        assert!(out.is_done());
    }
    sink.close().expect("close");
    let clean = capability(&["audit", "verify", &url]);
    assert_eq!(clean.status.code(), Some(0), "{clean:?}");

    let trail = store.read_trail().expect("trail");
    let outcome = trail.records[1].clone();
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    db.execute(
        "UPDATE mcp_audit_log SET record_json = $1::text::json, tool = 'innocent',
             success = false WHERE writer_id = 'w-1' AND seq = 2",
        &[&outcome.to_line()],
    )
    .expect("forge");

    let out = capability(&["audit", "verify", &url]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    for column in ["tool", "success"] {
        assert!(
            stdout.contains(&format!("row of writer `w-1`, seq 2: column `{column}`")),
            "{stdout}"
        );
    }
    assert!(stdout.contains("NOT intact"), "{stdout}");
    let out = capability(&["audit", "verify", &url, "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["intact"], false);
    assert_eq!(report["rows"].as_array().map(Vec::len), Some(2), "{report}");
}
