//! A client of 2026-07-28 calling a tool of a server of 2025-11-25 over stdio takes the
//! forwarding lane (the call goes to the server under the lane's id), and nothing else changes:
//! each call is also made through rmcp's typed path (the same call asking for log messages,
//! which the lane leaves to rmcp), and the two answers are the same, as are their records on
//! the trail (all but the ids, times and chain); a denied tool and a name no server has are
//! refused alike, reaching no server; a call held for approval still gets the revision's
//! input-required result and reaches no server; the server is told what rmcp's path tells it
//! (no `io.modelcontextprotocol/*` key of the client's but the capabilities its role allows),
//! the client's progress token and its own keys as written; progress reaches the client; a
//! cancelled call is cancelled at the server under the lane's id and on record as cancelled.

#![cfg(unix)]

use crate::proxy_common;
use capability_testkit::wait_for;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;

use serde_json::{Value, json};

use proxy_common::{BIN, records_in, scratch};

/// A stdio MCP server of 2025-11-25 only (`server/discover` is "Method not found") in plain
/// Python: journals every line it reads to `$JOURNAL`.
const SERVER: &str = r#"
import json, os, sys
journal = open(os.environ["JOURNAL"], "a", buffering=1)
def send(message):
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n"); sys.stdout.flush()
def tool(name):
    return {"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
for line in sys.stdin:
    journal.write(line)
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "journal", "version": "1"}}})
    elif method == "tools/list":
        names = ["echo", "denied", "held", "progress", "slow", "sample"]
        send({"jsonrpc": "2.0", "id": id, "result": {"tools": [tool(n) for n in names]}})
    elif method == "tools/call":
        name, arguments = message["params"]["name"], message["params"].get("arguments")
        if name == "progress":
            token = message["params"]["_meta"]["progressToken"]
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": 1, "total": 2}})
        if name == "sample":
            # Asks the client a question while it serves the call, and answers the call with
            # what it was answered.
            asked = "asked"
            send({"jsonrpc": "2.0", "id": asked, "method": "sampling/createMessage",
                  "params": {"messages": [{"role": "user",
                                           "content": {"type": "text", "text": "hi"}}],
                             "maxTokens": 5}})
            for reply in sys.stdin:
                journal.write(reply)
                reply = json.loads(reply)
                if reply.get("id") == asked and "method" not in reply:
                    break
            arguments = {"answered": reply}
        if name != "slow":
            send({"jsonrpc": "2.0", "id": id, "result": {
                "content": [{"type": "text", "text": json.dumps(arguments)}],
                "isError": False}})
    elif id is not None and method is not None:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}})
"#;

/// The fleet of one journal server (`j_*`), its `denied` tool denied; `extra` added to the
/// role.
fn setup(name: &str, extra: &str) -> std::path::PathBuf {
    let dir = scratch(name, "");
    std::fs::write(dir.join("server.py"), SERVER).expect("server");
    let policy = format!(
        r#"[servers.journal]
command = ["python3", {script:?}]
env = {{ JOURNAL = {journal:?} }}
trust = "trusted"
prefix = "j_"

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]
deny = ["journal/denied"]
{extra}
"#,
        script = dir.join("server.py").display().to_string(),
        journal = dir.join("journal.jsonl").display().to_string(),
    );
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    dir
}

/// A client of 2026-07-28 writing its own lines to `capability gateway`.
struct Client {
    child: Child,
    input: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Client {
    fn start(dir: &Path, trail: &str) -> Client {
        let mut child = Command::new(BIN)
            .args(proxy_common::gateway_stdio(
                &dir.join("policy.toml"),
                "operator",
                &dir.join(trail),
                &[],
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("gateway");
        let input = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut client = Client {
            child,
            input: Some(input),
            lines,
        };
        client.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover",
            "params": {"_meta": meta(&json!({}))}}),
        );
        let discovered = client.answer(&json!(0));
        assert!(
            discovered["result"]["supportedVersions"]
                .as_array()
                .is_some_and(|v| v.contains(&json!("2026-07-28"))),
            "{discovered}"
        );
        // The first request after `server/discover` is rmcp's, which starts the session from
        // it; the lane takes calls from then on.
        client.send(
            &json!({"jsonrpc": "2.0", "id": "listed", "method": "tools/list",
            "params": {"_meta": meta(&json!({}))}}),
        );
        let listed = client.answer(&json!("listed"));
        assert!(listed["result"]["tools"].is_array(), "{listed}");
        client
    }

    /// Closes the client's side: how the gateway exits.
    fn close(mut self) -> std::process::ExitStatus {
        drop(self.input.take());
        self.child
            .wait()
            .expect("the gateway exits once its client is gone")
    }

    fn send(&mut self, message: &Value) {
        let input = self.input.as_mut().expect("the client's side is open");
        writeln!(input, "{message}").expect("write");
        input.flush().expect("flush");
    }

    /// Every line up to and including the one answering `id`, as written.
    fn until_answer(&mut self, id: &Value) -> Vec<String> {
        proxy_common::until_answer(&self.lines, id)
    }

    fn answer(&mut self, id: &Value) -> Value {
        let lines = self.until_answer(id);
        serde_json::from_str(lines.last().expect("the answer")).expect("JSON")
    }

    /// The answer to `tools/call` of `name` with `arguments` under `id`, its `_meta` the
    /// revision's with `more`.
    fn call(&mut self, id: u64, name: &str, arguments: Value, more: &Value) -> Value {
        self.send(&call(id, name, arguments, more));
        self.answer(&json!(id))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A request's `_meta` of 2026-07-28 (the client declares sampling), with `more`.
fn meta(more: &Value) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "a-2026-client", "version": "1"},
    });
    if let (Some(all), Some(more)) = (meta.as_object_mut(), more.as_object()) {
        all.extend(more.clone());
    }
    meta
}

fn call(id: u64, name: &str, arguments: Value, more: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta(more)}})
}

/// What makes a call rmcp's: it asks for log messages, which the lane leaves to rmcp's path.
fn typed() -> Value {
    json!({"io.modelcontextprotocol/logLevel": "emergency"})
}

fn journal(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn calls_of(dir: &Path, tool: &str) -> Vec<Value> {
    journal(dir)
        .into_iter()
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
        .collect()
}

fn on_lane(sent: &Value) -> bool {
    sent["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("capability-gateway/"))
}

/// The trail's records (intents, outcomes, refusals) once it holds `n` (the gateway answers
/// before it writes an outcome).
fn records(dir: &Path, n: usize) -> Vec<Value> {
    let trail = dir.join("audit.jsonl");
    let mut seen = Vec::new();
    wait_for(|| {
        let text = std::fs::read_to_string(&trail).unwrap_or_default();
        if !text.ends_with('\n') {
            return false;
        }
        seen = records_in(&text);
        seen.len() >= n
    });
    assert_eq!(seen.len(), n, "{seen:#?}");
    seen
}

/// A record without what differs between any two records of one call (its id, time, latency,
/// place in the chain).
fn comparable(record: &Value) -> Value {
    let mut record = record.clone();
    if let Some(map) = record.as_object_mut() {
        for key in ["call_id", "hash", "prev", "seq", "time", "latency_us"] {
            map.remove(key);
        }
    }
    record
}

/// The records of call `call_id`: its intent and its outcome (or its one refusal).
fn records_of_call(records: &[Value], call_id: &Value) -> Vec<Value> {
    records
        .iter()
        .filter(|r| &r["call_id"] == call_id)
        .map(comparable)
        .collect()
}

#[test]
fn a_2026_07_28_clients_call_to_a_2025_11_25_server_takes_the_lane_answered_and_recorded_as_on_rmcps_path()
 {
    let dir = setup("gateway-bridge-lane", "");
    let mut client = Client::start(&dir, "audit.jsonl");
    let own = json!({"progressToken": "p-1", "acme/trace": {"kept": true}});

    // 1. The same call through the lane and through rmcp's path.
    let arguments = json!({"n": 1, "s": "x"});
    let fast = client.call(1, "j_echo", arguments.clone(), &own);
    let slow = client.call(1, "j_echo", arguments.clone(), &typed());
    let sent = calls_of(&dir, "echo");
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(on_lane(&sent[0]), "the call took the lane: {}", sent[0]);
    assert!(!on_lane(&sent[1]), "its twin took rmcp's path: {}", sent[1]);
    assert_eq!(fast, slow, "the same answer on both paths");
    assert_eq!(fast["result"]["resultType"], "complete", "{fast}");
    assert_eq!(
        fast["result"]["content"][0]["text"],
        r#"{"n": 1, "s": "x"}"#
    );
    // What the server is told: the arguments, the capabilities the role allows (no server
    // request: none), none of the revision's own keys, the client's token and its own key.
    let told = &sent[0]["params"];
    assert_eq!(told["arguments"], arguments);
    assert_eq!(
        told["_meta"],
        json!({"io.modelcontextprotocol/clientCapabilities": {}, "progressToken": "p-1",
               "acme/trace": {"kept": true}}),
        "{told}"
    );
    assert_eq!(
        sent[1]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        json!({}),
        "rmcp's path tells the server the same capabilities: {}",
        sent[1]
    );

    // 2. A denied tool and a name no server has: refused alike on both paths, reaching nothing.
    let denied = client.call(2, "j_denied", json!({}), &json!({}));
    let denied_typed = client.call(2, "j_denied", json!({}), &typed());
    assert!(denied["error"]["message"].is_string(), "{denied}");
    assert_eq!(denied, denied_typed);
    let unknown = client.call(3, "j_nothing", json!({}), &json!({}));
    let unknown_typed = client.call(3, "j_nothing", json!({}), &typed());
    assert!(unknown["error"]["message"].is_string(), "{unknown}");
    assert_eq!(unknown, unknown_typed);
    assert!(
        calls_of(&dir, "denied").is_empty(),
        "a denied call reaches no server"
    );

    // 3. The trail: the same records for each pair (2 + 2 for the calls, 1 + 1 + 1 + 1 for the
    //    refusals).
    let trail = records(&dir, 8);
    let mut calls: Vec<&Value> = Vec::new();
    for record in &trail {
        if !calls.contains(&&record["call_id"]) {
            calls.push(&record["call_id"]);
        }
    }
    assert_eq!(calls.len(), 6, "{trail:#?}");
    for pair in calls.chunks(2) {
        let (lane, rmcp) = (
            records_of_call(&trail, pair[0]),
            records_of_call(&trail, pair[1]),
        );
        assert!(!lane.is_empty());
        assert_eq!(lane, rmcp, "recorded alike on both paths");
    }
    let outcome = trail
        .iter()
        .find(|r| r["phase"] == "outcome" && r["tool"] == "echo")
        .expect("the call's outcome");
    assert_eq!(outcome["success"], true, "{outcome}");
    assert!(outcome["output_digest"].is_string(), "{outcome}");

    // 4. Progress for the client's token reaches it, before the answer, through the lane.
    client.send(&call(
        4,
        "j_progress",
        json!({}),
        &json!({"progressToken": 44}),
    ));
    let lines = client.until_answer(&json!(4));
    assert!(on_lane(&calls_of(&dir, "progress")[0]));
    assert_eq!(lines.len(), 2, "{lines:?}");
    let progress: Value = serde_json::from_str(&lines[0]).expect("JSON");
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    assert_eq!(progress["params"]["progressToken"], 44, "{progress}");

    // 5. A cancelled call: no answer, cancelled at the server under the lane's id, on record.
    client.send(&call(5, "j_slow", json!({}), &json!({})));
    assert!(wait_for(|| !calls_of(&dir, "slow").is_empty()));
    let lane_id = calls_of(&dir, "slow")[0]["id"].clone();
    assert!(on_lane(&calls_of(&dir, "slow")[0]));
    client.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5, "reason": "enough"}}),
    );
    assert!(
        wait_for(|| {
            journal(&dir).iter().any(|m| {
                m["method"] == "notifications/cancelled" && m["params"]["requestId"] == lane_id
            })
        }),
        "the server is told, under the id it was sent: {:?}",
        journal(&dir)
    );
    // The next call's answer comes; the cancelled one's never did.
    client.send(&call(6, "j_echo", json!({}), &json!({})));
    let lines = client.until_answer(&json!(6));
    assert!(
        lines.iter().all(|l| !l.contains(r#""id":5"#)),
        "a cancelled call is not answered: {lines:?}"
    );
    // 8 + the progress call's 2 + the cancelled call's 2 + the last call's 2.
    let trail = records(&dir, 14);
    let cancelled = trail
        .iter()
        .find(|r| r["phase"] == "outcome" && r["tool"] == "slow")
        .expect("the cancelled call's outcome");
    assert_eq!(cancelled["success"], false, "{cancelled}");
    assert!(
        cancelled["error"]
            .as_str()
            .is_some_and(|e| e.contains("cancel")),
        "{cancelled}"
    );
    // The session was rmcp's all along: the gateway ends as for any client that leaves.
    assert!(client.close().success(), "the gateway exits 0");
}

#[test]
fn a_2026_07_28_clients_held_call_is_still_held_and_reaches_no_server() {
    let dir = setup("gateway-bridge-lane-held", r#"approve = ["journal/held"]"#);
    let run = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("run capability");
        assert!(out.status.success(), "{out:?}");
    };
    run(&["keygen", "--out", "alice.key"]);
    run(&["db", "migrate", "state.db"]);
    let alice = std::fs::read_to_string(dir.join("alice.key.pub")).expect("alice's key");
    let mut policy = std::fs::read_to_string(dir.join("policy.toml")).expect("policy");
    policy.push_str(&format!(
        "\n[approvals]\naudience = \"bridge-test\"\nproposals = \"proposals\"\n\
         grants = \"grants\"\napprovers = {{ alice = {:?} }}\n",
        alice.trim()
    ));
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    let mut client = Client::start(&dir, "state.db");

    let asked = client.call(1, "j_held", json!({}), &json!({}));
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    assert!(
        asked["result"]["_meta"]["capability/proposal"]["proposal_id"].is_string(),
        "{asked}"
    );
    // A call not held still takes the lane in the same session.
    let echoed = client.call(2, "j_echo", json!({}), &json!({}));
    assert_eq!(echoed["result"]["resultType"], "complete", "{echoed}");
    assert!(
        calls_of(&dir, "held").is_empty(),
        "held: nothing reached the server"
    );
    assert!(on_lane(&calls_of(&dir, "echo")[0]));
}

/// A server that asks its client something (`sampling/createMessage`) while it serves a lane
/// call is refused as on rmcp's path, when the role allows the server no request (what keeps a
/// call on the lane): the server hears the same refusal, the client the same answer, and the
/// trail has the same records, so taking the lane changes nothing a server can make happen.
#[test]
fn a_servers_request_during_a_lane_call_is_refused_and_recorded_as_on_rmcps_path() {
    let dir = setup("gateway-bridge-lane-asks", "");
    let mut client = Client::start(&dir, "audit.jsonl");
    let fast = client.call(1, "j_sample", json!({}), &json!({}));
    let slow = client.call(1, "j_sample", json!({}), &typed());
    let sent = calls_of(&dir, "sample");
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(on_lane(&sent[0]), "the call took the lane: {}", sent[0]);
    assert!(!on_lane(&sent[1]), "its twin took rmcp's path: {}", sent[1]);
    // What the server was answered, as it reports it in the call's result.
    let heard = |answer: &Value| -> Value {
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("a text result: {answer}"));
        let heard: Value = serde_json::from_str(text).expect("JSON");
        heard["answered"].clone()
    };
    let (on_lane_heard, on_rmcp_heard) = (heard(&fast), heard(&slow));
    assert!(
        on_lane_heard["error"]["message"].is_string(),
        "the server's request is refused: {on_lane_heard}"
    );
    assert!(
        on_lane_heard.get("result").is_none(),
        "and not answered: {on_lane_heard}"
    );
    let without_id = |heard: &Value| {
        let mut heard = heard.clone();
        heard.as_object_mut().map(|m| m.remove("id"));
        heard
    };
    assert_eq!(
        without_id(&on_lane_heard),
        without_id(&on_rmcp_heard),
        "the same refusal on both paths"
    );
    assert_eq!(fast, slow, "the same answer to the client");
    // No sampling request reached the client on either path.
    // (`Client::call` reads up to the answer: a request of the server's would be among them.)
    let trail = records_in(&std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default());
    let mut calls: Vec<&Value> = Vec::new();
    for record in trail.iter().filter(|r| r["tool"] == "sample") {
        if !calls.contains(&&record["call_id"]) {
            calls.push(&record["call_id"]);
        }
    }
    assert_eq!(calls.len(), 2, "{trail:#?}");
    assert_eq!(
        records_of_call(&trail, calls[0]),
        records_of_call(&trail, calls[1]),
        "recorded alike on both paths: {trail:#?}"
    );
    // The server's request is on record as refused, once a path, in the same session.
    let refused: Vec<Value> = trail
        .iter()
        .filter(|r| r["method"] == "sampling/createMessage")
        .map(comparable)
        .collect();
    assert_eq!(refused.len(), 2, "{trail:#?}");
    assert_eq!(refused[0], refused[1], "refused alike on both paths");
    assert_eq!(
        refused[0]["session"], "mcp:gateway/operator/server-requests",
        "{refused:#?}"
    );
    assert!(client.close().success(), "the gateway exits 0");
}
