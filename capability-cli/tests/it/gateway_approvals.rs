//! Approvals at the gateway, with the official TypeScript SDK client and `capability approve`:
//! a held call is answered with a proposal and reaches no server; the signed call runs once
//! with exactly the signed arguments (the server's journal shows them); every other use of the
//! approval is refused and reaches no server: a replay in the same gateway and through another
//! gateway process on the same store, changed arguments, another tool, an expired approval, one
//! for another audience, and one signed with a key that is not the approver's. Plan grants run
//! their calls and no more, and a revocation holds in the next process; a confirmable tool is
//! asked through elicitation (over stdio and HTTP), a signed one never. On PostgreSQL, four
//! gateway processes race to use one approval, and exactly one call runs.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;
use capability_testkit::pg;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use proxy_common::{BIN, scratch, ts_through_proxy, verifies};

/// A stdio MCP server in plain Python that journals every line it reads to `$JOURNAL`: two
/// destructive git tools and a read-only one.
const SERVER: &str = r#"
import json, os, sys
journal = open(os.environ["JOURNAL"], "a", buffering=1)
def send(value):
    sys.stdout.write(json.dumps(value) + "\n"); sys.stdout.flush()
def tool(name, read_only):
    return {"name": name, "description": name + " of a repository",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": read_only, "destructiveHint": not read_only}}
for line in sys.stdin:
    journal.write(line)
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "git", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id, "result": {"tools": [
            tool("git_reset", False), tool("git_clean", False), tool("git_status", True)]}})
    elif method == "tools/call":
        params = message["params"]
        send({"jsonrpc": "2.0", "id": id, "result": {"content": [
            {"type": "text", "text": params["name"] + " " + json.dumps(params.get("arguments"), sort_keys=True)}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": id, "result": {}})
    elif id is not None and method is not None:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
"#;

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env("TMPDIR", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("run capability")
}

fn ok(out: &std::process::Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The fleet (one git server), a key pair for alice, and the SQLite store that is both the
/// trail and the approval ledger.
fn setup(name: &str) -> PathBuf {
    setup_holding(name, r#"approve = ["git/git_reset", "git/git_clean"]"#)
}

/// [`setup`], with the role's `approve` and `confirm` lines given.
fn setup_holding(name: &str, holds: &str) -> PathBuf {
    let dir = scratch(name, "");
    std::fs::write(dir.join("git.py"), SERVER).expect("server");
    ok(&run(&dir, &["keygen", "--out", "alice.key"]));
    ok(&run(&dir, &["keygen", "--out", "mallory.key"]));
    ok(&run(&dir, &["db", "migrate", "state.db"]));
    let alice = std::fs::read_to_string(dir.join("alice.key.pub")).expect("alice's key");
    let policy = format!(
        r#"version = "approvals-1"

[servers.git]
command = ["python3", {script:?}]
env = {{ JOURNAL = {journal:?} }}
trust = "trusted"
prefix = "git_"

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]
{holds}

[approvals]
audience = "gw-test"
proposals = "proposals"
grants = "grants"
approvers = {{ alice = {alice:?} }}
"#,
        script = dir.join("git.py").display().to_string(),
        journal = dir.join("journal.jsonl").display().to_string(),
        alice = alice.trim(),
    );
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    dir
}

fn gateway(dir: &Path) -> Vec<String> {
    proxy_common::gateway_stdio(
        &dir.join("policy.toml"),
        "operator",
        &dir.join("state.db"),
        &[],
    )
}

/// The calls of `tool` the server was sent: their arguments.
fn sent(dir: &Path, tool: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
        .map(|m| m["params"]["arguments"].clone())
        .collect()
}

fn error_of(line: &Value) -> String {
    line["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("an error: {line}"))
        .to_owned()
}

/// Signs `proposal` as `approver` with `key` for `audience`; the approval's JSON.
fn approve(dir: &Path, proposal: &Path, key: &str, audience: &str, expires_in: &str) -> Value {
    let out = run(
        dir,
        &[
            "approve",
            "--key",
            key,
            "--approver",
            "alice",
            "--audience",
            audience,
            "--expires-in",
            expires_in,
            "--yes",
            &proposal.display().to_string(),
        ],
    );
    serde_json::from_str(&ok(&out)).expect("an approval")
}

/// An approval by alice of `proposal` for `audience` whose validity is already over (signed
/// 60 s ago, valid until a second ago), signed as `capability approve` signs: the gateway's
/// expiry check is tried without waiting for an approval to run out (the gate's own tests move
/// a clock past the expiry: capability-gate's `write_gate` tests).
fn expired_approval(dir: &Path, proposal: &Path, key: &str, audience: &str) -> Value {
    use capability::gate::{Approval, Clock, ProposalFile, SecretKey, SystemClock};
    let file: ProposalFile =
        serde_json::from_str(&std::fs::read_to_string(proposal).expect("proposal"))
            .expect("a proposal file");
    let key = SecretKey::from_text(&std::fs::read_to_string(dir.join(key)).expect("key"))
        .expect("a secret key");
    let now = SystemClock.now();
    let approval =
        Approval::sign(&file, "alice", audience, &key, now - 60, now - 1).expect("signed");
    serde_json::to_value(approval).expect("JSON")
}

#[test]
fn a_held_call_runs_once_with_the_signed_arguments_and_every_other_use_is_refused() {
    let Some(servers) = support::require_servers("gateway_approvals") else {
        return;
    };
    let dir = setup("gateway-approvals");
    let args = gateway(&dir);
    let reset = json!({"repo_path": "/srv/repo", "mode": "hard"});

    // 1. Listed, said to need an approval; a call without one is a proposal, and runs nothing.
    let lines = ts_through_proxy(
        &servers,
        &json!([
            {"op": "list"},
            {"op": "call", "name": "git_git_reset", "arguments": reset,
             "meta": {"capability/rationale": "the branch is corrupt"}},
            {"op": "call", "name": "git_git_status", "arguments": {}},
        ]),
        &args,
    );
    assert_eq!(lines[0]["op"], "connect");
    let listed = &lines[1]["result"]["tools"];
    assert!(listed.is_array(), "{lines:?}");
    let described = |name: &str| {
        listed
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == name))
            .and_then(|t| t["description"].as_str())
            .unwrap_or_else(|| panic!("{name} listed: {listed}"))
            .to_owned()
    };
    assert!(described("git_git_reset").starts_with("[Needs a human's approval"));
    assert!(!described("git_git_status").contains("approval"));
    let refusal = &lines[2]["error"];
    assert!(
        error_of(&lines[2]).contains("needs a human's approval"),
        "{refusal}"
    );
    let data = &refusal["data"];
    let id = data["proposal_id"]
        .as_str()
        .expect("a proposal id")
        .to_owned();
    let proposal = &data["proposal"];
    assert_eq!(proposal["tool"], "git_reset");
    assert_eq!(proposal["provider"], "git");
    assert_eq!(proposal["tool_type"], "mcp:git/git_reset");
    assert_eq!(proposal["audience"], "gw-test");
    assert_eq!(proposal["proposer"], "role:operator");
    assert_eq!(proposal["rationale"], "the branch is corrupt");
    assert_eq!(proposal["args"], reset);
    assert!(proposal["expires_at"].as_u64() > proposal["created_at"].as_u64());
    let file = dir.join("proposals").join(format!("{id}.json"));
    assert_eq!(data["proposal_file"], file.display().to_string());
    assert!(lines[3]["result"].is_object(), "a read runs: {}", lines[3]);
    assert!(
        sent(&dir, "git_reset").is_empty(),
        "a proposal runs nothing"
    );
    // Kept in the store too, where approvers on other machines find it.
    let listed = ok(&run(&dir, &["proposals", "state.db"]));
    assert!(
        listed.starts_with(&format!(
            "{id}  git/git_reset  for gw-test  by role:operator"
        )),
        "{listed}"
    );
    let kept = ok(&run(&dir, &["proposals", "state.db", "--id", &id]));
    let kept: Value = serde_json::from_str(&kept).expect("json");
    assert_eq!(&kept, proposal);

    // 2. Approved with `capability approve`, into the proposals directory: the retried call
    //    (its keys in another order) finds it, runs once, and a replay in the same process is
    //    refused.
    let approval = approve(&dir, &file, "alice.key", "gw-test", "600");
    let approval_file = dir.join("proposals").join(format!("{id}.approval.json"));
    std::fs::write(&approval_file, approval.to_string()).expect("approval file");
    let reordered = json!({"mode": "hard", "repo_path": "/srv/repo"});
    let lines = ts_through_proxy(
        &servers,
        &json!([
            {"op": "call", "name": "git_git_reset", "arguments": reordered},
            {"op": "call", "name": "git_git_reset", "arguments": reordered,
             "meta": {"capability/approval": approval}},
        ]),
        &args,
    );
    let text = lines[1]["result"]["content"][0]["text"].as_str();
    assert_eq!(
        text,
        Some(r#"git_reset {"mode": "hard", "repo_path": "/srv/repo"}"#),
        "{}",
        lines[1]
    );
    assert_eq!(
        sent(&dir, "git_reset"),
        std::slice::from_ref(&reset),
        "run once, as signed"
    );
    assert!(error_of(&lines[2]).contains("used"), "{}", lines[2]);
    assert!(
        !approval_file.exists() && !file.exists(),
        "used: taken away"
    );
    assert!(ok(&run(&dir, &["proposals", "state.db"])).starts_with("no proposal waits"));

    // 3. Through another gateway process on the same store: a replay; changed arguments;
    //    another tool; all refused, none reaches the server.
    let changed = json!({"repo_path": "/srv/other", "mode": "hard"});
    let lines = ts_through_proxy(
        &servers,
        &json!([
            {"op": "call", "name": "git_git_reset", "arguments": reset,
             "meta": {"capability/approval": approval}},
            {"op": "call", "name": "git_git_reset", "arguments": changed,
             "meta": {"capability/approval": approval}},
            {"op": "call", "name": "git_git_clean", "arguments": reset,
             "meta": {"capability/approval": approval}},
        ]),
        &args,
    );
    assert!(error_of(&lines[1]).contains("used"), "{}", lines[1]);
    assert!(error_of(&lines[2]).contains("arguments"), "{}", lines[2]);
    assert!(error_of(&lines[3]).contains("git_reset"), "{}", lines[3]);
    assert_eq!(sent(&dir, "git_reset").len(), 1);
    assert!(sent(&dir, "git_clean").is_empty());

    // 4. A fresh proposal of the same call; approvals that do not hold for it: expired, for
    //    another audience, signed with mallory's key in alice's name.
    let lines = ts_through_proxy(
        &servers,
        &json!([{"op": "call", "name": "git_git_reset", "arguments": reset}]),
        &args,
    );
    let id = lines[1]["error"]["data"]["proposal_id"]
        .as_str()
        .expect("a new proposal")
        .to_owned();
    // Signed from the store's copy this time.
    let file = dir.join("from-store.json");
    let kept = ok(&run(&dir, &["proposals", "state.db", "--id", &id]));
    std::fs::write(&file, kept).expect("the store's proposal");
    let expired = expired_approval(&dir, &file, "alice.key", "gw-test");
    let mut foreign: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("proposal")).expect("json");
    foreign["audience"] = json!("elsewhere");
    let foreign_file = dir.join("foreign.json");
    std::fs::write(&foreign_file, foreign.to_string()).expect("foreign proposal");
    let foreign = approve(&dir, &foreign_file, "alice.key", "elsewhere", "600");
    let forged = approve(&dir, &file, "mallory.key", "gw-test", "600");
    let lines = ts_through_proxy(
        &servers,
        &json!([
            {"op": "call", "name": "git_git_reset", "arguments": reset,
             "meta": {"capability/approval": expired}},
            {"op": "call", "name": "git_git_reset", "arguments": reset,
             "meta": {"capability/approval": foreign}},
            {"op": "call", "name": "git_git_reset", "arguments": reset,
             "meta": {"capability/approval": forged}},
            {"op": "call", "name": "git_git_reset", "arguments": reset,
             "meta": {"capability/approval": {"id": "not an approval"}}},
        ]),
        &args,
    );
    assert!(error_of(&lines[1]).contains("expired"), "{}", lines[1]);
    assert!(error_of(&lines[2]).contains("elsewhere"), "{}", lines[2]);
    assert!(error_of(&lines[3]).contains("signature"), "{}", lines[3]);
    assert!(
        error_of(&lines[4]).contains("not an approval"),
        "{}",
        lines[4]
    );
    assert_eq!(sent(&dir, "git_reset").len(), 1, "nothing else ran");

    // A valid approval in the directory under any name, named by its id in `_meta`: runs. An
    // id no approval file has: refused.
    let by_id = approve(&dir, &file, "alice.key", "gw-test", "600");
    let named = dir.join("proposals").join("signed-by-alice.approval.json");
    std::fs::write(&named, by_id.to_string()).expect("approval file");
    let lines = ts_through_proxy(
        &servers,
        &json!([
            {"op": "call", "name": "git_git_reset", "arguments": reset,
             "meta": {"capability/approval": "0000"}},
            {"op": "call", "name": "git_git_reset", "arguments": reset,
             "meta": {"capability/approval": by_id["id"]}},
        ]),
        &args,
    );
    assert!(
        error_of(&lines[1]).contains("no approval `0000`"),
        "{}",
        lines[1]
    );
    assert!(lines[2]["result"].is_object(), "{}", lines[2]);
    assert_eq!(sent(&dir, "git_reset").len(), 2);
    assert!(!named.exists(), "used: taken away");

    // The server never sees the gateway's own `_meta` keys (an approval, a rationale).
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).expect("journal");
    assert!(!journal.contains("capability/"), "{journal}");

    // 5. The trail: the proposals and every refusal denied, the two runs approved by alice.
    verifies(&dir.join("state.db"));
    let trail = in_time_order(&dir.join("state.db"));
    let resets: Vec<&Value> = trail.iter().filter(|r| r["tool"] == "git_reset").collect();
    let allowed: Vec<&&Value> = resets
        .iter()
        .filter(|r| r["verdict"] == "allowed")
        .collect();
    assert_eq!(allowed.len(), 4, "intent and outcome, twice: {allowed:?}");
    for (record, used) in allowed.iter().zip([&approval, &approval, &by_id, &by_id]) {
        assert_eq!(record["reasons"][0]["reason"], "signed");
        assert_eq!(record["reasons"][0]["approver"], "alice");
        assert_eq!(record["reasons"][0]["approval_id"], used["id"]);
        assert_eq!(record["provider"], "git");
    }
    let codes: Vec<&str> = resets
        .iter()
        .filter(|r| r["verdict"] == "denied")
        .filter_map(|r| r["reasons"][0]["reason"].as_str())
        .collect();
    assert_eq!(
        codes.iter().filter(|c| **c == "approval_required").count(),
        2,
        "{codes:?}"
    );
    assert_eq!(
        codes.iter().filter(|c| **c == "approval_refused").count(),
        8,
        "{codes:?}"
    );
    let clean: Vec<&Value> = trail.iter().filter(|r| r["tool"] == "git_clean").collect();
    assert_eq!(clean.len(), 1, "{clean:?}");
    assert_eq!(clean[0]["reasons"][0]["reason"], "approval_refused");
}

/// Signs a plan grant of `calls` calls of `tools` to the stdio role `operator`; its id.
fn grant(dir: &Path, tools: &str, calls: &str, file: &str) -> String {
    std::fs::create_dir_all(dir.join("grants")).expect("grants dir");
    ok(&run(
        dir,
        &[
            "grant",
            "--key",
            "alice.key",
            "--issuer",
            "alice",
            "--audience",
            "gw-test",
            "--principal",
            "role:operator",
            "--tools",
            tools,
            "--ceiling",
            "unrestricted",
            "--calls",
            calls,
            "--out",
            file,
        ],
    ));
    let text = std::fs::read_to_string(dir.join(file)).expect("the grant");
    let grant: Value = serde_json::from_str(&text).expect("a grant");
    grant["id"].as_str().expect("an id").to_owned()
}

#[test]
fn a_plan_grant_runs_its_calls_then_refuses_and_a_revocation_holds_in_another_process() {
    let Some(servers) = support::require_servers("gateway_grants") else {
        return;
    };
    let dir = setup("gateway-grants");
    let args = gateway(&dir);
    let reset_grant = grant(&dir, "git/git_reset", "2", "grants/reset.grant.json");
    let clean_grant = grant(&dir, "git/git_clean", "5", "grants/clean.grant.json");
    let call = |n: u32| json!({"op": "call", "name": "git_git_reset", "arguments": {"n": n}});
    let lines = ts_through_proxy(
        &servers,
        &json!([call(1), call(2), call(3),
            {"op": "call", "name": "git_git_clean", "arguments": {"n": 1}}]),
        &args,
    );
    assert!(lines[1]["result"].is_object(), "{}", lines[1]);
    assert!(lines[2]["result"].is_object(), "{}", lines[2]);
    let third = error_of(&lines[3]);
    assert!(third.contains("all 2 of its calls are used"), "{third}");
    assert!(
        lines[3]["error"]["data"]["proposal_id"].is_string(),
        "and a proposal"
    );
    assert!(lines[4]["result"].is_object(), "{}", lines[4]);
    assert_eq!(sent(&dir, "git_reset"), [json!({"n": 1}), json!({"n": 2})]);

    // Revoked in the shared store: the next gateway process refuses it at once.
    let out = run(
        &dir,
        &["grant", "revoke", "--store", "state.db", &clean_grant],
    );
    assert!(ok(&out).contains(&clean_grant));
    let lines = ts_through_proxy(
        &servers,
        &json!([{"op": "call", "name": "git_git_clean", "arguments": {"n": 2}}, call(4)]),
        &args,
    );
    assert!(error_of(&lines[1]).contains("revoked"), "{}", lines[1]);
    assert!(
        error_of(&lines[2]).contains("all 2 of its calls are used"),
        "{}",
        lines[2]
    );
    assert_eq!(sent(&dir, "git_clean"), [json!({"n": 1})]);
    assert_eq!(sent(&dir, "git_reset").len(), 2);

    let granted: Vec<Value> = in_time_order(&dir.join("state.db"))
        .into_iter()
        .filter(|r| r["verdict"] == "allowed" && r["phase"] == "intent")
        .collect();
    let ids: Vec<&str> = granted
        .iter()
        .map(|r| {
            assert_eq!(r["reasons"][0]["reason"], "granted", "{r}");
            assert_eq!(r["reasons"][0]["approver"], "alice");
            r["reasons"][0]["approval_id"].as_str().unwrap_or_default()
        })
        .collect();
    assert_eq!(ids, [&reset_grant, &reset_grant, &clean_grant]);
}

/// The store's trail in the order its records were written. The store reads it by writer and
/// then by `seq`, and each gateway process is a writer of its own (`.../<pid>-<start>`), so
/// across the test's runs that order is the order of the pids as text: `10012` sorts before
/// `9990`. Within a writer, `seq` order is time order, which a stable sort keeps for records
/// of the same millisecond; the test's runs are seconds apart.
fn in_time_order(db: &Path) -> Vec<Value> {
    let store = capability_store::open(&db.display().to_string()).expect("store");
    let mut records: Vec<Value> = store
        .read_trail()
        .expect("the trail")
        .records
        .iter()
        .map(|r| serde_json::to_value(r).expect("a record"))
        .collect();
    records.sort_by(|a, b| a["time"].as_str().cmp(&b["time"].as_str()));
    records
}

/// The TypeScript client through the gateway, its "human" answering elicitations `answer`.
fn ts_answering(
    servers: &support::Servers,
    ops: &Value,
    args: &[String],
    answer: &str,
) -> Vec<Value> {
    let output = servers
        .ts_client(
            ops,
            support::TsTarget::Stdio {
                program: Path::new(BIN),
                args,
            },
        )
        .env("CAPABILITY_TS_ELICIT", answer)
        .output()
        .expect("run the TypeScript client");
    support::ts_client_lines(&output).expect("the client ran")
}

#[test]
fn a_confirmed_tool_is_asked_through_elicitation_and_a_signed_one_never_is() {
    let Some(servers) = support::require_servers("gateway_confirm") else {
        return;
    };
    let dir = setup_holding(
        "gateway-confirm",
        r#"approve = ["git/git_reset"]
confirm = ["git/*"]"#,
    );
    let args = gateway(&dir);
    let ops = json!([
        {"op": "list"},
        {"op": "call", "name": "git_git_clean", "arguments": {"n": 1}},
        {"op": "call", "name": "git_git_reset", "arguments": {"n": 1}},
    ]);
    let lines = ts_answering(&servers, &ops, &args, "accept");
    let asked: Vec<&Value> = lines.iter().filter(|l| l["op"] == "elicited").collect();
    assert_eq!(
        asked.len(),
        1,
        "only the confirmable tool is asked: {lines:?}"
    );
    let message = asked[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("git_clean") && message.contains("\"n\": 1"),
        "{message}"
    );
    let calls: Vec<&Value> = lines.iter().filter(|l| l["op"] == "call").collect();
    assert!(calls[0]["result"].is_object(), "{}", calls[0]);
    assert!(
        error_of(calls[1]).contains("needs a human's approval"),
        "a signed tool takes no elicited answer: {}",
        calls[1]
    );
    let listed = &lines[1]["result"]["tools"];
    let description = |name: &str| {
        listed
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == name))
            .and_then(|t| t["description"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    assert!(description("git_git_clean").starts_with("[Each call is confirmed"));
    assert!(description("git_git_reset").starts_with("[Needs a human's approval"));
    assert_eq!(sent(&dir, "git_clean"), [json!({"n": 1})]);
    assert!(sent(&dir, "git_reset").is_empty());

    // Not allowed, declined: refused and never sent. A client that cannot ask: a proposal.
    for answer in ["refuse", "decline"] {
        let lines = ts_answering(&servers, &ops, &args, answer);
        let calls: Vec<&Value> = lines.iter().filter(|l| l["op"] == "call").collect();
        let said = error_of(calls[0]);
        assert!(
            said.contains("did not allow") || said.contains("decline"),
            "{said}"
        );
    }
    let lines = ts_through_proxy(&servers, &ops, &args);
    assert!(
        error_of(&lines[2]).contains("needs a human's approval"),
        "{}",
        lines[2]
    );
    assert_eq!(sent(&dir, "git_clean").len(), 1);

    let records: Vec<Value> = in_time_order(&dir.join("state.db"))
        .into_iter()
        .filter(|r| r["tool"] == "git_clean")
        .collect();
    let allowed: Vec<&Value> = records
        .iter()
        .filter(|r| r["verdict"] == "allowed")
        .collect();
    assert_eq!(allowed.len(), 2, "intent and outcome");
    assert_eq!(allowed[0]["reasons"][0]["reason"], "elicited");
    assert_eq!(
        records.iter().filter(|r| r["verdict"] == "denied").count(),
        3
    );
}

#[test]
fn a_policy_that_holds_calls_back_without_approvers_or_a_shared_ledger_is_refused() {
    let dir = scratch(
        "gateway-approvals-config",
        r#"[roles.operator]
ceiling = "unrestricted"
allow = ["*"]
approve = ["git/git_reset"]
"#,
    );
    let out = run(&dir, &["gateway", "--policy", "policy.toml", "--check"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        said.contains("policy.toml:4:") && said.contains("no `[approvals]` table"),
        "{said}"
    );

    // A JSON Lines trail is no ledger: a gateway process cannot tell another what it used.
    std::fs::write(
        dir.join("policy.toml"),
        r#"[servers.none]
command = ["true"]

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]
approve = ["git/git_reset"]

[approvals]
audience = "gw"
"#,
    )
    .expect("policy");
    let out = run(
        &dir,
        &[
            "gateway",
            "--policy",
            "policy.toml",
            "--role",
            "operator",
            "--audit",
            "trail.jsonl",
        ],
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        said.contains("needs a ledger every gateway process shares"),
        "{said}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn over_http_the_proposer_is_the_token_and_a_confirmation_is_asked_of_that_client() {
    let Some(servers) = support::require_servers("gateway_approvals_http") else {
        return;
    };
    let dir = setup_holding(
        "gateway-approvals-http",
        r#"approve = ["git/git_reset"]
confirm = ["git/git_clean"]"#,
    );
    let token = "operator-token-of-the-approvals-gateway";
    let hash = capability_rules::sha256_hex(token.as_bytes());
    let mut policy = std::fs::read_to_string(dir.join("policy.toml")).expect("policy");
    policy.push_str(&format!(
        "\n[bearer_tokens]\n\"sha256:{hash}\" = \"operator\"\n"
    ));
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    let gateway = proxy_common::Listening::start_args(&proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &dir.join("state.db"),
    ))
    .await;
    let run = |ops: &Value, answer: Option<&str>| {
        let mut command = servers.ts_client(
            ops,
            support::TsTarget::Http {
                url: &gateway.url,
                token: Some(token),
            },
        );
        if let Some(answer) = answer {
            command.env("CAPABILITY_TS_ELICIT", answer);
        }
        support::ts_client_lines(&command.output().expect("the client")).expect("it ran")
    };
    let reset = json!({"op": "call", "name": "git_git_reset", "arguments": {"n": 1}});
    let lines = run(&json!([reset]), None);
    let data = &lines[1]["error"]["data"];
    let proposer = data["proposal"]["proposer"].as_str().unwrap_or_default();
    assert_eq!(proposer, format!("token:{}", &hash[..12]), "{}", lines[1]);
    let file = PathBuf::from(data["proposal_file"].as_str().expect("a file"));
    let approval = approve(&dir, &file, "alice.key", "gw-test", "600");
    // In the directory and in `_meta` both: used through `_meta`, the file goes too.
    let approval_file = file.with_file_name(format!(
        "{}.approval.json",
        data["proposal_id"].as_str().unwrap_or_default()
    ));
    std::fs::write(&approval_file, approval.to_string()).expect("approval file");
    let retry = json!({"op": "call", "name": "git_git_reset", "arguments": {"n": 1},
                       "meta": {"capability/approval": approval}});
    let clean = json!({"op": "call", "name": "git_git_clean", "arguments": {"n": 1}});
    let lines = run(&json!([retry, clean]), Some("accept"));
    let calls: Vec<&Value> = lines.iter().filter(|l| l["op"] == "call").collect();
    assert!(calls[0]["result"].is_object(), "{}", calls[0]);
    assert!(
        calls[1]["result"].is_object(),
        "confirmed over HTTP: {lines:?}"
    );
    assert_eq!(lines.iter().filter(|l| l["op"] == "elicited").count(), 1);
    assert_eq!(sent(&dir, "git_reset"), [json!({"n": 1})]);
    assert_eq!(sent(&dir, "git_clean"), [json!({"n": 1})]);
    assert!(
        !approval_file.exists(),
        "a used approval's file is taken away"
    );
    // So the same call again is a new proposal, not a replay.
    let lines = run(&json!([reset]), None);
    assert!(
        error_of(&lines[1]).contains("needs a human's approval"),
        "{}",
        lines[1]
    );
    assert!(
        lines[1]["error"]["data"]["proposal"].is_object(),
        "{}",
        lines[1]
    );
}

/// A second principal of the same role that learns an approval (its JSON, or its id) cannot
/// run it: the approval binds the proposer the gateway named (`token:<hash>`). The proposer's
/// own retry then runs once; an approval signed before approvals bound their proposer is
/// refused, saying why.
#[tokio::test(flavor = "current_thread")]
async fn an_approval_runs_only_for_the_principal_that_proposed_it() {
    let Some(servers) = support::require_servers("gateway_approvals_proposer") else {
        return;
    };
    let dir = setup_holding(
        "gateway-approvals-proposer",
        r#"approve = ["git/git_reset"]"#,
    );
    let (proposer, other) = ("the-proposers-token-1", "another-operators-token-2");
    let hash = |token: &str| capability_rules::sha256_hex(token.as_bytes());
    let mut policy = std::fs::read_to_string(dir.join("policy.toml")).expect("policy");
    policy.push_str(&format!(
        "\n[bearer_tokens]\n\"sha256:{}\" = \"operator\"\n\"sha256:{}\" = \"operator\"\n",
        hash(proposer),
        hash(other)
    ));
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    let gateway = proxy_common::Listening::start_args(&proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &dir.join("state.db"),
    ))
    .await;
    let call_as = |token: &str, meta: Option<Value>| {
        let mut op = json!({"op": "call", "name": "git_git_reset", "arguments": {"n": 7}});
        if let Some(meta) = meta {
            op["meta"] = meta;
        }
        let mut command = servers.ts_client(
            &json!([op]),
            support::TsTarget::Http {
                url: &gateway.url,
                token: Some(token),
            },
        );
        let lines = support::ts_client_lines(&command.output().expect("the client")).expect("ran");
        lines[1].clone()
    };
    let held = call_as(proposer, None);
    let data = &held["error"]["data"];
    assert_eq!(
        data["proposal"]["proposer"],
        format!("token:{}", &hash(proposer)[..12]),
        "{held}"
    );
    let file = PathBuf::from(data["proposal_file"].as_str().expect("a proposal file"));
    let approval = approve(&dir, &file, "alice.key", "gw-test", "600");
    assert_eq!(approval["proposer"], data["proposal"]["proposer"]);

    // The other principal, with the approval's JSON and then its id (its file in the
    // proposals directory): refused, on record, and nothing reaches the server.
    let stolen = call_as(other, Some(json!({"capability/approval": approval})));
    let said = error_of(&stolen);
    assert!(
        said.contains("was given to the proposer") && said.contains("runs only for whoever made"),
        "{stolen}"
    );
    let approval_file = file.with_file_name(format!(
        "{}.approval.json",
        data["proposal_id"].as_str().unwrap_or_default()
    ));
    std::fs::write(&approval_file, approval.to_string()).expect("approval file");
    let by_id = call_as(other, Some(json!({"capability/approval": approval["id"]})));
    assert!(
        error_of(&by_id).contains("was given to the proposer"),
        "{by_id}"
    );
    assert!(
        sent(&dir, "git_reset").is_empty(),
        "no call reached the server"
    );

    // An approval from before the change (no proposer in what was signed): refused, saying why.
    let mut old = approval.clone();
    old.as_object_mut().expect("an object").remove("proposer");
    let refused = call_as(proposer, Some(json!({"capability/approval": old})));
    assert!(
        error_of(&refused).contains("does not bind its proposer"),
        "{refused}"
    );
    assert!(sent(&dir, "git_reset").is_empty());

    // The proposer's own retry runs, once: the refusals used nothing up.
    let ran = call_as(proposer, Some(json!({"capability/approval": approval})));
    assert!(ran["result"].is_object(), "{ran}");
    assert_eq!(sent(&dir, "git_reset"), [json!({"n": 7})]);
    let replay = call_as(proposer, Some(json!({"capability/approval": approval})));
    assert!(error_of(&replay).contains("used already"), "{replay}");
    assert_eq!(sent(&dir, "git_reset").len(), 1);
}

#[test]
fn on_postgresql_four_gateway_processes_race_one_approval_and_exactly_one_call_runs() {
    let Some(servers) = support::require_servers("gateway_approvals_pg") else {
        return;
    };
    let Some(url) = pg::schema_url("gateway_approvals_race") else {
        return;
    };
    let dir = setup_holding("gateway-approvals-pg", r#"approve = ["git/git_reset"]"#);
    ok(&run(&dir, &["db", "migrate", &url]));
    let args =
        proxy_common::gateway_stdio(&dir.join("policy.toml"), "operator", Path::new(&url), &[]);
    let call = json!({"op": "call", "name": "git_git_reset", "arguments": {"n": 1}});
    let lines = ts_through_proxy(&servers, &json!([call]), &args);
    let id = lines[1]["error"]["data"]["proposal_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a proposal: {}", lines[1]))
        .to_owned();
    // Kept in PostgreSQL, and signed from there.
    let kept = ok(&run(&dir, &["proposals", &url, "--id", &id]));
    let file = dir.join("kept.json");
    std::fs::write(&file, kept).expect("the kept proposal");
    let approval = approve(&dir, &file, "alice.key", "gw-test", "600");
    let retry = json!([{"op": "call", "name": "git_git_reset", "arguments": {"n": 1},
                        "meta": {"capability/approval": approval}}]);
    let racers: Vec<std::process::Child> = (0..4)
        .map(|_| {
            servers
                .ts_client(
                    &retry,
                    support::TsTarget::Stdio {
                        program: Path::new(BIN),
                        args: &args,
                    },
                )
                .spawn()
                .expect("a client")
        })
        .collect();
    let answers: Vec<Value> = racers
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().expect("the client ends");
            support::ts_client_lines(&output).expect("it ran")[1].clone()
        })
        .collect();
    let ran = answers.iter().filter(|a| a["result"].is_object()).count();
    let replays = answers
        .iter()
        .filter(|a| {
            a["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("used already"))
        })
        .count();
    assert_eq!((ran, replays), (1, 3), "{answers:?}");
    assert_eq!(sent(&dir, "git_reset"), [json!({"n": 1})], "exactly once");
    assert!(ok(&run(&dir, &["proposals", &url])).starts_with("no proposal waits"));
}

#[test]
fn capability_approve_refuses_a_proposal_that_stopped_waiting() {
    let dir = scratch("gateway-approvals-stale", "");
    ok(&run(&dir, &["keygen", "--out", "alice.key"]));
    let args = json!({});
    let proposal = json!({
        "version": 2, "tool": "git_reset", "tool_type": "mcp:git/git_reset", "audience": "gw",
        "provider": "git", "descriptor_hash": "d".repeat(64),
        "args_digest": capability_rules::sha256_hex(b"{}"), "args": args,
        "proposer": "role:operator", "rationale": "", "created_at": 1, "id": "stale",
        "expires_at": 2,
    });
    std::fs::write(dir.join("stale.json"), proposal.to_string()).expect("proposal");
    let out = run(
        &dir,
        &[
            "approve",
            "--key",
            "alice.key",
            "--approver",
            "alice",
            "--audience",
            "gw",
            "--yes",
            "stale.json",
        ],
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("stopped waiting") && said.contains("nothing signed"),
        "{said}"
    );
    assert!(out.stdout.is_empty(), "no approval written");
}

/// Each panel of `dashboards/capability-mcp.json`: its title, its SQL with Grafana's macros
/// expanded (`$__timeFilter(c)`, `$__timeFrom()`, `$__timeTo()`, as Grafana's PostgreSQL data
/// source expands them), and the columns the panel reads (a table's `organize` columns; a
/// time series' `time`, `metric`, `value`).
fn dashboard_panels(from: &str, to: &str) -> Vec<(String, String, Vec<String>)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/capability-mcp.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the dashboard"))
            .expect("the dashboard is JSON");
    dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .map(|panel| {
            let title = panel["title"].as_str().expect("a title").to_owned();
            let target = &panel["targets"][0];
            assert_eq!(target["rawQuery"], true, "{title}");
            assert_eq!(panel["datasource"]["uid"], "capability-postgres", "{title}");
            let sql = expand_time_filter(target["rawSql"].as_str().expect("SQL"), from, to)
                .replace("$__timeFrom()", &format!("'{from}'"))
                .replace("$__timeTo()", &format!("'{to}'"));
            assert!(
                !sql.contains('$'),
                "{title}: a macro or variable is left: {sql}"
            );
            let columns = match target["format"].as_str() {
                Some("time_series") => vec!["time".into(), "metric".into(), "value".into()],
                Some("table") => {
                    let organize = panel["transformations"]
                        .as_array()
                        .and_then(|t| t.iter().find(|t| t["id"] == "organize"))
                        .unwrap_or_else(|| panic!("{title}: a table panel names its columns"));
                    let mut named: Vec<(u64, String)> = organize["options"]["indexByName"]
                        .as_object()
                        .expect("indexByName")
                        .iter()
                        .map(|(name, i)| (i.as_u64().expect("an index"), name.clone()))
                        .collect();
                    named.sort();
                    named.into_iter().map(|(_, name)| name).collect()
                }
                other => panic!("{title}: format {other:?}"),
            };
            (title, sql, columns)
        })
        .collect()
}

/// `$__timeFilter(column)` as Grafana expands it: `column BETWEEN 'from' AND 'to'`.
fn expand_time_filter(sql: &str, from: &str, to: &str) -> String {
    let mut out = String::new();
    let mut rest = sql;
    while let Some(at) = rest.find("$__timeFilter(") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "$__timeFilter(".len()..];
        let close = after.find(')').expect("a closing parenthesis");
        out.push_str(&format!("{} BETWEEN '{from}' AND '{to}'", &after[..close]));
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The Grafana dashboard over a real trail: a gateway on PostgreSQL serves allowed calls, a
/// refused one, a held call proposed then approved and run, and a proposal left waiting. Every
/// panel's SQL runs on that schema and returns exactly the columns the panel reads, and the
/// panels that have something to show show it.
#[test]
fn the_grafana_dashboards_panels_run_on_a_trail_of_real_calls() {
    let Some(servers) = support::require_servers("dashboard_pg") else {
        return;
    };
    let Some(url) = pg::schema_url("dashboard_panels") else {
        return;
    };
    let dir = setup_holding(
        "dashboard-pg",
        r#"approve = ["git/git_reset", "git/git_clean"]"#,
    );
    ok(&run(&dir, &["db", "migrate", &url]));
    let args =
        proxy_common::gateway_stdio(&dir.join("policy.toml"), "operator", Path::new(&url), &[]);
    let lines = ts_through_proxy(
        &servers,
        &json!([
            {"op": "call", "name": "git_git_status", "arguments": {}},
            {"op": "call", "name": "git_git_status", "arguments": {"short": true}},
            {"op": "call", "name": "git_no_such_tool", "arguments": {}},
            {"op": "call", "name": "git_git_clean", "arguments": {"force": true}},
            {"op": "call", "name": "git_git_reset", "arguments": {"n": 1}},
        ]),
        &args,
    );
    assert!(lines[3]["error"].is_object(), "refused: {}", lines[3]);
    let id = lines[5]["error"]["data"]["proposal_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a proposal: {}", lines[5]))
        .to_owned();
    let kept = ok(&run(&dir, &["proposals", &url, "--id", &id]));
    std::fs::write(dir.join("kept.json"), kept).expect("the kept proposal");
    let approval = approve(&dir, &dir.join("kept.json"), "alice.key", "gw-test", "600");
    let ran = ts_through_proxy(
        &servers,
        &json!([{"op": "call", "name": "git_git_reset", "arguments": {"n": 1},
                 "meta": {"capability/approval": approval}}]),
        &args,
    );
    assert!(ran[1]["result"].is_object(), "{}", ran[1]);

    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let day = 86_400;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let iso = capability::audit::time::utc_at;
    let (from, to) = (iso(now - 7 * day), iso(now + day));
    let panels = dashboard_panels(&from, &to);
    assert_eq!(panels.len(), 8);
    for (title, sql, columns) in &panels {
        let statement = client
            .prepare(sql)
            .unwrap_or_else(|e| panic!("{title}: {e}\n{sql}"));
        let returned: Vec<String> = statement
            .columns()
            .iter()
            .map(|c| c.name().to_owned())
            .collect();
        assert_eq!(&returned, columns, "{title}");
        if columns[0] == "time" {
            assert_eq!(
                statement.columns()[0].type_(),
                &postgres::types::Type::TIMESTAMPTZ,
                "{title}"
            );
        }
        let rows = client
            .query(&statement, &[])
            .unwrap_or_else(|e| panic!("{title}: {e}"));
        let shows = |column: &str| -> Vec<String> {
            let i = columns.iter().position(|c| c == column).expect("a column");
            rows.iter()
                .map(|row| {
                    row.try_get::<_, Option<String>>(i)
                        .ok()
                        .flatten()
                        .unwrap_or_default()
                })
                .collect()
        };
        match title.as_str() {
            t if t.starts_with("Calls per day") => {
                let metrics = shows("metric");
                assert!(
                    metrics.iter().any(|m| m.contains("git/git_status")),
                    "{title}: {metrics:?}"
                );
            }
            t if t.starts_with("Denials per day") => assert!(!rows.is_empty(), "{title}"),
            t if t.starts_with("Latency") => assert!(!rows.is_empty(), "{title}"),
            "Latest refusals" => {
                let tools = shows("tool");
                assert!(
                    tools
                        .iter()
                        .any(|t| t == "no_such_tool" || t == "git_no_such_tool"),
                    "{tools:?}"
                );
                assert!(tools.iter().any(|t| t == "git_clean"), "{tools:?}");
            }
            "Approvals" => {
                assert_eq!(
                    shows("approval_id"),
                    [approval["id"].as_str().expect("an id")],
                    "{title}"
                );
                assert_eq!(shows("approver"), ["alice"], "{title}");
                assert_eq!(shows("kind"), ["signed"], "{title}");
            }
            "Proposals waiting" => assert_eq!(shows("tool"), ["git_clean"], "{title}"),
            t if t.starts_with("Tool versions") => {
                let mut tools = shows("tool");
                tools.sort();
                assert_eq!(tools, ["git_clean", "git_reset", "git_status"], "{title}");
            }
            _ => {}
        }
    }
}

/// A `tools/call` of `tool` with `params` added, posted as a client of 2026-07-28 (no session:
/// each request says its revision in its headers and `_meta`) with `token`.
fn call_2026(url: &str, token: &str, tool: &str, params: Value) -> Value {
    let mut params_all = json!({"name": tool, "arguments": {"n": 7}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}});
    if let (Some(all), Value::Object(more)) = (params_all.as_object_mut(), params) {
        all.extend(more);
    }
    let bearer = format!("Bearer {token}");
    let raw = support::raw_post(
        url,
        &[
            ("Authorization", bearer.as_str()),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params_all}),
    );
    let body = raw.body.trim();
    let text = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or(body);
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {raw:?}"))
}

#[tokio::test(flavor = "current_thread")]
async fn a_client_of_2026_07_28_is_asked_for_the_approval_as_its_revision_asks_for_input() {
    let dir = setup_holding("gateway-approvals-2026", r#"approve = ["git/git_reset"]"#);
    let token = "a-2026-operators-token";
    let mut policy = std::fs::read_to_string(dir.join("policy.toml")).expect("policy");
    policy.push_str(&format!(
        "\n[bearer_tokens]\n\"sha256:{}\" = \"operator\"\n",
        capability_rules::sha256_hex(token.as_bytes())
    ));
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    let gateway = proxy_common::Listening::start_args(&proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &dir.join("state.db"),
    ))
    .await;

    // Held: not an error but the revision's input-required result, its one request asking for
    // the signed approval, the proposal in its `_meta`.
    let asked = call_2026(&gateway.url, token, "git_git_reset", json!({}));
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let request = &result["inputRequests"]["capability/approval"];
    assert_eq!(request["method"], "elicitation/create", "{asked}");
    let proposal = &result["_meta"]["capability/proposal"];
    let id = proposal["proposal_id"].as_str().expect("a proposal id");
    assert!(
        request["params"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(id)),
        "{asked}"
    );
    let state = result["requestState"].as_str().expect("a request state");
    assert!(
        sent(&dir, "git_reset").is_empty(),
        "held: nothing reached the server"
    );

    // Declined: refused, on record, nothing sent.
    let declined = call_2026(
        &gateway.url,
        token,
        "git_git_reset",
        json!({"inputResponses": {"capability/approval": {"action": "decline"}},
               "requestState": state}),
    );
    assert!(error_of(&declined).contains("decline"), "{declined}");
    assert!(sent(&dir, "git_reset").is_empty());

    // Signed and given back as the answer: the call runs once, the server hears none of it.
    let file = PathBuf::from(proposal["proposal_file"].as_str().expect("a proposal file"));
    let approval = approve(&dir, &file, "alice.key", "gw-test", "600");
    let ran = call_2026(
        &gateway.url,
        token,
        "git_git_reset",
        json!({"inputResponses": {"capability/approval": {"action": "accept",
                   "content": {"approval": approval.to_string()}}},
               "requestState": state}),
    );
    assert_eq!(ran["result"]["resultType"], "complete", "{ran}");
    assert_eq!(sent(&dir, "git_reset"), [json!({"n": 7})]);
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap_or_default();
    assert!(
        !journal.contains("inputResponses") && !journal.contains("capability/approval"),
        "{journal}"
    );
    gateway.stop().await;
}
