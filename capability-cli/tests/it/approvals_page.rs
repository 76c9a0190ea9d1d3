//! Approvals without a terminal: the approvals page of `capability gateway --listen`, driven in
//! a real browser (Debian's Chromium, over the DevTools protocol with puppeteer-core). A call
//! is held (a proposal); the page, given an approver's token, shows it (proposer, arguments,
//! rationale escaped, times in the browser's local time); the approver's key file is given to
//! the page, which signs in the browser and never sends it; approve is clicked, and the
//! retried call runs once. Another proposal is rejected there, and its retry is told so. A
//! principal whose role `[approvals] page_roles` does not list gets 403, in the browser and
//! over HTTP; a tampered approval is refused. Apart from the browser: a held call is its own
//! verdict `held` in the metrics, the proposals waiting a gauge, and `capability proposals`
//! and `capability approve` show dates.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use proxy_common::{BIN, Listening, scratch};
use support::{browser, raw_post, raw_request};

/// A stdio MCP server in plain Python that journals every line it reads to `$JOURNAL`: two
/// destructive git tools.
const SERVER: &str = r#"
import json, os, sys
journal = open(os.environ["JOURNAL"], "a", buffering=1)
def send(value):
    sys.stdout.write(json.dumps(value) + "\n"); sys.stdout.flush()
def tool(name):
    return {"name": name, "description": name + " of a repository",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": False, "destructiveHint": True}}
for line in sys.stdin:
    journal.write(line)
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "git", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id, "result": {"tools": [tool("git_reset"), tool("git_clean")]}})
    elif method == "tools/call":
        params = message["params"]
        send({"jsonrpc": "2.0", "id": id, "result": {"content": [
            {"type": "text", "text": params["name"] + " " + json.dumps(params.get("arguments"), sort_keys=True)}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": id, "result": {}})
    elif id is not None and method is not None:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
"#;

/// The agent's token (role `operator`, whose destructive calls are held).
const OPERATOR: &str = "operator-token-of-the-approvals-page";
/// An approver's token (role `approver`, which `page_roles` lists).
const APPROVER: &str = "approver-token-of-the-approvals-page";
/// A token of role `viewer`, which `page_roles` does not list.
const VIEWER: &str = "viewer-token-of-the-approvals-page";

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
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

/// The server, alice's key pair, the store (trail and ledger), and a policy whose approvers'
/// page is for the role `approver`.
fn setup(name: &str) -> PathBuf {
    let dir = scratch(name, "");
    std::fs::write(dir.join("git.py"), SERVER).expect("server");
    ok(&run(&dir, &["keygen", "--out", "alice.key"]));
    ok(&run(&dir, &["db", "migrate", "state.db"]));
    let alice = std::fs::read_to_string(dir.join("alice.key.pub")).expect("alice's key");
    let hash = |token: &str| capability_rules::sha256_hex(token.as_bytes());
    let policy = format!(
        r#"version = "page-1"

[servers.git]
command = ["python3", {script:?}]
env = {{ JOURNAL = {journal:?} }}
trust = "trusted"
prefix = "git_"

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]
approve = ["git/git_reset", "git/git_clean"]

[roles.approver]
ceiling = "read-only"
allow = []

[roles.viewer]
ceiling = "read-only"
allow = ["*"]

[bearer_tokens]
"sha256:{operator}" = "operator"
"sha256:{approver}" = "approver"
"sha256:{viewer}" = "viewer"

[approvals]
audience = "gw-page"
proposals = "proposals"
approvers = {{ alice = {alice:?} }}
page_roles = ["approver"]
"#,
        script = dir.join("git.py").display().to_string(),
        journal = dir.join("journal.jsonl").display().to_string(),
        operator = hash(OPERATOR),
        approver = hash(APPROVER),
        viewer = hash(VIEWER),
        alice = alice.trim(),
    );
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    dir
}

/// The gateway on a free port, with `extra` arguments.
async fn gateway(dir: &Path, extra: &[&str]) -> Listening {
    let mut args = proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &dir.join("state.db"),
    );
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    Listening::start_args(&args).await
}

/// An MCP client session over raw HTTP.
struct Session {
    url: String,
    token: &'static str,
    id: String,
}

impl Session {
    fn open(url: &str, token: &'static str) -> Session {
        let bearer = format!("Bearer {token}");
        let opened = raw_post(
            url,
            &[("Authorization", &bearer)],
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}}),
        );
        assert_eq!(opened.status, 200, "{opened:?}");
        let id = opened
            .header("mcp-session-id")
            .expect("a session")
            .to_owned();
        let session = Session {
            url: url.to_owned(),
            token,
            id,
        };
        let initialized =
            session.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(initialized.status, 202, "{initialized:?}");
        session
    }

    fn post(&self, body: &Value) -> support::Raw {
        let bearer = format!("Bearer {}", self.token);
        raw_post(
            &self.url,
            &[
                ("Authorization", &bearer),
                ("Mcp-Session-Id", &self.id),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            body,
        )
    }

    /// A `tools/call`: its JSON-RPC answer.
    fn call(&self, name: &str, arguments: &Value, meta: Option<Value>) -> Value {
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        let answer = self
            .post(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}));
        assert_eq!(answer.status, 200, "{answer:?}");
        answer
            .body
            .lines()
            .map(|line| line.strip_prefix("data:").unwrap_or(line).trim())
            .find_map(|line| {
                serde_json::from_str::<Value>(line)
                    .ok()
                    .filter(|v| v.get("jsonrpc").is_some())
            })
            .unwrap_or_else(|| panic!("a JSON-RPC answer in {answer:?}"))
    }

    /// A held call: the proposal in its error's data.
    fn held(&self, name: &str, arguments: &Value, meta: Option<Value>) -> Value {
        let answer = self.call(name, arguments, meta);
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("awaits one"), "held: {answer}");
        answer["error"]["data"]["proposal"].clone()
    }
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

/// A request of the page's API as `token` (none: no `Authorization`).
fn page_api(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> support::Raw {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer));
    }
    let body = body.map(Value::to_string).unwrap_or_default();
    raw_request(
        method,
        &format!("{base}/approvals/api/{path}"),
        &headers,
        &body,
    )
}

/// A Unix time as the page shows it in the time zone UTC+05:30 (Asia/Kolkata, no daylight
/// saving): `YYYY-MM-DD HH:MM:SS (UTC+05:30)`.
fn in_kolkata(secs: u64) -> String {
    let utc = capability::audit::time::utc_at(secs + 5 * 3600 + 30 * 60);
    format!("{} {} (UTC+05:30)", &utc[..10], &utc[11..19])
}

/// The browser's lines, parsed; the run must succeed.
fn drive(browser: &browser::Browser, url: &str, ops: &Value) -> Vec<Value> {
    let output = browser
        .drive(url, "Asia/Kolkata", ops)
        .output()
        .expect("run the browser's driver");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the driver failed ({}): {stdout}",
        output.status
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn in_chromium_an_approver_signs_with_their_own_key_and_the_held_call_runs_once() {
    let Some(browser) = browser::require("approvals_page") else {
        return;
    };
    let dir = setup("approvals-page");
    let gateway = gateway(&dir, &[]).await;
    let base = gateway.url.trim_end_matches("/mcp").to_owned();
    let page = format!("{base}/approvals");
    let agent = Session::open(&gateway.url, OPERATOR);

    // 1. Two calls held, with text that would be markup or reorder the line if written raw.
    let reset = json!({"repo_path": "/srv/repo", "mode": "hard", "note": "<img src=x onerror=alert(1)>\u{200b}"});
    let rationale = "the branch is corrupt <script>alert(1)</script>\u{202e}gnp";
    let meta = json!({"capability/rationale": rationale});
    let first = agent.held("git_git_reset", &reset, Some(meta));
    let clean = json!({"repo_path": "/srv/repo"});
    let second = agent.held("git_git_clean", &clean, None);
    let (id1, id2) = (
        first["id"].as_str().expect("an id"),
        second["id"].as_str().expect("an id"),
    );
    assert!(sent(&dir, "git_reset").is_empty() && sent(&dir, "git_clean").is_empty());

    // 2. The page over HTTP: its files to anyone, with a policy that allows only its own script
    //    and style; its data only to an approver's token, from its own origin and Host.
    let html = raw_request("GET", &page, &[], "");
    assert_eq!(html.status, 200, "{html:?}");
    let csp = html.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
        "{csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(
        html.body
            .contains(r#"<script src="/approvals/page.js" defer></script>"#)
    );
    assert_eq!(page_api(&base, "GET", "proposals", None, None).status, 401);
    let refused = page_api(&base, "GET", "proposals", Some(VIEWER), None);
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(refused.body.contains("page_roles"), "{refused:?}");
    let bearer = format!("Bearer {APPROVER}");
    let other_origin = raw_request(
        "GET",
        &format!("{base}/approvals/api/proposals"),
        &[
            ("Authorization", &bearer),
            ("Origin", "http://attacker.example"),
        ],
        "",
    );
    assert_eq!(other_origin.status, 403, "{other_origin:?}");
    let port = base.rsplit(':').next().expect("a port");
    let rebound = raw_request(
        "GET",
        &format!("{base}/approvals/api/proposals"),
        &[
            ("Authorization", &bearer),
            ("Host", &format!("attacker.example:{port}")),
        ],
        "",
    );
    assert_eq!(rebound.status, 403, "{rebound:?}");

    // 3. In the browser, a viewer's token: 403, said on the page.
    let lines = drive(&browser, &page, &json!([{"op": "load", "token": VIEWER}]));
    assert_eq!(lines[1]["op"], "load", "{lines:?}");
    assert_eq!(lines[1]["http"], 403, "{lines:?}");
    assert_eq!(lines[1]["state"], "error", "{lines:?}");
    assert!(
        lines[1]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("page_roles"),
        "{lines:?}"
    );
    assert_eq!(lines[1]["proposals"], json!([]), "{lines:?}");

    // 4. In the browser, the approver: both proposals shown, escaped, in local time; alice's
    //    key given as her key file; the first approved, the second rejected.
    let key = dir.join("alice.key").display().to_string();
    let lines = drive(
        &browser,
        &page,
        &json!([
            {"op": "load", "token": APPROVER},
            {"op": "read", "proposal": id1},
            {"op": "key", "file": key},
            {"op": "approve", "proposal": id1},
            {"op": "reject", "proposal": id2, "reason": "not on a Friday"},
        ]),
    );
    let line = |op: &str| {
        lines
            .iter()
            .find(|l| l["op"] == op)
            .unwrap_or_else(|| panic!("{op} in {lines:?}"))
            .clone()
    };
    let opened = line("open");
    assert_eq!(opened["status"], 200, "{opened}");
    let loaded = line("load");
    assert_eq!(
        (loaded["http"].clone(), loaded["state"].clone()),
        (json!(200), json!("ok")),
        "{loaded}"
    );
    let mut shown: Vec<&str> = loaded["proposals"]
        .as_array()
        .expect("ids")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    shown.sort_unstable();
    let mut both = vec![id1, id2];
    both.sort_unstable();
    assert_eq!(shown, both, "{loaded}");
    let read = line("read");
    let fields = &read["fields"];
    assert_eq!(read["title"], "git/git_reset", "{read}");
    assert_eq!(fields["id"], id1, "{read}");
    assert_eq!(fields["proposer"], first["proposer"], "{read}");
    assert!(
        first["proposer"]
            .as_str()
            .unwrap_or_default()
            .starts_with("token:"),
        "{first}"
    );
    assert_eq!(
        fields["rationale"], "the branch is corrupt <script>alert(1)</script>\\u{202e}gnp",
        "shown as text, the override escaped: {read}"
    );
    let arguments = fields["arguments"].as_str().unwrap_or_default();
    assert!(
        arguments.contains(r#""note": "<img src=x onerror=alert(1)>\u{200b}""#),
        "{read}"
    );
    assert!(
        arguments.contains("\n  \"mode\": \"hard\",\n"),
        "one argument a line: {read}"
    );
    assert!(!arguments.contains("\\u{a}"), "line breaks kept: {read}");
    let created = first["created_at"].as_u64().expect("created_at");
    assert_eq!(fields["created"], in_kolkata(created), "local time: {read}");
    assert_eq!(
        fields["created_datetime"],
        capability::audit::time::utc_at(created),
        "{read}"
    );
    assert_eq!(
        fields["expires"],
        in_kolkata(first["expires_at"].as_u64().expect("expires")),
        "{read}"
    );
    let keyed = line("key");
    assert_eq!(
        (keyed["state"].clone(), keyed["text"].clone()),
        (json!("ok"), json!("signing as alice")),
        "{keyed}"
    );
    let approved = line("approve");
    assert_eq!(
        (approved["state"].clone(), approved["http"].clone()),
        (json!("ok"), json!(201)),
        "{approved}"
    );
    let rejected = line("reject");
    assert_eq!(
        (rejected["state"].clone(), rejected["http"].clone()),
        (json!("ok"), json!(200)),
        "{rejected}"
    );
    let end = line("end");
    assert_eq!(
        end["errors"],
        json!([]),
        "no script error, no CSP violation: {end}"
    );
    assert_eq!(end["key_sent"], false, "the key is in no request: {end}");

    // 5. What the page gave the gateway: alice's approval of exactly this proposal, kept where
    //    the retry finds it; the gateway holds no secret key.
    let kept = dir.join("proposals").join(format!("{id1}.approval.json"));
    let approval: Value =
        serde_json::from_str(&std::fs::read_to_string(&kept).expect("the approval is kept"))
            .expect("json");
    assert_eq!(approval["approver"], "alice");
    assert_eq!(approval["proposer"], first["proposer"]);
    assert_eq!(approval["args_digest"], first["args_digest"]);
    assert_eq!(approval["audience"], "gw-page");

    // 6. Refused over HTTP: the same approval again (kept already), a tampered one, one from a
    //    viewer, one that is not JSON.
    let post =
        |token: &str, body: &Value| page_api(&base, "POST", "approve", Some(token), Some(body));
    let again = post(APPROVER, &json!({"proposal": id1, "approval": approval}));
    assert_eq!(again.status, 409, "{again:?}");
    let mut tampered = approval.clone();
    tampered["expires_at"] = json!(approval["expires_at"].as_u64().expect("expires") + 3600);
    let forged = post(APPROVER, &json!({"proposal": id1, "approval": tampered}));
    assert_eq!(forged.status, 400, "{forged:?}");
    assert!(forged.body.contains("signature"), "{forged:?}");
    assert_eq!(
        post(VIEWER, &json!({"proposal": id1, "approval": approval})).status,
        403
    );
    let plain = raw_request(
        "POST",
        &format!("{base}/approvals/api/approve"),
        &[("Authorization", &bearer), ("Content-Type", "text/plain")],
        &json!({"proposal": id1, "approval": approval}).to_string(),
    );
    assert_eq!(plain.status, 415, "{plain:?}");

    // 7. The agent retries: the approved call runs once, with the signed arguments; the
    //    rejected one is told so and runs nothing; each made again is a new proposal.
    let ran = agent.call("git_git_reset", &reset, None);
    let text = ran["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("git_reset "), "{ran}");
    assert_eq!(sent(&dir, "git_reset"), vec![reset.clone()]);
    assert!(!kept.exists(), "used");
    agent.held("git_git_reset", &reset, None);
    let told = agent.call("git_git_clean", &clean, None);
    let message = told["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("rejected by") && message.contains("not on a Friday"),
        "{told}"
    );
    agent.held("git_git_clean", &clean, None);
    assert_eq!(sent(&dir, "git_reset").len(), 1);
    assert!(sent(&dir, "git_clean").is_empty());

    // 8. On record: the page's approval and rejection as the approver's principal, the
    //    viewer's refusal, and the call that ran with alice's signature.
    let trail = capability_store::open(&dir.join("state.db").display().to_string())
        .expect("the store")
        .read_trail()
        .expect("the trail");
    let of = |method: &str| {
        trail
            .records
            .iter()
            .filter(|r| r.method.as_deref() == Some(method))
            .map(|r| serde_json::to_value(r).expect("a record"))
            .collect::<Vec<Value>>()
    };
    let approvals = of("approvals/approve");
    assert!(
        approvals
            .iter()
            .any(|r| r["reasons"][0]["reason"] == "approved" && r["role"] == "approver"),
        "{approvals:?}"
    );
    assert!(
        approvals
            .iter()
            .any(|r| r["reasons"][0]["reason"] == "refused"),
        "{approvals:?}"
    );
    let rejections = of("approvals/reject");
    assert_eq!(rejections.len(), 1, "{rejections:?}");
    assert_eq!(rejections[0]["reasons"][0]["reason"], "rejected");
    assert!(of("approvals/list").iter().any(|r| r["role"] == "viewer"));
    let signed = of("tools/call")
        .into_iter()
        .any(|r| r["reasons"].to_string().contains(r#""approver":"alice""#));
    assert!(signed, "the call ran on alice's approval");
    assert_eq!(gateway.stop().await.code(), Some(0));
}

/// A raw `GET /metrics` on `port`: the text.
fn scrape(port: u16) -> String {
    let answer = raw_request("GET", &format!("http://127.0.0.1:{port}/metrics"), &[], "");
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

#[tokio::test(flavor = "current_thread")]
async fn a_held_call_is_its_own_verdict_in_the_metrics_and_pending_proposals_a_gauge() {
    let dir = setup("approvals-metrics");
    let port = capability_testkit::free_port();
    let address = format!("127.0.0.1:{port}");
    let gateway = gateway(&dir, &["--metrics", &address]).await;
    let text = scrape(port);
    assert!(
        text.contains("\ncapability_proposals_pending 0\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE capability_proposals_pending gauge"),
        "{text}"
    );

    let agent = Session::open(&gateway.url, OPERATOR);
    let reset = json!({"repo_path": "/srv/repo", "mode": "hard"});
    let proposal = agent.held("git_git_reset", &reset, None);
    let text = scrape(port);
    let has = |line: &str| text.lines().any(|l| l == line);
    assert!(
        has(
            r#"capability_calls_total{server="git",tool="git_reset",role="operator",verdict="held"} 1"#
        ),
        "{text}"
    );
    assert!(
        !text.contains(r#"tool="git_reset",role="operator",verdict="denied""#),
        "{text}"
    );
    assert!(
        !text.contains(r#"reason="approval_required""#),
        "a held call is no denial: {text}"
    );
    assert!(has("capability_proposals_pending 1"), "{text}");

    // Approved with `capability approve`, retried: it runs, and nothing waits any more.
    let file = dir
        .join("proposals")
        .join(format!("{}.json", proposal["id"].as_str().expect("id")));
    let approval_file = file.with_extension("approval.json");
    ok(&run(
        &dir,
        &[
            "approve",
            "--key",
            "alice.key",
            "--approver",
            "alice",
            "--audience",
            "gw-page",
            "--yes",
            "--out",
            &approval_file.display().to_string(),
            &file.display().to_string(),
        ],
    ));
    let ran = agent.call("git_git_reset", &reset, None);
    assert!(ran["result"].is_object(), "{ran}");
    let text = scrape(port);
    let has = |line: &str| text.lines().any(|l| l == line);
    assert!(
        has(
            r#"capability_calls_total{server="git",tool="git_reset",role="operator",verdict="allowed"} 1"#
        ),
        "{text}"
    );
    assert!(has("capability_proposals_pending 0"), "{text}");
    assert_eq!(gateway.stop().await.code(), Some(0));
}

#[tokio::test(flavor = "current_thread")]
async fn capability_proposals_and_approve_show_dates_and_json_keeps_the_numbers() {
    let dir = setup("approvals-dates");
    let gateway = gateway(&dir, &[]).await;
    let agent = Session::open(&gateway.url, OPERATOR);
    let proposal = agent.held("git_git_reset", &json!({"repo_path": "/srv/repo"}), None);
    let (created, expires) = (
        proposal["created_at"].as_u64().expect("created"),
        proposal["expires_at"].as_u64().expect("expires"),
    );
    let date = capability::audit::time::utc_at;
    let listed = ok(&run(&dir, &["proposals", "state.db"]));
    assert!(
        listed.contains(&format!(
            "proposed {}  waits until {}",
            date(created),
            date(expires)
        )),
        "{listed}"
    );
    assert!(
        !listed.contains(&expires.to_string()),
        "no raw Unix time: {listed}"
    );
    let json: Value =
        serde_json::from_str(ok(&run(&dir, &["proposals", "state.db", "--json"])).trim())
            .expect("one JSON line");
    assert_eq!(json["expires_at"], expires, "{json}");
    assert_eq!(json["created_at_rfc3339"], date(created), "{json}");
    assert_eq!(json["expires_at_rfc3339"], date(expires), "{json}");

    let file = dir
        .join("proposals")
        .join(format!("{}.json", proposal["id"].as_str().expect("id")));
    let signed = run(
        &dir,
        &[
            "approve",
            "--key",
            "alice.key",
            "--approver",
            "alice",
            "--audience",
            "gw-page",
            "--yes",
            "--expires-in",
            "600",
            &file.display().to_string(),
        ],
    );
    ok(&signed);
    let screen = String::from_utf8_lossy(&signed.stderr);
    assert!(
        screen.contains(&format!("proposed at {}", date(created))),
        "{screen}"
    );
    let approval: Value = serde_json::from_slice(&signed.stdout).expect("the approval");
    let until = approval["expires_at"].as_u64().expect("expires_at");
    assert!(
        screen.contains(&format!("in 600 s (at {})", date(until))),
        "{screen}"
    );
    assert_eq!(gateway.stop().await.code(), Some(0));
}
