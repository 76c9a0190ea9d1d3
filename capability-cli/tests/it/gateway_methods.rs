//! The method table at the edge, from a client that writes its own lines to `capability proxy`
//! over stdio, in front of a server (in `sh`) that journals every line it is sent:
//!
//! - what the table refuses (`tasks/list`, `tasks/result`, a vendor's method) is answered
//!   `method not found` and never reaches the server; what the server sends that the table
//!   refuses (`notifications/tasks/status`, `notifications/elicitation/complete`, a vendor's
//!   notification) never reaches the client;
//! - `logging/setLevel` is kept for the session, on record, and passed on to the server; the
//!   server's log messages during a call reach the client of that call at or above that level.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const POLICY: &str = r#"version = "methods-1"
[roles.viewer]
ceiling = "read-only"
allow = ["*"]
"#;

/// The server: journals every line to `journal`; lists `emit` (read-only); answers
/// `logging/setLevel`; on `tools/call` sends what the table refuses, two log messages (`info`
/// "quiet", `error` "loud"), then the result.
fn server(journal: &Path) -> support::McpServer {
    let script = format!(
        r#"reply() {{ printf '{{"jsonrpc":"2.0","id":%s,%s}}\n' "$1" "$2"; }}
while IFS= read -r line; do
  printf '%s\n' "$line" >> '{journal}'
  id=$(printf '%s\n' "$line" | sed -n 's/^[^{{]*{{[^{{]*"id":\([0-9][0-9]*\|"[^"]*"\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) reply "$id" '"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}},"logging":{{}}}},"serverInfo":{{"name":"emitter","version":"1.0.0"}}}}' ;;
    *'"method":"tools/list"'*) reply "$id" '"result":{{"tools":[{{"name":"emit","inputSchema":{{"type":"object"}},"annotations":{{"readOnlyHint":true}}}}]}}' ;;
    *'"method":"logging/setLevel"'*) reply "$id" '"result":{{}}' ;;
    *'"method":"tools/call"'*)
      printf '%s\n' '{{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{{"taskId":"t-1","status":"working","createdAt":"2026-12-04T00:00:00Z","lastUpdatedAt":"2026-12-04T00:00:00Z","ttl":null}}}}'
      printf '%s\n' '{{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{{"elicitationId":"e-1"}}}}'
      printf '%s\n' '{{"jsonrpc":"2.0","method":"vendor/note","params":{{"secret":"s3"}}}}'
      printf '%s\n' '{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"quiet"}}}}'
      printf '%s\n' '{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"error","data":"loud"}}}}'
      reply "$id" '"result":{{"content":[{{"type":"text","text":"emitted"}}]}}' ;;
    *'"id":'*) reply "$id" '"error":{{"code":-32601,"message":"Method not found"}}' ;;
  esac
done"#,
        journal = journal.display()
    );
    support::McpServer {
        name: "sh",
        program: "sh".into(),
        args: vec!["-c".to_owned(), script],
        env: Vec::new(),
    }
}

/// `capability proxy` over stdio, driven line by line.
struct Client {
    child: Child,
    input: ChildStdin,
    lines: mpsc::Receiver<Value>,
}

impl Client {
    fn start(dir: &Path, journal: &Path) -> Client {
        let args = proxy_common::proxy_args(
            dir,
            "viewer",
            "emitter",
            &dir.join("trail.jsonl"),
            &["--trust", "trusted"],
            &server(journal),
        );
        let mut child = Command::new(proxy_common::BIN)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the proxy starts");
        let input = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (sent, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str(&line) {
                    let _ = sent.send(value);
                }
            }
        });
        let mut client = Client {
            child,
            input,
            lines,
        };
        client.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "line-client", "version": "1.0.0"}}}),
        );
        let (answer, _) = client.answer(1);
        assert!(answer["result"]["protocolVersion"].is_string(), "{answer}");
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.input, "{message}").expect("the proxy reads");
    }

    /// The answer to `id` within 20 s, and every other message that came before it.
    fn answer(&mut self, id: u64) -> (Value, Vec<Value>) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut before = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to {id} within 20 s; heard {before:?}"));
            if line["id"] == id && line.get("method").is_none() {
                return (line, before);
            }
            before.push(line);
        }
    }

    /// Whatever else arrives within `wait`.
    fn more(&self, wait: Duration) -> Vec<Value> {
        let deadline = Instant::now() + wait;
        let mut more = Vec::new();
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            more.push(line);
        }
        more
    }

    fn close(mut self) {
        drop(self.input);
        let _ = self.child.wait();
    }
}

fn scratch(name: &str) -> (PathBuf, PathBuf) {
    let dir = proxy_common::scratch(name, POLICY);
    let journal = dir.join("journal.log");
    (dir, journal)
}

fn journal(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn methods(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| m["method"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn what_the_table_refuses_is_not_found_and_reaches_no_one() {
    let (dir, log) = scratch("methods-refused");
    let mut client = Client::start(&dir, &log);
    for (id, method) in [
        (2, "tasks/list"),
        (3, "tasks/result"),
        (4, "vendor/anything"),
    ] {
        client.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"taskId": "t-1"}}),
        );
        let (answer, _) = client.answer(id);
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
    }
    client.send(&json!({"jsonrpc": "2.0", "method": "vendor/ping", "params": {}}));
    client.send(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "emit"}}),
    );
    let (answer, before) = client.answer(5);
    assert_eq!(
        answer["result"]["content"][0]["text"], "emitted",
        "{answer}"
    );
    let heard = methods(&before)
        .into_iter()
        .chain(methods(&client.more(Duration::from_millis(500))))
        .collect::<Vec<_>>();
    for refused in [
        "notifications/tasks/status",
        "notifications/elicitation/complete",
        "vendor/note",
    ] {
        assert!(
            !heard.iter().any(|m| m == refused),
            "{refused} reached the client: {heard:?}"
        );
    }
    client.close();
    let journal = journal(&log);
    assert!(
        journal.contains("\"tools/call\""),
        "the server is reached: {journal}"
    );
    for refused in [
        "tasks/list",
        "tasks/result",
        "vendor/anything",
        "vendor/ping",
    ] {
        assert!(
            !journal.contains(refused),
            "{refused} reached the server: {journal}"
        );
    }
}

#[test]
fn a_servers_log_messages_reach_the_client_of_the_call_at_the_level_it_set() {
    let (dir, log) = scratch("methods-logging");
    let mut client = Client::start(&dir, &log);
    client.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                        "params": {"level": "warning"}}),
    );
    let (answer, _) = client.answer(2);
    assert_eq!(answer["result"], json!({}), "{answer}");
    client.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "emit"}}),
    );
    let (answer, before) = client.answer(3);
    assert_eq!(
        answer["result"]["content"][0]["text"], "emitted",
        "{answer}"
    );
    let logged: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| &m["params"]["data"])
        .collect();
    assert_eq!(
        logged,
        [&json!("loud")],
        "at or above `warning` only: {before:?}"
    );
    client.close();
    // The server was told the level; the session's level is on record.
    let journal = journal(&log);
    assert!(
        journal
            .lines()
            .any(|l| l.contains("\"logging/setLevel\"") && l.contains("\"warning\"")),
        "{journal}"
    );
    let records = proxy_common::records(&dir.join("trail.jsonl"));
    assert!(
        records
            .iter()
            .any(|r| r["method"] == "logging/setLevel" && r["input"]["level"] == "warning"),
        "{records:#?}"
    );
}
