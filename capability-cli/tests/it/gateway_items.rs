//! Resources and prompts across the gateway's servers: the reference server `server-everything`
//! and a Python server that journals what it is sent (`notes`), with the official TypeScript and
//! Python SDK clients over stdio and an rmcp client of 2026-07-28.
//!
//! - One listing of each: resources keep their URIs (names under the prefix), prompts are shown
//!   under the prefix; each entry only when the role may read or get it, decided on the
//!   servers' own names (`notes/notes://public/*`, `notes/greet`).
//! - A read goes to the one server that serves the URI (lists it, or a template of it matches);
//!   a URI two servers serve is withheld and its read refused; a URI no server serves, a hidden
//!   one, a prompt of another role or an unprefixed name: refused on record, and the server's
//!   journal shows it never arrived. An allowed get reaches the server under its own name.
//! - A server's `resources/list_changed` is listed again and the client told.
//! - Subscriptions and completions go to the server that serves the URI, the template or the
//!   prompt (under its own name), decided and recorded; a refused one never arrives; of the
//!   server's `resources/updated`, the client is told only what its role may read.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use proxy_common::{BIN, calls, scratch};
use support::auth::python_stdio_client;
use support::{TsTarget, ts_client_lines};

/// A stdio MCP server in plain Python with resources, a template and prompts; journals each
/// line it reads to `$JOURNAL`. Its tool `add` lists one more note and says its lists changed.
const NOTES: &str = r#"
import json, os, sys
journal = open(os.environ["JOURNAL"], "a", buffering=1)
def send(message):
    message["jsonrpc"] = "2.0"
    sys.stdout.write(json.dumps(message) + "\n"); sys.stdout.flush()
notes = {"notes://public/1": "the first public note", "notes://private/1": "a private note",
         "demo://resource/dynamic/text/1": "also served by everything's template"}
for line in sys.stdin:
    journal.write(line)
    message = json.loads(line)
    method, id, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method == "initialize":
        send({"id": id, "result": {"protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}, "resources": {"listChanged": True, "subscribe": True},
                             "prompts": {}, "completions": {}},
            "serverInfo": {"name": "notes", "version": "1"}}})
    elif method == "tools/list":
        send({"id": id, "result": {"tools": [{"name": "add", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True}}]}})
    elif method == "tools/call":
        notes["notes://public/2"] = "a second public note"
        send({"method": "notifications/resources/list_changed"})
        send({"id": id, "result": {"content": [{"type": "text", "text": "added"}]}})
    elif method == "resources/list":
        send({"id": id, "result": {"resources": [
            {"uri": uri, "name": uri.rsplit("/", 2)[-2] + "-" + uri.rsplit("/", 1)[-1]}
            for uri in notes]}})
    elif method == "resources/templates/list":
        send({"id": id, "result": {"resourceTemplates": [
            {"uriTemplate": "notes://public/{id}", "name": "public-note"}]}})
    elif method == "resources/read":
        uri = params["uri"]
        text = notes.get(uri, "public note " + uri.rsplit("/", 1)[-1])
        send({"id": id, "result": {"contents": [{"uri": uri, "text": "notes: " + text}]}})
    elif method == "prompts/list":
        send({"id": id, "result": {"prompts": [
            {"name": "greet", "arguments": [{"name": "who", "required": True}]},
            {"name": "secret"}]}})
    elif method == "prompts/get":
        who = (params.get("arguments") or {}).get("who", "nobody")
        send({"id": id, "result": {"messages": [{"role": "user",
            "content": {"type": "text", "text": "notes greets " + who + " as " + params["name"]}}]}})
    elif method == "resources/subscribe":
        send({"id": id, "result": {}})
        # The subscribed URI changes; so does a private one (which no reader may be told of).
        send({"method": "notifications/resources/updated", "params": {"uri": "notes://private/1"}})
        send({"method": "notifications/resources/updated", "params": {"uri": params["uri"]}})
    elif method == "resources/unsubscribe":
        send({"id": id, "result": {}})
    elif method == "completion/complete":
        ref = params["ref"]
        named = ref.get("name") or ref.get("uri")
        send({"id": id, "result": {"completion": {"values": [named + ":" + params["argument"]["value"]]}}})
    elif method == "ping":
        send({"id": id, "result": {}})
    elif id is not None and method is not None:
        send({"id": id, "error": {"code": -32601, "message": "no"}})
"#;

fn fleet(dir: &Path, everything: &support::McpServer) -> std::path::PathBuf {
    std::fs::write(dir.join("notes.py"), NOTES).expect("server");
    let policy = format!(
        r#"version = "items/1"

[roles.reader]
ceiling = "read-only"
allow = ["notes/add"]
resources = ["notes/notes://public/*", "everything/demo://resource/dynamic/text/*"]
prompts = ["notes/greet", "everything/simple-prompt"]

[roles.nobody]
ceiling = "read-only"
allow = []

[servers.everything]
command = {everything}
trust = "trusted"
prefix = "ev_"

[servers.notes]
command = ["python3", {script:?}]
env = {{ JOURNAL = {journal:?} }}
trust = "trusted"
prefix = "notes_"
"#,
        everything = everything.toml_command(),
        script = dir.join("notes.py").display().to_string(),
        journal = dir.join("journal.jsonl").display().to_string(),
    );
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    dir.join("policy.toml")
}

fn args(dir: &Path, role: &str) -> Vec<String> {
    let trail = dir.join(format!("trail-{role}.jsonl"));
    proxy_common::gateway_stdio(&dir.join("policy.toml"), role, &trail, &[])
}

/// What the notes server was sent, by method.
fn journal(dir: &Path, method: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == method)
        .map(|m| m["params"].clone())
        .collect()
}

fn strings(values: &Value, key: &str) -> Vec<String> {
    values
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i[key].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn error_of(line: &Value) -> String {
    line["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("an error: {line}"))
        .to_owned()
}

#[test]
fn the_typescript_client_is_served_each_servers_resources_and_prompts_as_its_role_allows() {
    let Some(servers) = support::require_servers("gateway_items_ts") else {
        return;
    };
    let dir = scratch("gateway-items-ts", "");
    fleet(&dir, &servers.everything());
    let ops = json!([
        {"op": "resources"},
        {"op": "templates"},
        {"op": "read", "uri": "notes://public/1"},
        {"op": "read", "uri": "notes://public/7"},
        {"op": "read", "uri": "demo://resource/dynamic/text/2"},
        {"op": "read", "uri": "notes://private/1"},
        {"op": "read", "uri": "demo://resource/dynamic/text/1"},
        {"op": "read", "uri": "unknown://x"},
        {"op": "prompts"},
        {"op": "prompt", "name": "notes_greet", "arguments": {"who": "Ada"}},
        {"op": "prompt", "name": "notes_secret"},
        {"op": "prompt", "name": "greet", "arguments": {"who": "Ada"}},
    ]);
    let args = args(&dir, "reader");
    let output = servers
        .ts_client(
            &ops,
            TsTarget::Stdio {
                program: Path::new(BIN),
                args: &args,
            },
        )
        .output()
        .expect("runs the client");
    let lines = ts_client_lines(&output).expect("the client ran");
    let capabilities = &lines[0]["serverInfo"];
    assert!(capabilities.is_object(), "{}", lines[0]);

    // Listed: only what the role may read, each URI as its server wrote it.
    let resources = &lines[1]["result"]["resources"];
    assert_eq!(
        strings(resources, "uri"),
        ["notes://public/1"],
        "everything's static documents are not the role's, notes://private/1 is hidden, and \
         demo://resource/dynamic/text/1 is served by two servers: {resources}"
    );
    assert_eq!(strings(resources, "name"), ["notes_public-1"]);
    let templates = &lines[2]["result"]["resourceTemplates"];
    assert_eq!(
        strings(templates, "uriTemplate"),
        [
            "demo://resource/dynamic/text/{resourceId}",
            "notes://public/{id}"
        ],
        "the blob template is not the role's: {templates}"
    );
    assert!(
        strings(templates, "name")
            .iter()
            .all(|n| n.starts_with("ev_") || n.starts_with("notes_")),
        "{templates}"
    );

    // Reads routed to the server that serves each URI.
    let text = |line: &Value| {
        line["result"]["contents"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("a read: {line}"))
            .to_owned()
    };
    assert_eq!(text(&lines[3]), "notes: the first public note");
    assert_eq!(
        text(&lines[4]),
        "notes: public note 7",
        "by notes' template"
    );
    assert!(
        !text(&lines[5]).starts_with("notes:"),
        "everything's template: {}",
        lines[5]
    );
    let private = error_of(&lines[6]);
    assert!(
        private.contains("resource `notes://private/1` refused by capability-gateway"),
        "{private}"
    );
    let shared = error_of(&lines[7]);
    assert!(
        shared.contains("servers everything and notes each serve it"),
        "{shared}"
    );
    assert!(
        error_of(&lines[8]).contains("no server lists it or has a template that matches it"),
        "{}",
        lines[8]
    );
    let read: Vec<String> = journal(&dir, "resources/read")
        .iter()
        .map(|p| p["uri"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        read,
        ["notes://public/1", "notes://public/7"],
        "the refused reads never reached notes"
    );

    // Prompts: shown under the prefix, got under the server's own name.
    let prompts = strings(&lines[9]["result"]["prompts"], "name");
    assert_eq!(prompts, ["ev_simple-prompt", "notes_greet"], "{}", lines[9]);
    assert_eq!(
        lines[10]["result"]["messages"][0]["content"]["text"], "notes greets Ada as greet",
        "{}",
        lines[10]
    );
    assert!(
        error_of(&lines[11]).contains("prompt `notes_secret` refused by capability-gateway"),
        "{}",
        lines[11]
    );
    assert!(
        error_of(&lines[12]).contains("no server lists a prompt of this name"),
        "{}",
        lines[12]
    );
    let got = journal(&dir, "prompts/get");
    assert_eq!(got.len(), 1, "only the allowed get reached notes: {got:?}");
    assert_eq!(got[0]["name"], "greet");
    assert_eq!(got[0]["arguments"], json!({"who": "Ada"}));

    // On record, with the server as provider and the URI or prompt as the target.
    let records = calls(&dir.join("trail-reader.jsonl"));
    let decided = |method: &str| -> Vec<(String, String, String)> {
        records
            .iter()
            .filter(|r| r["method"] == method)
            .map(|r| {
                let text = |key: &str| r[key].as_str().unwrap_or_default().to_owned();
                (text("provider"), text("tool"), text("verdict"))
            })
            .collect()
    };
    let own = |provider: &str, target: &str, verdict: &str| {
        (provider.to_owned(), target.to_owned(), verdict.to_owned())
    };
    assert_eq!(
        decided("resources/read"),
        [
            own("notes", "notes://public/1", "allowed"),
            own("notes", "notes://public/7", "allowed"),
            own("everything", "demo://resource/dynamic/text/2", "allowed"),
            own("notes", "notes://private/1", "denied"),
            own("", "demo://resource/dynamic/text/1", "denied"),
            own("", "unknown://x", "denied"),
        ],
        "{records:#?}"
    );
    assert_eq!(
        decided("prompts/get"),
        [
            own("notes", "greet", "allowed"),
            own("notes", "secret", "denied"),
            own("", "greet", "denied"),
        ]
    );
}

#[test]
fn the_python_client_of_a_role_without_items_sees_none_and_reads_nothing() {
    let Some(servers) = support::require_servers("gateway_items_py") else {
        return;
    };
    let dir = scratch("gateway-items-py", "");
    fleet(&dir, &servers.everything());
    let ops = json!([
        {"op": "resources"},
        {"op": "prompts"},
        {"op": "read", "uri": "notes://public/1"},
        {"op": "prompt", "name": "notes_greet", "arguments": {"who": "Bo"}},
    ]);
    let run = |role: &str| -> Vec<Value> {
        let mut command = vec![BIN.to_owned()];
        command.extend(args(&dir, role));
        let output = python_stdio_client(&dir, &ops, &command)
            .expect("the Python SDK")
            .output()
            .expect("runs the Python client");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{stdout}");
        stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    };
    let reader = run("reader");
    assert_eq!(
        reader[0]["resources"],
        json!([["notes://public/1", "notes_public-1"]]),
        "{reader:?}"
    );
    assert_eq!(
        reader[1]["prompts"],
        json!(["ev_simple-prompt", "notes_greet"])
    );
    assert_eq!(
        reader[2]["result"]["contents"][0]["text"],
        "notes: the first public note"
    );
    assert_eq!(
        reader[3]["result"]["messages"][0]["content"]["text"],
        "notes greets Bo as greet"
    );
    let nobody = run("nobody");
    assert_eq!(nobody[0]["resources"], json!([]), "{nobody:?}");
    assert_eq!(nobody[1]["prompts"], json!([]));
    assert!(
        nobody[2]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("refused by capability-gateway")),
        "{}",
        nobody[2]
    );
    assert!(
        nobody[3]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("refused by capability-gateway")),
        "{}",
        nobody[3]
    );
    assert_eq!(
        journal(&dir, "resources/read").len(),
        1,
        "only the reader's read reached notes"
    );
    assert_eq!(journal(&dir, "prompts/get").len(), 1);
}

/// Counts the `notifications/resources/list_changed` and `tools/list_changed` the gateway sends,
/// and keeps the URIs of its `notifications/resources/updated`.
#[derive(Clone, Default)]
struct Told {
    resources: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    tools: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    updated: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Told {
    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.updated.lock().expect("updated").push(params.uri);
    }

    async fn on_resource_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.resources
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.tools.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_servers_resource_list_change_is_listed_again_and_the_client_told_of_that_list() {
    let Some(servers) = support::require_servers("gateway_items_changed") else {
        return;
    };
    let dir = scratch("gateway-items-changed", "");
    fleet(&dir, &servers.everything());
    let told = Told::default();
    let (_child, client) = proxy_common::Proxied::spawn_for(
        &args(&dir, "reader"),
        told.clone(),
        rmcp::service::ClientLifecycleMode::Initialize,
    )
    .await;
    let uris = |resources: &[rmcp::model::Resource]| -> Vec<String> {
        resources.iter().map(|r| r.uri.clone()).collect()
    };
    let before = client.peer().list_all_resources().await.expect("lists");
    assert_eq!(uris(&before), ["notes://public/1"]);
    let mut add = rmcp::model::CallToolRequestParams::new("notes_add");
    add.arguments = Some(serde_json::Map::new());
    client.peer().call_tool(add).await.expect("add runs");
    let started = Instant::now();
    while told.resources.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the client was not told"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    loop {
        let after = client.peer().list_all_resources().await.expect("lists");
        if uris(&after) == ["notes://public/1", "notes://public/2"] {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not listed again: {:?}",
            uris(&after)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        told.tools.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the tools did not change, so the client is not told they did"
    );
    let _ = client.cancel().await;
}

#[test]
fn check_shows_each_roles_resources_and_prompts_and_what_two_servers_claim() {
    let Some(servers) = support::require_servers("gateway_items_check") else {
        return;
    };
    let dir = scratch("gateway-items-check", "");
    let policy = fleet(&dir, &servers.everything());
    let check = |extra: &[&str]| {
        std::process::Command::new(BIN)
            .args(["gateway", "--check", "--policy"])
            .arg(&policy)
            .args(extra)
            .env("TMPDIR", env!("CARGO_TARGET_TMPDIR"))
            .output()
            .expect("runs")
    };
    let output = check(&["--json"]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "a URI two servers serve: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let reader = report["roles"]
        .as_array()
        .and_then(|roles| roles.iter().find(|r| r["role"] == "reader"))
        .cloned()
        .expect("the reader");
    assert_eq!(
        reader["resources"],
        json!([{"uri": "notes://public/1", "server": "notes", "own": "public-1"}])
    );
    assert_eq!(
        strings(&reader["prompts"], "shown"),
        ["ev_simple-prompt", "notes_greet"]
    );
    assert_eq!(
        strings(&reader["templates"], "uri_template"),
        [
            "demo://resource/dynamic/text/{resourceId}",
            "notes://public/{id}"
        ]
    );
    assert_eq!(
        report["item_collisions"],
        json!([{"kind": "resource", "shown": "demo://resource/dynamic/text/1", "by": ["everything", "notes"]}])
    );
    let text = String::from_utf8_lossy(&check(&["--role", "reader"]).stdout).into_owned();
    assert!(text.contains("  prompts: 2 of "), "{text}");
    assert!(
        text.lines().any(|l| l.contains("prompt")
            && l.contains("notes_greet")
            && l.contains("notes/greet")),
        "{text}"
    );
    assert!(
        text.contains("resource demo://resource/dynamic/text/1: everything, notes"),
        "{text}"
    );
    assert!(
        journal(&dir, "resources/read").is_empty(),
        "a check reads nothing"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn subscriptions_and_completions_are_routed_decided_recorded_and_updates_told_as_the_role_may_read()
 {
    let Some(servers) = support::require_servers("gateway_items_subscribe") else {
        return;
    };
    let dir = scratch("gateway-items-subscribe", "");
    fleet(&dir, &servers.everything());
    let told = Told::default();
    let (_child, client) = proxy_common::Proxied::spawn_for(
        &args(&dir, "reader"),
        told.clone(),
        rmcp::service::ClientLifecycleMode::Initialize,
    )
    .await;
    let info = client.peer().peer_info().expect("the gateway's info");
    let resources = info.capabilities.resources.clone().unwrap_or_default();
    assert_eq!(
        resources.subscribe,
        Some(true),
        "subscriptions are advertised"
    );
    assert!(
        info.capabilities.completions.is_some(),
        "completions are advertised"
    );
    let peer = client.peer();

    // A subscription the role may read: passed on to the server that serves the URI; of the
    // updates it sends, the client is told only the one its role may read.
    #[allow(deprecated)]
    peer.subscribe(rmcp::model::SubscribeRequestParams::new("notes://public/1"))
        .await
        .expect("subscribed");
    let started = Instant::now();
    while told.updated.lock().expect("updated").is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no update told"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The private update was sent first: had it been passed, it would be here by now.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(*told.updated.lock().expect("updated"), ["notes://public/1"]);
    // One the role may not read: refused, never at the server.
    #[allow(deprecated)]
    let refused = peer
        .subscribe(rmcp::model::SubscribeRequestParams::new(
            "notes://private/1",
        ))
        .await
        .expect_err("refused");
    assert!(format!("{refused:?}").contains("refused"), "{refused:?}");
    // One no server serves: refused on record under no server.
    #[allow(deprecated)]
    peer.subscribe(rmcp::model::SubscribeRequestParams::new("nowhere://x"))
        .await
        .expect_err("refused");
    #[allow(deprecated)]
    peer.unsubscribe(rmcp::model::UnsubscribeRequestParams::new(
        "notes://public/1",
    ))
    .await
    .expect("unsubscribed");
    let subscribed: Vec<String> = journal(&dir, "resources/subscribe")
        .iter()
        .map(|p| p["uri"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        subscribed,
        ["notes://public/1"],
        "only the allowed one reached the server"
    );
    assert_eq!(journal(&dir, "resources/unsubscribe").len(), 1);

    // Completions: a prompt's under its shown name, got under the server's own; a template's
    // as the server lists it; a prompt the role may not get is refused before the server.
    let complete = |reference: rmcp::model::Reference| {
        rmcp::model::CompleteRequestParams::new(
            reference,
            rmcp::model::ArgumentInfo::new("who", "al"),
        )
    };
    let got = peer
        .complete(complete(rmcp::model::Reference::for_prompt("notes_greet")))
        .await
        .expect("completes");
    assert_eq!(got.completion.values, ["greet:al"], "the server's own name");
    let got = peer
        .complete(complete(rmcp::model::Reference::for_resource(
            "notes://public/{id}",
        )))
        .await
        .expect("completes");
    assert_eq!(got.completion.values, ["notes://public/{id}:al"]);
    peer.complete(complete(rmcp::model::Reference::for_prompt("notes_secret")))
        .await
        .expect_err("a prompt of no role's");
    peer.complete(complete(rmcp::model::Reference::for_resource(
        "nowhere://{x}",
    )))
    .await
    .expect_err("a template no server lists");
    let completed: Vec<String> = journal(&dir, "completion/complete")
        .iter()
        .map(|p| {
            let r = &p["ref"];
            r["name"]
                .as_str()
                .or(r["uri"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(completed, ["greet", "notes://public/{id}"]);
    let _ = client.cancel().await;

    // On record: each decided, with its server and verdict.
    let trail = dir.join("trail-reader.jsonl");
    let on_record: Vec<(String, String, String)> = calls(&trail)
        .iter()
        .filter(|r| {
            let method = r["method"].as_str().unwrap_or_default();
            method.starts_with("resources/") || method == "completion/complete"
        })
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("method"), s("provider"), s("verdict"))
        })
        .collect();
    let t = |m: &str, p: &str, v: &str| (m.to_owned(), p.to_owned(), v.to_owned());
    assert_eq!(
        on_record,
        [
            t("resources/subscribe", "notes", "allowed"),
            t("resources/subscribe", "notes", "denied"),
            t("resources/subscribe", "", "denied"),
            t("resources/unsubscribe", "notes", "allowed"),
            t("completion/complete", "notes", "allowed"),
            t("completion/complete", "notes", "allowed"),
            t("completion/complete", "notes", "denied"),
            t("completion/complete", "", "denied"),
        ]
    );
}
