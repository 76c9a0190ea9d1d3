//! `capability proxy` and `notifications/tools/list_changed` (issue 14): a server that changes
//! a tool's description after it was pinned. The proxy lists again, hides the drifted tool,
//! says so on standard error, and tells the client, which lists again.

use crate::proxy_common;
use crate::support;

use std::path::Path;
use std::process::Stdio;

use capability::rmcp::REFUSED_CODE;
use serde_json::json;
use support::TsTarget;

use proxy_common::{BIN, calls, listed, proxy_args, scratch, summary, triple};

const POLICY: &str = r#"
[roles.viewer]
ceiling = "read-only"
allow = ["*"]
"#;

#[test]
fn a_drifted_tool_is_hidden_and_the_client_is_told() {
    let servers = require_servers!("a_drifted_tool_is_hidden_and_the_client_is_told");
    let dir = scratch("drift", POLICY);
    let drift = servers.drift();
    let lock = dir.join("capability.lock");
    let lock_arg = lock.display().to_string();

    // Pin the server's first listing.
    let mut pin = std::process::Command::new(BIN);
    pin.args([
        "pin", "--server", "drift", "--trust", "trusted", "--lock", &lock_arg, "--",
    ])
    .arg(&drift.program)
    .args(&drift.args);
    let pinned = pin.output().expect("run capability pin");
    assert_eq!(
        pinned.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&pinned.stderr)
    );

    let trail = dir.join("trail.jsonl");
    let args = proxy_args(
        &dir,
        "viewer",
        "drift",
        &trail,
        &["--trust", "trusted", "--lock", &lock_arg],
        &drift,
    );
    let ops = json!([
        {"op": "list"},
        {"op": "call", "name": "drift"},
        {"op": "waitListChanged", "timeoutMs": 15000},
        {"op": "list"},
        {"op": "call", "name": "shifty"},
        {"op": "call", "name": "stable"},
    ]);
    let output = servers
        .ts_client(
            &ops,
            TsTarget::Stdio {
                program: Path::new(BIN),
                args: &args,
            },
        )
        .stderr(Stdio::piped())
        .output()
        .expect("run the TypeScript client");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines = support::ts_client_lines(&output).unwrap_or_else(|e| panic!("{e}\n{stderr}"));

    let before = listed(&lines[1]);
    assert!(before.contains(&"shifty".to_owned()), "{before:?}");
    assert_eq!(before.len(), 5, "{before:?}");
    assert!(
        lines[2]["result"].to_string().contains("drifted"),
        "{lines:?}"
    );
    assert_eq!(lines[3]["changed"], true, "the client was told: {stderr}");
    let after = listed(&lines[4]);
    assert!(!after.contains(&"shifty".to_owned()), "hidden: {after:?}");
    assert_eq!(after.len(), 4, "{after:?}");
    let refusal = &lines[5]["error"];
    assert_eq!(refusal["code"], REFUSED_CODE, "{lines:?}");
    assert!(
        refusal["data"].to_string().contains("descriptor changed"),
        "{refusal}"
    );
    assert!(
        lines[6]["result"].to_string().contains("stable"),
        "{lines:?}"
    );

    // The drift is recorded: on standard error when it is seen, and in the refused call's
    // audit record.
    assert!(
        stderr.contains("drift: `drift/shifty` changed (description)"),
        "{stderr}"
    );
    assert_eq!(
        summary(&trail),
        [
            triple("viewer", "drift", "allowed"),
            triple("viewer", "shifty", "denied"),
            triple("viewer", "stable", "allowed"),
        ]
    );
    let denied = &calls(&trail)[1];
    assert!(
        denied["reasons"].to_string().contains("descriptor changed"),
        "{denied}"
    );
}

/// rmcp's client, told of list changes.
struct Watching {
    changed: std::sync::Arc<tokio::sync::Notify>,
}

impl rmcp::ClientHandler for Watching {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::default(),
            rmcp::model::Implementation::new("watching", "0"),
        )
    }

    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.changed.notify_one();
    }
}

#[tokio::test(flavor = "current_thread")]
async fn rmcp_clients_of_both_protocol_revisions_are_told_and_see_the_drifted_tool_hidden() {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};

    let servers = require_servers!(
        "rmcp_clients_of_both_protocol_revisions_are_told_and_see_the_drifted_tool_hidden"
    );
    let dir = scratch("drift_rmcp", POLICY);
    let drift = servers.drift();
    let lock = dir.join("capability.lock");
    let lock_arg = lock.display().to_string();
    let pinned = std::process::Command::new(BIN)
        .args([
            "pin", "--server", "drift", "--trust", "trusted", "--lock", &lock_arg, "--",
        ])
        .arg(&drift.program)
        .args(&drift.args)
        .output()
        .expect("run capability pin");
    assert_eq!(pinned.status.code(), Some(0));

    for (version, lifecycle) in [
        ("2025-11-25", ClientLifecycleMode::Initialize),
        (
            "2026-07-28",
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        ),
    ] {
        let trail = dir.join(format!("{version}.jsonl"));
        let args = proxy_args(
            &dir,
            "viewer",
            "drift",
            &trail,
            &["--trust", "trusted", "--lock", &lock_arg],
            &drift,
        );
        let mut child = tokio::process::Command::new(BIN)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the proxy");
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            panic!("piped");
        };
        let changed = std::sync::Arc::new(tokio::sync::Notify::new());
        let client = Watching {
            changed: changed.clone(),
        }
        .serve_with_lifecycle((stdout, stdin), lifecycle)
        .await
        .expect("connects");
        let negotiated = client
            .peer()
            .peer_info()
            .map(|info| info.protocol_version.to_string());
        assert_eq!(negotiated.as_deref(), Some(version));
        let names = |list: rmcp::model::ListToolsResult| -> Vec<String> {
            list.tools.iter().map(|t| t.name.to_string()).collect()
        };
        let before = names(client.peer().list_tools(None).await.expect("lists"));
        assert!(before.contains(&"shifty".to_owned()), "{before:?}");
        client
            .peer()
            .call_tool(rmcp::model::CallToolRequestParams::new("drift"))
            .await
            .expect("drift runs");
        tokio::time::timeout(std::time::Duration::from_secs(15), changed.notified())
            .await
            .unwrap_or_else(|_| panic!("{version}: the client was not told"));
        let after = names(client.peer().list_tools(None).await.expect("lists"));
        assert!(
            !after.contains(&"shifty".to_owned()),
            "{version}: {after:?}"
        );
        let _ = client.cancel().await;
        let _ = child.wait().await;
    }
}
