//! `capability proxy` over stdio (issue 14): the reference servers behind the proxy, rmcp's
//! client and the official TypeScript SDK client in front of it. What a role lists and calls,
//! refusals that never reach the server, and an audit record for every call.

use crate::proxy_common;
use crate::support;

use capability::rmcp::REFUSED_CODE;
use serde_json::json;

use proxy_common::{
    Proxied, listed, proxy_args, scratch, summary, triple, ts_through_proxy, verifies,
};

const POLICY: &str = r#"
version = "2026-11"

[roles.viewer]
ceiling = "read-only"
allow = ["*"]

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]

# The memory server is untrusted; its operator vouches for reading the graph.
[assertions."memory/read_graph"]
read_only = true
destructive = false
open_world = false
"#;

fn reason_tags(error: &rmcp::ErrorData) -> Vec<String> {
    error.data.as_ref().expect("refusal data")["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .map(|r| r["reason"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn rmcp_client_through_the_proxy_on_server_everything() {
    let servers = require_servers!("rmcp_client_through_the_proxy_on_server_everything");
    let everything = servers.everything();
    let dir = scratch("everything_rmcp", POLICY);

    // A trusted server's read-only claims are believed: the viewer sees exactly those tools.
    let viewer_trail = dir.join("viewer.jsonl");
    let args = proxy_args(
        &dir,
        "viewer",
        "everything",
        &viewer_trail,
        &["--trust", "trusted"],
        &everything,
    );
    let viewer = Proxied::start(&args).await;
    let read_only = support::recorded_read_only_tools_of_everything();
    assert!(!read_only.is_empty());
    assert_eq!(viewer.names().await, read_only);
    let echoed = viewer
        .call("echo", json!({"message": "through the proxy"}))
        .await
        .expect("echo is read-only");
    assert!(echoed.contains("through the proxy"), "{echoed}");
    let refused = viewer
        .call("toggle-simulated-logging", json!({}))
        .await
        .expect_err("not read-only: refused");
    assert_eq!(refused.code.0, REFUSED_CODE);
    assert!(
        reason_tags(&refused).contains(&"ceiling_exceeded".to_owned()),
        "{refused:?}"
    );
    let unknown = viewer
        .call("no-such-tool", json!({}))
        .await
        .expect_err("not listed: refused");
    assert_eq!(unknown.code.0, REFUSED_CODE);
    assert!(
        viewer.close().await.success(),
        "exit 0 when the client goes"
    );
    assert_eq!(
        summary(&viewer_trail),
        [
            triple("viewer", "echo", "allowed"),
            triple("viewer", "toggle-simulated-logging", "denied"),
            triple("viewer", "no-such-tool", "denied"),
        ]
    );
    verifies(&viewer_trail);

    // Untrusted (the default): the claims are not believed, the viewer sees nothing.
    let untrusted_trail = dir.join("untrusted-viewer.jsonl");
    let args = proxy_args(
        &dir,
        "viewer",
        "everything",
        &untrusted_trail,
        &[],
        &everything,
    );
    let untrusted = Proxied::start(&args).await;
    assert_eq!(untrusted.names().await, Vec::<String>::new());
    let refused = untrusted
        .call("echo", json!({"message": "x"}))
        .await
        .expect_err("an unbelieved claim: refused");
    assert_eq!(refused.code.0, REFUSED_CODE);
    assert!(untrusted.close().await.success());
    assert_eq!(
        summary(&untrusted_trail),
        [triple("viewer", "echo", "denied")]
    );

    // The operator sees and may call everything.
    let operator_trail = dir.join("operator.jsonl");
    let args = proxy_args(
        &dir,
        "operator",
        "everything",
        &operator_trail,
        &[],
        &everything,
    );
    let operator = Proxied::start(&args).await;
    assert_eq!(operator.names().await.len(), 13);
    let toggled = operator
        .call("toggle-simulated-logging", json!({}))
        .await
        .expect("the operator may");
    assert!(toggled.contains("ogging"), "{toggled}");
    assert!(operator.close().await.success());
    assert_eq!(
        summary(&operator_trail),
        [triple("operator", "toggle-simulated-logging", "allowed")]
    );
    verifies(&operator_trail);
}

#[test]
fn typescript_client_through_the_proxy_on_server_memory() {
    let servers = require_servers!("typescript_client_through_the_proxy_on_server_memory");
    let dir = scratch("memory_ts", POLICY);
    let memory_file = dir.join("memory.jsonl");
    let memory = servers.memory(&memory_file);
    let create = json!({"op": "call", "name": "create_entities", "arguments": {"entities": [
        {"name": "proxy", "entityType": "test", "observations": ["governed"]}
    ]}});
    let ops = json!([{"op": "list"}, create, {"op": "call", "name": "read_graph"}]);

    // The viewer (untrusted server): only what the policy's assertion vouches for.
    let viewer_trail = dir.join("viewer.jsonl");
    let args = proxy_args(&dir, "viewer", "memory", &viewer_trail, &[], &memory);
    let lines = ts_through_proxy(&servers, &ops, &args);
    assert_eq!(lines[0]["op"], "connect", "{lines:?}");
    assert_eq!(lines[0]["serverInfo"]["name"], "capability-proxy");
    assert_eq!(listed(&lines[1]), ["read_graph"]);
    let refusal = &lines[2]["error"];
    assert_eq!(refusal["code"], REFUSED_CODE, "{lines:?}");
    assert_eq!(refusal["data"]["tool"], "create_entities");
    assert_eq!(refusal["data"]["role"], "viewer");
    assert!(
        !refusal["data"]["reasons"]
            .as_array()
            .expect("reasons")
            .is_empty(),
        "{refusal}"
    );
    assert!(
        lines[3]["result"]["content"].is_array(),
        "read_graph runs: {lines:?}"
    );
    assert!(
        !memory_file.exists()
            || !std::fs::read_to_string(&memory_file)
                .expect("memory file")
                .contains("governed"),
        "the refused call never reached the server"
    );
    assert_eq!(
        summary(&viewer_trail),
        [
            triple("viewer", "create_entities", "denied"),
            triple("viewer", "read_graph", "allowed"),
        ]
    );
    verifies(&viewer_trail);

    // The operator's call goes through and changes the graph.
    let operator_trail = dir.join("operator.jsonl");
    let args = proxy_args(&dir, "operator", "memory", &operator_trail, &[], &memory);
    let lines = ts_through_proxy(&servers, &ops, &args);
    assert_eq!(listed(&lines[1]).len(), 9, "{lines:?}");
    assert!(lines[2]["result"].is_object(), "{lines:?}");
    assert!(
        std::fs::read_to_string(&memory_file)
            .expect("the server wrote its graph")
            .contains("governed")
    );
    assert_eq!(
        summary(&operator_trail),
        [
            triple("operator", "create_entities", "allowed"),
            triple("operator", "read_graph", "allowed"),
        ]
    );
    verifies(&operator_trail);
}

#[test]
fn typescript_client_through_the_proxy_on_server_filesystem() {
    let servers = require_servers!("typescript_client_through_the_proxy_on_server_filesystem");
    let dir = scratch("filesystem_ts", POLICY);
    let root = dir.join("root");
    std::fs::create_dir_all(&root).expect("root");
    std::fs::write(root.join("hello.txt"), "hello through the proxy").expect("a file");
    let filesystem = servers.filesystem(&root);
    let read = json!({"op": "call", "name": "read_text_file",
                      "arguments": {"path": root.join("hello.txt")}});
    let write = json!({"op": "call", "name": "write_file",
                       "arguments": {"path": root.join("new.txt"), "content": "x"}});
    let ops = json!([{"op": "list"}, read, write]);

    let trail = dir.join("viewer.jsonl");
    let args = proxy_args(
        &dir,
        "viewer",
        "filesystem",
        &trail,
        &["--trust", "trusted"],
        &filesystem,
    );
    let lines = ts_through_proxy(&servers, &ops, &args);
    let names = listed(&lines[1]);
    assert!(names.contains(&"read_text_file".to_owned()), "{names:?}");
    assert!(!names.contains(&"write_file".to_owned()), "{names:?}");
    let text = lines[2]["result"].to_string();
    assert!(text.contains("hello through the proxy"), "{lines:?}");
    assert_eq!(lines[3]["error"]["code"], REFUSED_CODE, "{lines:?}");
    assert!(!root.join("new.txt").exists(), "never forwarded");
    assert_eq!(
        summary(&trail),
        [
            triple("viewer", "read_text_file", "allowed"),
            triple("viewer", "write_file", "denied"),
        ]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn the_audit_trail_can_be_a_sqlite_store() {
    let servers = require_servers!("the_audit_trail_can_be_a_sqlite_store");
    let dir = scratch("sqlite_store", POLICY);
    let db = dir.join("state.db");
    let db_arg = db.display().to_string();
    let run = |args: &[&str]| {
        std::process::Command::new(proxy_common::BIN)
            .args(args)
            .output()
            .expect("run capability")
    };
    let migrated = run(&["db", "migrate", &db_arg]);
    assert_eq!(migrated.status.code(), Some(0), "{migrated:?}");

    let args = proxy_args(
        &dir,
        "viewer",
        "everything",
        &db,
        &["--trust", "trusted"],
        &servers.everything(),
    );
    let viewer = Proxied::start(&args).await;
    viewer
        .call("echo", json!({"message": "stored"}))
        .await
        .expect("echo runs");
    viewer
        .call("toggle-simulated-logging", json!({}))
        .await
        .expect_err("refused");
    assert!(viewer.close().await.success());

    let verified = run(&["audit", "verify", &db_arg]);
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    let replay = run(&[
        "audit",
        "replay",
        &db_arg,
        "--session",
        "mcp:everything/viewer",
        "--json",
    ]);
    assert_eq!(replay.status.code(), Some(0), "{replay:?}");
    let replay = String::from_utf8_lossy(&replay.stdout);
    assert!(replay.contains("echo"), "{replay}");
    assert!(replay.contains("toggle-simulated-logging"), "{replay}");
    assert!(replay.contains("denied"), "{replay}");
}

/// `POLICY` with `everything/echo` denied to the viewer, version `2026-11-deny`.
fn denying_echo() -> String {
    POLICY.replace("version = \"2026-11\"", "version = \"2026-11-deny\"")
        .replace(
            "[roles.viewer]\nceiling = \"read-only\"\nallow = [\"*\"]",
            "[roles.viewer]\nceiling = \"read-only\"\nallow = [\"*\"]\ndeny = [\"everything/echo\"]",
        )
}

/// Calls `echo` until it is refused (within 10 s): the policy in force changed.
async fn until_echo_is_refused(proxy: &Proxied) {
    let since = std::time::Instant::now();
    while proxy.call("echo", json!({"message": "hi"})).await.is_ok() {
        assert!(
            since.elapsed() < std::time::Duration::from_secs(10),
            "the new policy was not applied"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_proxy_reloads_its_policy_on_sighup_and_with_watch() {
    let servers = require_servers!("the_proxy_reloads_its_policy_on_sighup_and_with_watch");
    let everything = servers.everything();
    // As editors save: the whole file at once.
    let write = |dir: &std::path::Path, text: &str| {
        std::fs::write(dir.join("policy.toml.new"), text).expect("policy");
        std::fs::rename(dir.join("policy.toml.new"), dir.join("policy.toml")).expect("policy");
    };
    assert_ne!(denying_echo(), POLICY, "the replacement applies");

    // Two proxies, one without --watch and one with it, and the same change to each one's file.
    let start = |name: &str, extra: &[&str]| {
        let dir = scratch(name, POLICY);
        let trail = dir.join("trail.jsonl");
        let mut flags = vec!["--trust", "trusted"];
        flags.extend_from_slice(extra);
        let args = proxy_args(&dir, "viewer", "everything", &trail, &flags, &everything);
        (dir, trail, args)
    };
    let (dir, trail, args) = start("reload_sighup", &[]);
    let (watched_dir, watched_trail, watched_args) = start("reload_watch", &["--watch"]);
    let proxy = Proxied::start(&args).await;
    let watched = Proxied::start(&watched_args).await;
    for p in [&proxy, &watched] {
        p.call("echo", json!({"message": "hi"}))
            .await
            .expect("echo is allowed");
    }
    write(&dir, &denying_echo());
    write(&watched_dir, &denying_echo());

    // With --watch: the change itself is enough.
    until_echo_is_refused(&watched).await;
    assert!(watched.close().await.success());
    verifies(&watched_trail);

    // Without --watch: a change a watcher has seen and applied by now is applied at SIGHUP, not
    // before (the proxy used to stop).
    proxy
        .call("echo", json!({"message": "hi"}))
        .await
        .expect("no reload without a signal");
    let pid = proxy.child.id().expect("the proxy runs").to_string();
    proxy_common::hangup(&pid);
    until_echo_is_refused(&proxy).await;
    assert!(
        proxy.close().await.success(),
        "SIGHUP reloads, it does not stop the proxy"
    );
    let reloads: Vec<String> = proxy_common::records(&trail)
        .iter()
        .filter(|r| r["method"] == "gateway/reload")
        .filter_map(|r| r["policy_version"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(reloads, ["2026-11-deny"]);
}
