//! Drift judged by what it introduces, at the engine (issue 48, items 2 and 3): `capability
//! proxy` (a gateway of one) in front of the drift server, with a lockfile pinned from an
//! earlier version of its tools and a policy that accepts wording drift and names approver
//! `alice`. A reworded tool is shown and its acceptance recorded in the trail; a hint flip is
//! hidden; a re-pin signed by alice for what the server serves is shown and recorded; a re-pin
//! of a descriptor the server no longer serves (it changed after the review) is hidden, and so
//! is one signed by a key the policy does not name for its approver.

use crate::proxy_common;
use crate::support;

use std::path::Path;
use std::process::Stdio;

use capability::Server;
use capability::gate::SecretKey;
use capability::mcp::Lockfile;
use serde_json::{Value, json};
use support::TsTarget;

use proxy_common::{BIN, listed, proxy_args, records, scratch};

#[test]
fn the_engine_shows_accepted_rewordings_and_checked_repins_only() {
    let servers = require_servers!("the_engine_shows_accepted_rewordings_and_checked_repins_only");
    let drift = servers.drift();
    let alice = SecretKey::generate().expect("randomness");
    let mallory = SecretKey::generate().expect("randomness");
    let policy = format!(
        "[roles.viewer]\nceiling = \"read-only\"\nallow = [\"*\"]\n\n\
         [servers.drift]\ncommand = [\"node\"]\naccept_wording_drift = true\n\n\
         [approvals]\naudience = \"gateway-test\"\nledger = \"state.db\"\n\
         approvers = {{ alice = \"{}\" }}\n",
        alice.public_key()
    );
    let dir = scratch("drift_review", &policy);
    let lock_path = dir.join("capability.lock");
    let lock_arg = lock_path.display().to_string();

    // What the server lists now, as a pin records it.
    let live_lock = dir.join("live.lock");
    let pinned = std::process::Command::new(BIN)
        .args(["pin", "--server", "drift", "--trust", "trusted", "--lock"])
        .arg(&live_lock)
        .arg("--")
        .arg(&drift.program)
        .args(&drift.args)
        .output()
        .expect("run capability pin");
    assert_eq!(
        pinned.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&pinned.stderr)
    );
    let live = Lockfile::load(&live_lock).expect("reads").expect("written");
    let tool = |name: &str| -> Value {
        live.server("drift").expect("pinned")[name]
            .descriptor()
            .expect("kept")
    };

    // The lockfile of an earlier review: `stable` had a typo, `noise` claimed it writes,
    // `shifty` and `drift` said other things, and `crash` is as served.
    let mut earlier = Vec::new();
    for name in ["stable", "noise", "shifty", "drift", "crash"] {
        let mut t = tool(name);
        match name {
            "stable" => t["description"] = json!("Answrs stable."),
            "noise" => t["annotations"]["readOnlyHint"] = json!(false),
            "shifty" | "drift" => t["description"] = json!("Says what it does."),
            _ => {}
        }
        earlier.push(t);
    }
    let server = Server::trusted("drift");
    let mut lock = Lockfile::default();
    lock.pin(&server, &earlier).expect("valid tools");
    let sign = |key: &SecretKey, lock: &mut Lockfile, tool: &Value| {
        let public = key.public_key().to_string();
        lock.repin(&server, tool, "alice", &public, |m| {
            key.sign_repin(m).expect("a re-pin message")
        })
        .expect("pinned");
    };
    // Alice reviewed and re-pinned `shifty` as served now.
    sign(&alice, &mut lock, &tool("shifty"));
    // Alice reviewed `drift` when it said something else than it says now.
    let mut reviewed = tool("drift");
    reviewed["description"] = json!("Changes shifty, as reviewed.");
    sign(&alice, &mut lock, &reviewed);
    // Mallory signs a re-pin of `noise` in alice's name.
    sign(&mallory, &mut lock, &tool("noise"));
    std::fs::write(&lock_path, lock.to_toml_string()).expect("lockfile");

    let trail = dir.join("trail.jsonl");
    let args = proxy_args(
        &dir,
        "viewer",
        "drift",
        &trail,
        &["--trust", "trusted", "--lock", &lock_arg],
        &drift,
    );
    let ops =
        json!([{"op": "list"}, {"op": "call", "name": "stable"}, {"op": "call", "name": "noise"}]);
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

    let shown = listed(&lines[1]);
    for name in ["stable", "shifty", "crash"] {
        assert!(
            shown.contains(&name.to_owned()),
            "{name} shown: {shown:?}\n{stderr}"
        );
    }
    for name in ["noise", "drift"] {
        assert!(
            !shown.contains(&name.to_owned()),
            "{name} hidden: {shown:?}\n{stderr}"
        );
    }
    assert!(
        lines[2]["result"].to_string().contains("stable"),
        "{lines:?}"
    );
    assert!(
        lines[3]["error"].to_string().contains("refused"),
        "{lines:?}"
    );
    assert!(
        stderr.contains("drift: `drift/drift` changed (description) again after `alice` reviewed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("drift: `drift/noise` re-pinned by `alice`, refused"),
        "{stderr}"
    );

    // The accepted drift is on record, with the change.
    let records = records(&trail);
    let notice = |method: &str, tool: &str| {
        records
            .iter()
            .find(|r| r["method"] == method && r["tool"] == tool)
            .unwrap_or_else(|| panic!("no {method} of {tool}: {records:#?}"))
    };
    let accepted = notice("pin/accepted", "stable");
    let changes = &accepted["input"]["changes"][0];
    assert_eq!(changes["field"], "/description", "{accepted}");
    assert_eq!(changes["old"], "Answrs stable.", "{accepted}");
    assert_eq!(changes["new"], "Answers stable.", "{accepted}");
    let repinned = notice("pin/repinned", "shifty");
    assert!(
        repinned["reasons"].to_string().contains("alice"),
        "{repinned}"
    );
    assert!(
        !records
            .iter()
            .any(|r| r["tool"] == "noise" && r["method"] == "pin/repinned"),
        "a refused re-pin is not taken"
    );
}
