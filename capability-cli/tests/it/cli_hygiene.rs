//! What a server or an agent writes never reaches the operator's terminal raw, no file the
//! command writes follows a symbolic link or is overwritten without `--force`, a tool object
//! that writes a key twice is refused, and a call that started without an outcome is reported.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

fn scratch(test: &str) -> PathBuf {
    crate::trails::scratch("cli-hygiene", test)
}

fn capability(dir: &Path, args: &[&str]) -> Output {
    crate::proxy_common::binary().run(dir, args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every character the terminal could be steered with that the issue names: escape sequences
/// (erase the line, set the window title), C1 controls, bidirectional controls, line and
/// paragraph separators, zero-width and invisible characters, tags.
const HOSTILE: &[char] = &[
    '\u{1b}',
    '\u{7}',
    '\u{9b}',
    '\u{85}',
    '\u{202e}',
    '\u{061c}',
    '\u{200e}',
    '\u{2066}',
    '\u{2028}',
    '\u{2029}',
    '\u{200b}',
    '\u{200d}',
    '\u{2060}',
    '\u{feff}',
    '\u{00ad}',
    '\u{3164}',
    '\u{e0041}',
    '\u{e007f}',
];

fn hostile_text() -> String {
    let mut text = String::from("memory\u{1b}[2K\u{1b}]0;pwned\u{7}");
    text.extend(HOSTILE);
    text
}

fn assert_clean(output: &str, what: &str) {
    for c in HOSTILE {
        assert!(
            !output.contains(*c),
            "{what}: U+{:04X} reached the terminal raw:\n{output}",
            u32::from(*c)
        );
    }
}

fn tools() -> Vec<Value> {
    vec![json!({
        "name": "read_graph",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": true}
    })]
}

#[test]
fn a_servers_self_declared_name_is_escaped_in_every_output() {
    let dir = scratch("declared_name");
    std::fs::write(
        dir.join("tools.json"),
        json!({ "server": { "name": hostile_text() }, "tools": tools() }).to_string(),
    )
    .expect("write");
    std::fs::write(
        dir.join("policy.toml"),
        "[roles.reader]\nceiling = \"read-only\"\nallow = [\"*\"]\n",
    )
    .expect("policy");
    for args in [
        vec!["inspect", "tools.json"],
        vec!["inspect", "--json", "tools.json"],
        vec![
            "check",
            "--policy",
            "policy.toml",
            "--role",
            "reader",
            "tools.json",
        ],
        vec![
            "check",
            "--json",
            "--policy",
            "policy.toml",
            "--role",
            "reader",
            "tools.json",
        ],
    ] {
        let out = capability(&dir, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_clean(&text(&out.stdout), &format!("{args:?} stdout"));
        assert_clean(&text(&out.stderr), &format!("{args:?} stderr"));
        let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(
            shown.contains("\\u{1b}") || shown.contains("\\u001b"),
            "{args:?}: the name is shown, escaped:\n{shown}"
        );
    }
    // `--json` is still the same JSON value: the name reads back exactly.
    let out = capability(&dir, &["inspect", "--json", "tools.json"]);
    let value: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(value["declared_name"], hostile_text());
}

#[test]
fn a_tool_list_that_writes_a_key_twice_is_refused_naming_the_key() {
    let dir = scratch("duplicate_key");
    // A viewer that keeps the first value sees a mutating tool; serde_json keeps the last.
    std::fs::write(
        dir.join("tools.json"),
        r#"{"tools": [{"name": "wipe", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": false, "readOnlyHint": true}}]}"#,
    )
    .expect("write");
    let out = capability(&dir, &["inspect", "--trust", "trusted", "tools.json"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let said = text(&out.stderr);
    assert!(
        said.contains("duplicate key `$.tools[0].annotations.readOnlyHint`"),
        "{said}"
    );
    assert!(
        text(&out.stdout).is_empty(),
        "nothing is shown as if it were read"
    );
}

/// A key pair and a proposal whose rationale and arguments carry every hostile character.
fn proposal_setup(test: &str) -> PathBuf {
    let dir = scratch(test);
    let out = capability(&dir, &["keygen", "--out", "alice.key"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    #[derive(capability::Capability, serde::Serialize, serde::Deserialize)]
    #[capability(destructive, provider = "k8s")]
    struct RestartPod {
        name: String,
    }
    let proposal = capability::Proposal::new(
        RestartPod {
            name: hostile_text(),
        },
        "analyst",
        hostile_text(),
    )
    .expect("proposal");
    std::fs::write(dir.join("proposal.json"), proposal.to_json()).expect("write");
    dir
}

fn approve(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "approve",
        "--key",
        "alice.key",
        "--approver",
        "alice",
        "--audience",
        "prod-eu",
        "--yes",
    ];
    args.extend_from_slice(extra);
    args.push("proposal.json");
    capability(dir, &args)
}

#[test]
fn the_approval_screen_shows_every_hidden_character_escaped() {
    let dir = proposal_setup("approve_screen");
    let out = approve(&dir, &["--out", "approval.json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let screen = text(&out.stderr);
    assert_clean(&screen, "the review screen");
    for c in HOSTILE {
        assert!(
            screen.contains(&format!("\\u{{{:x}}}", u32::from(*c))),
            "U+{:04X} not shown escaped:\n{screen}",
            u32::from(*c)
        );
    }
}

#[cfg(unix)]
#[test]
fn approve_out_never_follows_a_symlink_nor_overwrites_without_force() {
    use std::os::unix::fs::symlink;
    let dir = proposal_setup("approve_out");
    let target = dir.join("precious.txt");
    std::fs::write(&target, "precious\n").expect("write");
    symlink(&target, dir.join("approval.json")).expect("plant a link");
    let out = approve(&dir, &["--out", "approval.json"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--force"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&target).expect("read"),
        "precious\n"
    );
    // With --force the link itself is replaced by the approval; its target stays as it was.
    let out = approve(&dir, &["--out", "approval.json", "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(&target).expect("read"),
        "precious\n"
    );
    let written = std::fs::symlink_metadata(dir.join("approval.json")).expect("meta");
    assert!(written.file_type().is_file());
    let approval = std::fs::read_to_string(dir.join("approval.json")).expect("read");
    assert!(approval.contains("\"approver\""), "{approval}");
    // An existing file: refused without --force, replaced with it.
    std::fs::write(dir.join("mine.json"), "mine\n").expect("write");
    let out = approve(&dir, &["--out", "mine.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(dir.join("mine.json")).expect("read"),
        "mine\n"
    );
}

#[cfg(unix)]
#[test]
fn pin_and_db_migrate_never_write_through_a_symlink() {
    use std::os::unix::fs::symlink;
    let dir = scratch("pin_links");
    std::fs::write(
        dir.join("tools.json"),
        json!({ "tools": tools() }).to_string(),
    )
    .expect("write");
    let target = dir.join("precious.txt");
    std::fs::write(&target, "precious\n").expect("write");
    // A link planted beside the lockfile, where its new version is written first.
    symlink(&target, dir.join("capability.lock.capability-new")).expect("plant a link");
    let out = capability(&dir, &["pin", "--server", "memory", "tools.json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(&target).expect("read"),
        "precious\n"
    );
    assert!(
        std::fs::read_to_string(dir.join("capability.lock"))
            .expect("the lockfile")
            .contains("read_graph")
    );
    // A database path that is a link: refused, nothing created through it.
    symlink(dir.join("elsewhere.db"), dir.join("state.db")).expect("plant a link");
    let out = capability(&dir, &["db", "migrate", "state.db"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("symbolic link"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.join("elsewhere.db").exists());
}

#[test]
fn verify_and_replay_report_a_call_that_started_with_no_outcome() {
    use capability::audit::{AuditRecord, AuditSink, FlushPolicy, JsonlSink, Phase, Verdict};
    let dir = scratch("unfinished");
    let trail = dir.join("trail.jsonl");
    {
        let sink = JsonlSink::open(&trail, FlushPolicy::EveryRecord).expect("open");
        // What a process killed in the middle of a call leaves: the intent alone.
        let intent: AuditRecord = serde_json::from_value(json!({
            "seq": 0, "time": "2026-12-01T10:00:00.000Z", "agent": "ops-bot",
            "call_id": "call_1", "phase": "intent", "method": "tools/call",
            "role": "operator", "session": "s-1", "step": null, "provider": "k8s",
            "tool": "restart_pod", "descriptor_hash": "", "policy_version": null,
            "verdict": "allowed", "reasons": [], "input": {"pod": "api-0"},
            "input_digest": "hmac-sha256:00", "input_size": 15, "output_digest": null,
            "output_size": null, "latency_us": null, "success": null, "error": null,
            "prev": "", "hash": ""
        }))
        .expect("a record");
        assert_eq!(
            (intent.phase, intent.verdict),
            (Some(Phase::Intent), Verdict::Allowed)
        );
        sink.append(intent).expect("append");
    }
    let out = capability(&dir, &["audit", "verify", "trail.jsonl"]);
    assert_eq!(out.status.code(), Some(0), "intact: {}", text(&out.stdout));
    let said = text(&out.stdout);
    assert!(
        said.contains("record 1: started, no outcome recorded: `restart_pod`"),
        "{said}"
    );
    let out = capability(&dir, &["audit", "verify", "--json", "trail.jsonl"]);
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        report["unfinished"][0]["status"],
        "started, no outcome recorded"
    );
    let out = capability(
        &dir,
        &["audit", "replay", "trail.jsonl", "--session", "s-1"],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("k8s/restart_pod  allowed  -  started, no outcome recorded"),
        "{}",
        text(&out.stdout)
    );
}

/// `cargo install capability-cli` works once the crates are published: every crate the
/// command needs names the version of each workspace crate it depends on (a path alone is
/// not published), and says what it is and under which license.
#[test]
fn every_crate_the_command_needs_can_be_published() {
    let metadata = capability_testkit::workspace::metadata();
    let packages = metadata["packages"].as_array().expect("packages");
    let by_name = |name: &str| packages.iter().find(|p| p["name"] == name);
    let mut needed = vec!["capability-cli".to_owned()];
    let mut seen = std::collections::BTreeSet::new();
    let mut missing = Vec::new();
    while let Some(name) = needed.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let package = by_name(&name).unwrap_or_else(|| panic!("{name} in the workspace"));
        for key in ["description", "license", "repository"] {
            if package[key].as_str().is_none_or(str::is_empty) {
                missing.push(format!("{name}: no `{key}`"));
            }
        }
        if package["publish"] == json!([]) {
            missing.push(format!("{name}: `publish = false`"));
        }
        for dependency in package["dependencies"].as_array().into_iter().flatten() {
            let path = dependency.get("path").and_then(Value::as_str);
            if path.is_none() || dependency["kind"] == "dev" {
                continue;
            }
            let dep = dependency["name"].as_str().unwrap_or_default().to_owned();
            if dependency["req"] == "*" {
                missing.push(format!("{name}: `{dep}` by path only, with no version"));
            }
            needed.push(dep);
        }
    }
    assert!(
        missing.is_empty(),
        "crates `cargo install capability-cli` would need:\n  {}",
        missing.join("\n  ")
    );
    assert!(
        seen.contains("capability-gateway") && seen.contains("capability-core"),
        "{seen:?}"
    );
}
