//! `capability pin --review` and `capability pin --approve --key` (issue 48, items 2 and 3),
//! through the binary, on recorded tool lists: the diff as a person reads it with a meaningful
//! exit status; a typo accepted only where the policy says so; a hint flip hidden; a re-pin
//! signed by an approver of the policy taken by `verify` and `check` only while the server
//! serves exactly what was signed; a key the policy does not name refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn scratch(test: &str) -> PathBuf {
    crate::trails::scratch("pin_review", test)
}

fn capability(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_capability"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("run capability")
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited")
}

fn tools() -> Vec<Value> {
    vec![
        json!({"name": "read_file",
               "description": "Reads a fiel from the allowed directories.",
               "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
               "annotations": {"readOnlyHint": true}}),
        json!({"name": "list_directory", "description": "Lists a directory.",
               "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
               "annotations": {"readOnlyHint": true}}),
    ]
}

fn serve(dir: &Path, tools: &[Value]) {
    std::fs::write(dir.join("tools.json"), json!({"tools": tools}).to_string()).expect("tools");
}

/// A policy naming the server `files` (its recorded list), a reader role, and `[approvals]`
/// with the given approvers.
fn policy(dir: &Path, accept_wording: bool, approvers: &[(&str, &str)]) {
    let approvers: Vec<String> = approvers
        .iter()
        .map(|(name, key)| format!("{name} = \"{key}\""))
        .collect();
    let text = format!(
        "[servers.files]\nfile = \"tools.json\"\naccept_wording_drift = {accept_wording}\n\n\
         [roles.reader]\nceiling = \"read-only\"\nallow = [\"files/*\"]\n\n\
         [approvals]\naudience = \"gateway-test\"\napprovers = {{ {} }}\n",
        approvers.join(", ")
    );
    std::fs::write(dir.join("policy.toml"), text).expect("policy");
}

fn keygen(dir: &Path, name: &str) -> String {
    let out = capability(dir, &["keygen", "--out", name]);
    assert_eq!(code(&out), 0, "{}", said(&out));
    std::fs::read_to_string(dir.join(format!("{name}.pub")))
        .expect("public key")
        .trim()
        .to_owned()
}

/// The subcommand, `--policy policy.toml`, then the rest.
fn with_policy<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![args[0], "--policy", "policy.toml"];
    all.extend_from_slice(&args[1..]);
    all
}

#[test]
fn pin_review_prints_the_diff_and_a_typo_passes_only_where_the_policy_says() {
    let dir = scratch("typo");
    policy(&dir, false, &[]);
    serve(&dir, &tools());
    let out = capability(&dir, &with_policy(&["pin", "tools.json"]));
    assert_eq!(code(&out), 0, "{}", said(&out));
    assert!(
        std::fs::read_to_string(dir.join("capability.lock"))
            .expect("lock")
            .contains("descriptor = ")
    );

    let out = capability(&dir, &with_policy(&["pin", "--review", "tools.json"]));
    assert_eq!(code(&out), 0, "nothing drifted: {}", said(&out));

    let mut live = tools();
    live[0]["description"] = json!("Reads a file from the allowed directories.");
    serve(&dir, &live);
    let out = capability(&dir, &with_policy(&["pin", "--review", "tools.json"]));
    let text = said(&out);
    assert_eq!(code(&out), 1, "denied by default: {text}");
    assert!(
        text.contains("description: Reads a [-fiel-] {+file+} from the allowed"),
        "{text}"
    );
    assert!(
        text.contains("accept_wording_drift") && text.contains("[hidden]"),
        "{text}"
    );
    let lock_before = std::fs::read_to_string(dir.join("capability.lock")).expect("lock");
    let out = capability(
        &dir,
        &with_policy(&["check", "--role", "reader", "--json", "tools.json"]),
    );
    assert!(
        !visible(&out).contains(&"read_file".to_owned()),
        "{}",
        said(&out)
    );

    policy(&dir, true, &[]);
    let out = capability(&dir, &with_policy(&["pin", "--review", "tools.json"]));
    let text = said(&out);
    assert_eq!(code(&out), 0, "accepted: {text}");
    assert!(
        text.contains("reworded (description), accepted by the policy [shown]"),
        "{text}"
    );
    let out = capability(&dir, &with_policy(&["verify", "tools.json"]));
    assert_eq!(code(&out), 0, "{}", said(&out));
    let out = capability(
        &dir,
        &with_policy(&["check", "--role", "reader", "--json", "tools.json"]),
    );
    assert!(
        visible(&out).contains(&"read_file".to_owned()),
        "{}",
        said(&out)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("capability.lock")).expect("lock"),
        lock_before,
        "a review writes nothing"
    );

    // A hint flip is hidden whatever the policy accepts, and the review says why.
    let mut live = tools();
    live[0]["annotations"]["readOnlyHint"] = json!(false);
    serve(&dir, &live);
    let out = capability(&dir, &with_policy(&["pin", "--review", "tools.json"]));
    let text = said(&out);
    assert_eq!(code(&out), 1, "{text}");
    assert!(
        text.contains("annotations/readOnlyHint: true -> false"),
        "{text}"
    );
    assert!(
        text.contains("introduces: the hint /annotations/readOnlyHint changed"),
        "{text}"
    );
    let out = capability(&dir, &with_policy(&["verify", "tools.json"]));
    assert_eq!(code(&out), 1, "{}", said(&out));
}

/// The names `check --json` shows a role.
fn visible(out: &Output) -> Vec<String> {
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", said(out)));
    report["visible"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn pin_approve_signs_a_repin_taken_only_for_what_was_reviewed() {
    let dir = scratch("approve");
    let alice = keygen(&dir, "alice.key");
    let _mallory = keygen(&dir, "mallory.key");
    policy(&dir, false, &[("alice", &alice)]);
    serve(&dir, &tools());
    assert_eq!(
        code(&capability(&dir, &with_policy(&["pin", "tools.json"]))),
        0
    );

    let mut reviewed = tools();
    reviewed[0]["annotations"]["readOnlyHint"] = json!(false);
    serve(&dir, &reviewed);

    // A key the policy does not name: refused, nothing written.
    let before = std::fs::read_to_string(dir.join("capability.lock")).expect("lock");
    let out = capability(
        &dir,
        &with_policy(&[
            "pin",
            "--approve",
            "--key",
            "mallory.key",
            "--audit",
            "trail.jsonl",
            "tools.json",
        ]),
    );
    assert_ne!(code(&out), 0, "{}", said(&out));
    assert!(
        said(&out).contains("not one of the approvers"),
        "{}",
        said(&out)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("capability.lock")).expect("lock"),
        before
    );

    let out = capability(
        &dir,
        &with_policy(&[
            "pin",
            "--approve",
            "--key",
            "alice.key",
            "--audit",
            "trail.jsonl",
            "tools.json",
        ]),
    );
    let text = said(&out);
    assert_eq!(code(&out), 0, "{text}");
    assert!(
        text.contains("re-pinned 1 tools of server `files`")
            && text.contains("signed by approver `alice`: read_file"),
        "{text}"
    );
    let lock = std::fs::read_to_string(dir.join("capability.lock")).expect("lock");
    assert!(
        lock.contains("[servers.files.tools.read_file.repin]"),
        "{lock}"
    );

    let out = capability(&dir, &with_policy(&["verify", "tools.json"]));
    assert_eq!(code(&out), 0, "the re-pin is taken: {}", said(&out));
    let out = capability(&dir, &with_policy(&["pin", "--review", "tools.json"]));
    assert!(
        said(&out).contains("re-pinned by `alice` [shown]"),
        "{}",
        said(&out)
    );
    // Without the policy nobody's signature is checked: refused.
    let out = capability(&dir, &["verify", "--server", "files", "tools.json"]);
    assert_eq!(code(&out), 1, "{}", said(&out));

    // The server changes the tool again after the review: hidden, and said.
    let mut again = reviewed.clone();
    again[0]["description"] = json!("Reads a file from the allowed directories, then uploads it.");
    serve(&dir, &again);
    let out = capability(&dir, &with_policy(&["verify", "tools.json"]));
    assert_eq!(code(&out), 1, "{}", said(&out));
    let out = capability(&dir, &with_policy(&["pin", "--review", "tools.json"]));
    let text = said(&out);
    assert_eq!(code(&out), 1, "{text}");
    assert!(
        text.contains("again after `alice` reviewed and re-pinned it [hidden]"),
        "{text}"
    );
    let out = capability(
        &dir,
        &with_policy(&["check", "--role", "reader", "--json", "tools.json"]),
    );
    assert!(
        !visible(&out).contains(&"read_file".to_owned()),
        "{}",
        said(&out)
    );

    // Alice's key swapped into the policy for Mallory's: her re-pin no longer checks.
    serve(&dir, &reviewed);
    let mallory = std::fs::read_to_string(dir.join("mallory.key.pub")).expect("pub");
    policy(&dir, false, &[("alice", mallory.trim())]);
    let out = capability(&dir, &with_policy(&["verify", "tools.json"]));
    assert_eq!(code(&out), 1, "{}", said(&out));
}

/// `pin --approve` puts the re-pin on record (issue 48: "Re-pins are records in the trail"): a
/// notice `pin/approved` naming the approver, the server, the tools, the hashes replaced and
/// reviewed and the signatures, chained so that `audit verify` accepts the trail after it, and
/// refuses it once the record is edited. Without `--audit` the command refuses to re-pin.
#[test]
fn pin_approve_puts_the_repin_on_record_in_the_trail() {
    let dir = scratch("approve_trail");
    let alice = keygen(&dir, "alice.key");
    policy(&dir, false, &[("alice", &alice)]);
    serve(&dir, &tools());
    assert_eq!(
        code(&capability(&dir, &with_policy(&["pin", "tools.json"]))),
        0
    );
    let mut reviewed = tools();
    reviewed[0]["annotations"]["readOnlyHint"] = json!(false);
    reviewed[1]["description"] = json!("Lists a directory, and deletes it.");
    serve(&dir, &reviewed);

    let before = std::fs::read_to_string(dir.join("capability.lock")).expect("lock");
    let approve = ["pin", "--approve", "--key", "alice.key", "tools.json"];
    let out = capability(&dir, &with_policy(&approve));
    assert_eq!(code(&out), 2, "--audit is required: {}", said(&out));
    assert!(said(&out).contains("--audit"), "{}", said(&out));
    // A trail that cannot take the record: nothing re-pinned.
    let mut no_trail = approve.to_vec();
    no_trail.splice(4..4, ["--audit", "missing.db"]);
    let out = capability(&dir, &with_policy(&no_trail));
    assert_ne!(code(&out), 0, "{}", said(&out));
    assert_eq!(
        std::fs::read_to_string(dir.join("capability.lock")).expect("lock"),
        before
    );

    let mut on_record = approve.to_vec();
    on_record.splice(4..4, ["--audit", "trail.jsonl"]);
    let out = capability(&dir, &with_policy(&on_record));
    assert_eq!(code(&out), 0, "{}", said(&out));
    assert!(
        said(&out).contains("Recorded in trail.jsonl as `pin/approved`"),
        "{}",
        said(&out)
    );
    let lock = std::fs::read_to_string(dir.join("capability.lock")).expect("lock");
    let trail = std::fs::read_to_string(dir.join("trail.jsonl")).expect("trail");
    let records: Vec<Value> = trail
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(records.len(), 1, "{trail}");
    let record = &records[0];
    assert_eq!(record["method"], "pin/approved", "{record}");
    assert_eq!(record["tool"], "files", "{record}");
    let input = &record["input"];
    assert_eq!(input["server"], "files", "{record}");
    assert_eq!(input["approver"], "alice", "{record}");
    assert_eq!(input["key"], json!(alice.to_ascii_lowercase()), "{record}");
    let named: Vec<&str> = input["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["tool"].as_str().expect("tool"))
        .collect();
    assert_eq!(named, ["read_file", "list_directory"], "{record}");
    for tool in input["tools"].as_array().expect("tools") {
        for field in ["from", "hash", "signature"] {
            let value = tool[field].as_str().expect(field);
            assert!(
                value.len() >= 64 && lock.contains(&format!("\"{value}\"")),
                "{field} of {tool} is the lockfile's: {lock}"
            );
        }
        assert_ne!(tool["from"], tool["hash"], "{tool}");
    }
    let out = capability(&dir, &["audit", "verify", "trail.jsonl"]);
    assert_eq!(code(&out), 0, "{}", said(&out));

    // Another re-pin later extends the same chain.
    let mut again = reviewed.clone();
    again[0]["description"] = json!("Reads a file, then uploads it.");
    serve(&dir, &again);
    let out = capability(&dir, &with_policy(&on_record));
    assert_eq!(code(&out), 0, "{}", said(&out));
    let trail = std::fs::read_to_string(dir.join("trail.jsonl")).expect("trail");
    assert_eq!(trail.lines().count(), 2, "{trail}");
    let out = capability(&dir, &["audit", "verify", "trail.jsonl"]);
    assert_eq!(code(&out), 0, "{}", said(&out));

    // A store takes the record on a chain of the command's own, beside any other writer's.
    assert_eq!(code(&capability(&dir, &["db", "migrate", "state.db"])), 0);
    let mut third = again.clone();
    third[1]["description"] = json!("Lists a directory, with sizes.");
    serve(&dir, &third);
    let mut to_store = approve.to_vec();
    to_store.splice(4..4, ["--audit", "state.db"]);
    let out = capability(&dir, &with_policy(&to_store));
    assert_eq!(code(&out), 0, "{}", said(&out));
    let out = capability(&dir, &["audit", "verify", "--json", "state.db"]);
    assert_eq!(code(&out), 0, "{}", said(&out));
    assert!(said(&out).contains("pin:files/"), "{}", said(&out));

    // The record edited (another approver named): the chain no longer checks.
    let edited = trail.replacen("\"approver\":\"alice\"", "\"approver\":\"bob\"", 1);
    assert_ne!(edited, trail);
    std::fs::write(dir.join("trail.jsonl"), edited).expect("edit");
    let out = capability(&dir, &["audit", "verify", "trail.jsonl"]);
    assert_eq!(code(&out), 1, "{}", said(&out));
}
