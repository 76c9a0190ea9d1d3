//! `capability proxy` and `notifications/tools/list_changed` (issue 14): a server that changes
//! a tool's description after it was pinned. The proxy lists again, hides the drifted tool,
//! says so on standard error, and tells the client, which lists again.

mod proxy_common;
mod support;

use std::path::Path;
use std::process::Stdio;

use capability::rmcp::REFUSED_CODE;
use serde_json::json;
use support::TsTarget;

use proxy_common::{BIN, listed, proxy_args, records, scratch, summary, triple};

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
    let denied = &records(&trail)[1];
    assert!(
        denied["reasons"].to_string().contains("descriptor changed"),
        "{denied}"
    );
}
