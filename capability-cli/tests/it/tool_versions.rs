//! `mcp_tool_versions` from the command line: `capability pin --store` records who pinned
//! which descriptor, a gateway whose trail is a store records every descriptor it serves from
//! (a changed one as a row of its own), and `capability tools history` reads them.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use proxy_common::{BIN, scratch};

fn capability(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("runs")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn history(dir: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["tools", "history", "store.db", "--json"];
    args.extend_from_slice(extra);
    ok(&capability(dir, &args))
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON row"))
        .collect()
}

fn tools(description: &str) -> String {
    json!({ "tools": [
        { "name": "read_file", "description": "Reads a file.",
          "inputSchema": { "type": "object" }, "annotations": { "readOnlyHint": true } },
        { "name": "write_file", "description": description,
          "inputSchema": { "type": "object" } },
    ]})
    .to_string()
}

/// Whether the lockfile pins this descriptor hash.
fn locked(dir: &Path, hash: &Value) -> bool {
    let lock = std::fs::read_to_string(dir.join("capability.lock")).expect("lock");
    let hash = hash.as_str().expect("a hash");
    hash.len() == 64 && lock.contains(hash)
}

#[test]
fn pin_with_a_store_records_who_pinned_each_descriptor_and_history_reads_it() {
    let dir = scratch("tool-versions-pin", "");
    std::fs::write(dir.join("tools.json"), tools("Writes a file.")).expect("tools");
    // Not a store yet: refused before the lockfile is written.
    let refused = capability(
        &dir,
        &[
            "pin",
            "--server",
            "fs",
            "--store",
            "store.db",
            "--by",
            "alice",
            "tools.json",
        ],
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("capability db migrate"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!dir.join("capability.lock").exists());

    ok(&capability(&dir, &["db", "migrate", "store.db"]));
    ok(&capability(
        &dir,
        &[
            "pin",
            "--server",
            "fs",
            "--store",
            "store.db",
            "--by",
            "alice",
            "tools.json",
        ],
    ));
    let rows = history(&dir, &[]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in &rows {
        assert_eq!(row["server"], "fs");
        assert_eq!(row["pinned_by"], "alice");
        assert!(locked(&dir, &row["descriptor_hash"]), "{row}");
        assert_eq!(row["first_seen"], row["pinned_at"]);
    }

    // The write tool's descriptor changes; bob pins it again: a second row, the first kept.
    std::fs::write(dir.join("tools.json"), tools("Writes any file, anywhere.")).expect("tools");
    ok(&capability(
        &dir,
        &[
            "pin",
            "--server",
            "fs",
            "--store",
            "store.db",
            "--by",
            "bob",
            "tools.json",
        ],
    ));
    let writes = history(&dir, &["--server", "fs", "--tool", "write_file"]);
    let pinners: Vec<&str> = writes
        .iter()
        .map(|r| r["pinned_by"].as_str().expect("pinned"))
        .collect();
    assert_eq!(pinners, ["alice", "bob"], "{writes:?}");
    assert_ne!(writes[0]["descriptor_hash"], writes[1]["descriptor_hash"]);
    assert!(locked(&dir, &writes[1]["descriptor_hash"]));
    assert!(!locked(&dir, &writes[0]["descriptor_hash"]));
    let reads = history(&dir, &["--tool", "read_file"]);
    assert_eq!(reads.len(), 1, "the unchanged tool is one row: {reads:?}");
    assert_eq!(reads[0]["pinned_by"], "bob", "pinned again by bob");

    let text = ok(&capability(
        &dir,
        &["tools", "history", "store.db", "--tool", "write_file"],
    ));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("fs/write_file  "), "{text}");
    assert!(lines[0].contains("pinned by alice at 20"), "{text}");
    let none = ok(&capability(
        &dir,
        &["tools", "history", "store.db", "--server", "nope"],
    ));
    assert_eq!(none, "no tool versions in store.db for server `nope`\n");
}

/// A gateway whose trail is a store records the descriptors it serves from: at start, and
/// again when a server's tools change (the changed descriptor a row of its own).
#[tokio::test(flavor = "current_thread")]
async fn a_gateway_on_a_store_records_each_descriptor_it_serves_and_a_changed_one_apart() {
    use std::time::{Duration, Instant};
    let Some(servers) = support::require_servers("gateway_tool_versions") else {
        return;
    };
    let dir = scratch("tool-versions-gateway", "");
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            "version = \"v1\"\n\n[roles.viewer]\nceiling = \"read-only\"\nallow = [\"drift/*\"]\n\n\
             [servers.drift]\ncommand = {}\ntrust = \"trusted\"\nprefix = \"drift_\"\n",
            servers.drift().toml_command()
        ),
    )
    .expect("policy");
    ok(&capability(&dir, &["db", "migrate", "store.db"]));
    let args = proxy_common::gateway_stdio(
        &dir.join("policy.toml"),
        "viewer",
        &dir.join("store.db"),
        &[],
    );
    let (_child, client) =
        proxy_common::Proxied::spawn_for(&args, (), rmcp::service::ClientLifecycleMode::Initialize)
            .await;
    client.peer().list_all_tools().await.expect("lists");
    let at_start = history(&dir, &["--server", "drift"]);
    let shifty: Vec<&Value> = at_start.iter().filter(|r| r["tool"] == "shifty").collect();
    assert_eq!(shifty.len(), 1, "{at_start:?}");
    assert!(at_start.iter().all(|r| r["pinned_by"].is_null()));

    let mut drift = rmcp::model::CallToolRequestParams::new("drift_drift");
    drift.arguments = Some(serde_json::Map::new());
    client.peer().call_tool(drift).await.expect("drift runs");
    let started = Instant::now();
    let rows = loop {
        let rows = history(&dir, &["--server", "drift", "--tool", "shifty"]);
        if rows.len() == 2 {
            break rows;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the changed descriptor was not recorded: {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(rows[0]["descriptor_hash"], shifty[0]["descriptor_hash"]);
    assert_ne!(rows[1]["descriptor_hash"], rows[0]["descriptor_hash"]);
    assert!(rows[1]["first_seen"].as_u64() >= rows[0]["first_seen"].as_u64());
    let _ = client.cancel().await;
}
