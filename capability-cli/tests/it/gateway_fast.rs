//! The gateway's forwarding lane (`tools/call` over stdio, below rmcp's typed model), attacked
//! from both sides: a client that writes its own lines, and a server (a Python script here)
//! that journals what it is sent and misbehaves on purpose.
//!
//! - The arguments the server receives are the ones on record, even when the client writes a
//!   key twice; the server's result reaches the client as the server wrote it (a field rmcp's
//!   model does not know is kept) under the client's own id.
//! - An answer of the server that writes a key twice is refused (an error to the client, a
//!   failure on record), and so is one whose error is not an error object; an answer to an id the gateway is not waiting for is dropped and
//!   said; a server that dies fails the call in flight with the reason, and the other server
//!   keeps serving.
//! - A call the client cancels gets no answer, is cancelled at the server under the lane's id,
//!   and is on record as cancelled.
//! - A call the lane does not take (a task-augmented one) still works, through rmcp.
//! - A server's progress for the call's `progressToken` reaches the client before the answer,
//!   matched by the token's value; progress for another token, from another server, or after
//!   the answer does not.
//! - A message longer than 64 MiB is not held, from either side: a server's cuts its output off
//!   (the call fails saying why, the server is started again, the other keeps serving), a
//!   client's is answered unread and the session goes on; the gateway's memory stays well
//!   below what was written. A server that writes its progress faster than the client reads
//!   it is held back: none of it piles up in the gateway, and all of it arrives, in order.
//! - A client that leaves as soon as it has its answer finds the call's outcome on record once
//!   the gateway has exited (the gateway waits for the call's end before closing the trail);
//!   so does a call still waiting on its server when the gateway is told to stop (`SIGTERM`):
//!   on record as failed.

#![cfg(unix)]

use crate::proxy_common;
use capability_testkit::wait_for;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use proxy_common::{
    BIN, KillOnPanic, blocked_writing_a_pipe, calls_in, peak_kib, records_in, scratch,
};

/// A stdio MCP server of 2025-11-25 in plain Python: journals every line it reads to
/// `$JOURNAL`, and misbehaves by tool name.
const SERVER: &str = r#"
import json, os, sys
journal = open(os.environ["JOURNAL"], "a", buffering=1)
def send(text):
    sys.stdout.write(text + "\n"); sys.stdout.flush()
def tool(name):
    return {"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
for line in sys.stdin:
    journal.write(line)
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "journal", "version": "1"}}}))
    elif method == "tools/list":
        names = ["echo", "twice", "forge", "slow", "die", "badshape", "progress", "inject", "flood", "spam", "deaf"]
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"tools": [tool(n) for n in names]}}))
    elif method == "tools/call":
        name, arguments = message["params"]["name"], message["params"].get("arguments")
        if name == "echo":
            send(json.dumps({"result": {"content": [{"type": "text", "text": json.dumps(arguments)}],
                "x-unknown-to-rmcp": {"kept": True}}, "jsonrpc": "2.0", "id": id}))
        elif name == "twice":
            send('{"jsonrpc":"2.0","id":%s,"result":{"content":[],"isError":false,"isError":true}}' % json.dumps(id))
        elif name == "forge":
            send(json.dumps({"jsonrpc": "2.0", "id": "capability-gateway/999999", "result": {"content": []}}))
            send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "real"}]}}))
        elif name == "badshape":
            send(json.dumps({"jsonrpc": "2.0", "id": id, "error": "not an object"}))
        elif name == "progress":
            token = (message["params"].get("_meta") or {}).get("progressToken")
            def progress(t, n):
                send(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": t, "progress": n, "total": 3}}))
            progress("not-yours", 1)
            progress(token, 1)
            # The token escaped otherwise: it is the token's value that matches.
            escaped = json.dumps(token).replace("-", "\\u002d")
            send('{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":2,"total":3}}' % escaped)
            progress(token, 3)
            send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "done"}]}}))
            progress(token, 4)
        elif name == "inject":
            send(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": arguments["token"], "progress": 99}}))
            send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"content": []}}))
        elif name == "flood":
            chunk = "x" * (1 << 20)
            for _ in range(int(arguments["mib"])):
                sys.stdout.write(chunk)
            send("")
        elif name == "spam":
            token = message["params"]["_meta"]["progressToken"]
            pad = "p" * 3000
            for n in range(int(arguments["count"])):
                send(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": n, "message": pad}}))
            send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "spammed"}]}}))
        elif name == "slow":
            pass
        elif name == "die":
            sys.exit(3)
        elif name == "deaf":
            # Reads nothing more, and ends once the gateway is gone: the test kills the gateway,
            # which then cannot stop this server, and it must not outlive the suite.
            import os, time
            gateway = os.getppid()
            while os.getppid() == gateway:
                time.sleep(0.1)
            sys.exit(0)
    elif method == "ping":
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {}}))
    elif id is not None and method is not None:
        send(json.dumps({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}}))
"#;

fn policy(dir: &Path) -> String {
    std::fs::write(dir.join("server.py"), SERVER).expect("server");
    let script = dir.join("server.py").display().to_string();
    let journal = dir.join("journal.jsonl").display().to_string();
    format!(
        r#"[roles.operator]
ceiling = "unrestricted"
allow = ["*"]

[servers.journal]
command = ["python3", {script:?}]
env = {{ JOURNAL = {journal:?} }}
trust = "trusted"
prefix = "j_"

[servers.other]
command = ["python3", {script:?}]
env = {{ JOURNAL = {other:?} }}
trust = "trusted"
prefix = "o_"
"#,
        other = dir.join("other.jsonl").display().to_string(),
    )
}

/// The gateway, spoken to line by line.
struct Client {
    child: Child,
    input: ChildStdin,
    lines: mpsc::Receiver<String>,
    errors: mpsc::Receiver<String>,
    /// While set, the gateway's output is not read (a client that is behind).
    paused: Arc<AtomicBool>,
}

impl Client {
    fn start(dir: &Path) -> Client {
        Client::start_in(dir, Command::new(BIN))
    }

    /// Started by `command` (the gateway, or a shell that runs it).
    fn start_in(dir: &Path, command: Command) -> Client {
        Client::start_with(dir, command, &[])
    }

    /// [`Client::start_in`], the gateway given `extra` options too.
    fn start_with(dir: &Path, mut command: Command, extra: &[&str]) -> Client {
        let mut child = command
            .arg("gateway")
            .arg("--policy")
            .arg(dir.join("policy.toml"))
            .arg("--role")
            .arg("operator")
            .arg("--audit")
            .arg(dir.join("audit.jsonl"))
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gateway");
        let input = child.stdin.take().expect("stdin");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        let paused = Arc::new(AtomicBool::new(false));
        let pausing = paused.clone();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            loop {
                while pausing.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let Some(Ok(line)) = lines.next() else {
                    break;
                };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (etx, errors) = mpsc::channel();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{line}");
                if etx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut client = Client {
            child,
            input,
            lines,
            errors,
            paused,
        };
        client.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        );
        let init = client.answer(&json!(0));
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        client.line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        client
    }

    fn line(&mut self, line: &str) {
        writeln!(self.input, "{line}").expect("write");
        self.input.flush().expect("flush");
    }

    fn send(&mut self, message: &Value) {
        self.line(&message.to_string());
    }

    /// The next line answering `id` (notifications in between are skipped), as written.
    fn raw_answer(&mut self, id: &Value) -> Option<String> {
        self.raw_answer_within(id, Duration::from_secs(20))
    }

    fn raw_answer_within(&mut self, id: &Value, wait: Duration) -> Option<String> {
        let deadline = Instant::now() + wait;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok(line) = self.lines.recv_timeout(left) else {
                return None;
            };
            let value: Value = serde_json::from_str(&line).expect("the gateway writes JSON");
            if value.get("method").is_none() && &value["id"] == id {
                return Some(line);
            }
        }
        None
    }

    /// Every line up to and including the one answering `id`, in order.
    fn until_answer(&mut self, id: &Value) -> Vec<Value> {
        let lines = proxy_common::until_answer(&self.lines, id);
        lines
            .iter()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect()
    }

    fn answer(&mut self, id: &Value) -> Value {
        let line = self
            .raw_answer(id)
            .unwrap_or_else(|| panic!("no answer to {id}"));
        serde_json::from_str(&line).expect("JSON")
    }

    /// Whether the gateway said something containing `text` on standard error within `wait`.
    fn said(&self, text: &str, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.errors.recv_timeout(left) {
                Ok(line) if line.contains(text) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }

    fn call(&mut self, id: u64, name: &str, arguments: &str) -> Value {
        self.line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{arguments}}}}}"#
        ));
        self.answer(&json!(id))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The gateway over `dir`'s policy as `operator`, its input and output piped and nothing read
/// (no handshake): for a client that does what [`Client`] would not.
fn spawn_bare(dir: &Path, stderr: Stdio, options: &[&str]) -> Child {
    Command::new(BIN)
        .arg("gateway")
        .arg("--policy")
        .arg(dir.join("policy.toml"))
        .args(["--role", "operator", "--audit"])
        .arg(dir.join("audit.jsonl"))
        .args(options)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("gateway")
}

/// Sends `child` `SIGTERM` and waits for it to exit, at most `within`: how long it took.
fn terminate(child: &mut Child, within: Duration) -> Duration {
    let asked = Instant::now();
    let stopped = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(stopped.success());
    exits_within(child, within);
    asked.elapsed()
}

/// Waits for `child` to exit, at most `within`.
fn exits_within(child: &mut Child, within: Duration) {
    let deadline = Instant::now() + within;
    while child.try_wait().expect("wait").is_none() {
        assert!(
            Instant::now() < deadline,
            "the gateway did not end within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn journal(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn calls_of(journal: &[Value], tool: &str) -> Vec<Value> {
    journal
        .iter()
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
        .cloned()
        .collect()
}

fn outcome<'a>(records: &'a [Value], tool: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["phase"] == "outcome" && r["tool"] == tool)
        .collect()
}

/// The trail's calls once it holds `n` outcomes of `tool`: the gateway answers the client
/// before it writes a call's outcome record, so a test that got its answer may read the trail
/// a moment before the record is there.
fn calls_once(dir: &Path, tool: &str, n: usize) -> Vec<Value> {
    let trail = dir.join("audit.jsonl");
    let mut seen = Vec::new();
    wait_for(|| {
        // Only a trail whose last line is whole is read: the gateway may be writing the next.
        let text = std::fs::read_to_string(&trail).unwrap_or_default();
        if !text.ends_with('\n') {
            return false;
        }
        seen = calls_in(&text);
        outcome(&seen, tool).len() >= n
    });
    seen
}

#[test]
fn the_server_receives_the_arguments_on_record_and_its_result_reaches_the_client_as_written() {
    let dir = scratch("gateway-fast-args", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);

    // The client writes `n` twice: the gateway reads it once, records that, forwards that.
    let raw = client.raw_answer_of(7, "j_echo", r#"{"n":1,"n":2,"s":"x"}"#);
    let answer: Value = serde_json::from_str(&raw).expect("JSON");
    assert_eq!(answer["id"], 7);
    assert_eq!(
        answer["result"]["content"][0]["text"],
        r#"{"n": 2, "s": "x"}"#
    );
    assert_eq!(
        answer["result"]["x-unknown-to-rmcp"],
        json!({"kept": true}),
        "the result as the server wrote it: {raw}"
    );
    // A string id stays the client's, not the lane's.
    let answer = client.call_with_id(r#""a-string""#, "j_echo", r#"{}"#);
    assert_eq!(answer["id"], "a-string", "{answer}");

    let sent = calls_of(&journal(&dir.join("journal.jsonl")), "echo");
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0]["params"]["arguments"], json!({"n": 2, "s": "x"}));
    let lane_id = sent[0]["id"].as_str().unwrap_or_default();
    assert!(
        lane_id.starts_with("capability-gateway/"),
        "forwarded under the lane's id: {}",
        sent[0]
    );
    assert!(
        calls_of(&journal(&dir.join("other.jsonl")), "echo").is_empty(),
        "routed to its own server only"
    );

    let records = calls_once(&dir, "echo", 2);
    let done = outcome(&records, "echo");
    assert_eq!(done.len(), 2, "{records:?}");
    assert_eq!(done[0]["provider"], "journal");
    assert_eq!(done[0]["success"], true);
    // The input on record is the one forwarded: same size as its canonical JSON.
    assert_eq!(
        done[0]["input_size"],
        json!(r#"{"n":2,"s":"x"}"#.len()),
        "{}",
        done[0]
    );
}

impl Client {
    fn raw_answer_of(&mut self, id: u64, name: &str, arguments: &str) -> String {
        self.line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{arguments}}}}}"#
        ));
        self.raw_answer(&json!(id))
            .unwrap_or_else(|| panic!("no answer to {id}"))
    }

    fn call_with_id(&mut self, id: &str, name: &str, arguments: &str) -> Value {
        self.line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{arguments}}}}}"#
        ));
        let id: Value = serde_json::from_str(id).expect("id");
        self.answer(&id)
    }
}

#[test]
fn a_server_that_writes_a_key_twice_forges_an_answer_or_dies_is_refused_dropped_and_said() {
    let dir = scratch("gateway-fast-server", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);

    let twice = client.call(1, "j_twice", "{}");
    assert!(twice.get("result").is_none(), "{twice}");
    let message = twice["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("writes a key twice") && message.contains("isError"),
        "{twice}"
    );

    let forged = client.call(2, "j_forge", "{}");
    assert_eq!(
        forged["result"]["content"][0]["text"], "real",
        "the forged answer is not the call's: {forged}"
    );
    assert!(
        client.said("answered request 999999", Duration::from_secs(5)),
        "the forged answer is said"
    );

    // An error that is not an error object still ends the call, saying so.
    let bad = client.call(5, "j_badshape", "{}");
    let message = bad["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not a JSON-RPC error object"), "{bad}");

    let died = client.call(3, "j_die", "{}");
    let message = died["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("journal") && message.contains("exited (exit status: 3)"),
        "the reason: {died}"
    );
    // The other server keeps serving meanwhile.
    let other = client.call(4, "o_echo", r#"{"still":"here"}"#);
    assert_eq!(
        other["result"]["content"][0]["text"],
        r#"{"still": "here"}"#
    );

    calls_once(&dir, "die", 1);
    let records = calls_once(&dir, "twice", 1);
    let failed = outcome(&records, "twice");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["success"], false, "{}", failed[0]);
    let died = outcome(&records, "die");
    assert_eq!(died.len(), 1);
    assert_eq!(died[0]["success"], false);
}

#[test]
fn a_cancelled_call_gets_no_answer_is_cancelled_at_the_server_and_on_record() {
    let dir = scratch("gateway-fast-cancel", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);

    client.line(
        r#"{"jsonrpc":"2.0","id":"slow-1","method":"tools/call","params":{"name":"j_slow","arguments":{}}}"#,
    );
    let path = dir.join("journal.jsonl");
    assert!(
        wait_for(|| !calls_of(&journal(&path), "slow").is_empty()),
        "the call reached the server"
    );
    let lane_id = calls_of(&journal(&path), "slow")[0]["id"].clone();
    client.line(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-1","reason":"enough"}}"#,
    );
    assert!(
        wait_for(|| journal(&path).iter().any(|m| {
            m["method"] == "notifications/cancelled" && m["params"]["requestId"] == lane_id
        })),
        "the server is told, under the id it was sent: {:?}",
        journal(&path)
    );
    // The next call's answer comes; the cancelled one's never does.
    let next = client.call(9, "j_echo", "{}");
    assert!(next.get("result").is_some(), "{next}");
    assert_eq!(
        client.raw_answer_within(&json!("slow-1"), Duration::from_secs(1)),
        None,
        "a cancelled call is not answered"
    );
    let records = calls_once(&dir, "slow", 1);
    let slow = outcome(&records, "slow");
    assert_eq!(slow.len(), 1, "{records:?}");
    assert_eq!(slow[0]["success"], false);
    assert!(
        slow[0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("cancel"),
        "{}",
        slow[0]
    );
}

#[test]
fn a_call_the_lane_does_not_take_goes_through_rmcp_and_is_decided_the_same() {
    let dir = scratch("gateway-fast-typed", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);

    // An extra key in the params (not name, arguments, _meta): rmcp's typed path.
    client.line(
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"j_echo","arguments":{"k":"v"},"x-extra":1}}"#,
    );
    let typed = client.answer(&json!(5));
    assert_eq!(typed["result"]["content"][0]["text"], r#"{"k": "v"}"#);
    assert!(
        typed["result"].get("x-unknown-to-rmcp").is_none(),
        "through rmcp's model, which keeps only what it knows: {typed}"
    );
    // A made-up name is refused the same on both paths, and reaches no server.
    let fast = client.call(6, "j_nothing", "{}");
    client.line(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"j_nothing","arguments":{},"x-extra":1}}"#,
    );
    let typed = client.answer(&json!(7));
    assert_eq!(fast["error"]["code"], typed["error"]["code"]);
    assert_eq!(fast["error"]["message"], typed["error"]["message"]);
    assert!(calls_of(&journal(&dir.join("journal.jsonl")), "nothing").is_empty());
}

#[test]
fn a_trail_the_file_size_limit_cuts_short_keeps_whole_lines_and_refuses_the_call() {
    let dir = scratch("gateway-fast-fsize", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    // Files of this gateway (and of its servers) may not grow past 48 blocks (24 KiB in the
    // 512-byte blocks of dash, 48 KiB in bash's): a record write that
    // crosses it is cut short by the kernel (then EFBIG); the trail fills long before the
    // server's journal does.
    let mut shell = Command::new("sh");
    shell.args([
        "-c",
        r#"trap '' XFSZ; ulimit -f 48 || exit 97; exec "$0" "$@""#,
        BIN,
    ]);
    let mut client = Client::start_in(&dir, shell);
    let mut ran = 0;
    let mut refused = None;
    for id in 1..200u64 {
        let answer = client.call(id, "j_echo", r#"{"n":1}"#);
        if answer.get("result").is_some() {
            ran += 1;
            continue;
        }
        refused = Some(answer);
        break;
    }
    let refused = refused.expect("the trail filled up");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("its audit record could not be written"),
        "{refused}"
    );
    drop(client);
    let trail = std::fs::read(dir.join("audit.jsonl")).expect("the trail");
    assert!(trail.len() <= 48 * 1024, "{} bytes", trail.len());
    assert_eq!(trail.last(), Some(&b'\n'), "no half line at the end");
    for line in trail.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        serde_json::from_slice::<Value>(line).expect("every line whole");
    }
    proxy_common::verifies(&dir.join("audit.jsonl"));
    assert_eq!(
        calls_of(&journal(&dir.join("journal.jsonl")), "echo").len(),
        ran,
        "the call whose intent could not be written never reached the server"
    );
}

#[test]
fn a_servers_progress_reaches_the_client_for_its_own_call_and_only_until_the_answer() {
    let dir = scratch("gateway-fast-progress", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);
    let progress_in = |seen: &[Value]| -> Vec<(Value, Value)> {
        seen.iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| {
                (
                    m["params"]["progressToken"].clone(),
                    m["params"]["progress"].clone(),
                )
            })
            .collect()
    };

    // A call to the other server, held open, with the token `q-7`.
    client.line(
        r#"{"jsonrpc":"2.0","id":"held","method":"tools/call","params":{"name":"o_slow","arguments":{},"_meta":{"progressToken":"q-7"}}}"#,
    );
    let other = dir.join("other.jsonl");
    assert!(
        wait_for(|| !calls_of(&journal(&other), "slow").is_empty()),
        "the held call reached the other server"
    );
    assert_eq!(
        calls_of(&journal(&other), "slow")[0]["params"]["_meta"]["progressToken"],
        "q-7",
        "the server is sent the client's token"
    );
    // The journal server sends progress for `q-7`, the other server's call: not passed on.
    client.line(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"j_inject","arguments":{"token":"q-7"}}}"#,
    );
    let seen = client.until_answer(&json!(2));
    assert_eq!(progress_in(&seen), [], "{seen:?}");

    // Its own call's progress, in order, before the answer; not `not-yours`, not the one after.
    client.line(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"j_progress","arguments":{},"_meta":{"progressToken":"p-1"}}}"#,
    );
    let seen = client.until_answer(&json!(3));
    assert_eq!(
        progress_in(&seen),
        [
            (json!("p-1"), json!(1)),
            (json!("p-1"), json!(2)),
            (json!("p-1"), json!(3))
        ],
        "{seen:?}"
    );
    assert_eq!(
        seen.last().map(|m| &m["result"]["content"][0]["text"]),
        Some(&json!("done"))
    );
    // The server wrote the fourth after its answer, before answering the next call.
    client.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "j_echo", "arguments": {}}}));
    let seen = client.until_answer(&json!(4));
    assert_eq!(progress_in(&seen), [], "{seen:?}");
    // A call without a token gets none either.
    client.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "j_progress", "arguments": {}}}));
    let seen = client.until_answer(&json!(5));
    assert_eq!(progress_in(&seen), [], "{seen:?}");
}

#[test]
fn a_server_writing_a_message_past_the_bound_is_cut_off_and_started_again_and_nothing_is_held() {
    let dir = scratch("gateway-fast-flood", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);

    // 300 MiB in one line: past the 64 MiB a message may hold.
    let flooded = client.call(1, "j_flood", r#"{"mib":300}"#);
    let message = flooded["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`journal`") && message.contains("longer than 64 MiB"),
        "the reason: {flooded}"
    );
    assert!(
        client.said("output was cut off", Duration::from_secs(5)),
        "the cut is said"
    );
    // The other server keeps serving.
    let other = client.call(2, "o_echo", r#"{"still":"here"}"#);
    assert_eq!(
        other["result"]["content"][0]["text"],
        r#"{"still": "here"}"#
    );
    let peak = peak_kib(client.child.id()).expect("the gateway runs");
    assert!(
        peak < 160 * 1024,
        "the gateway held {peak} KiB at once while the server wrote 300 MiB in one line"
    );
    // The server is started again and serves.
    assert!(
        client.said("server `journal` is back", Duration::from_secs(20)),
        "the server is started again"
    );
    let back = client.call(3, "j_echo", r#"{"again":1}"#);
    assert_eq!(
        back["result"]["content"][0]["text"], r#"{"again": 1}"#,
        "{back}"
    );

    let records = calls_once(&dir, "flood", 1);
    let flood = outcome(&records, "flood");
    assert_eq!(flood.len(), 1);
    assert_eq!(flood[0]["success"], false, "{}", flood[0]);
}

#[test]
fn max_message_sets_the_bound_for_both_sides_and_a_message_under_it_passes() {
    let dir = scratch("gateway-fast-max-message", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start_with(&dir, Command::new(BIN), &["--max-message", "1MiB"]);

    // Under the bound, both ways: 600 KiB of arguments, echoed back.
    let text = "u".repeat(600 * 1024);
    let echoed = client.call(1, "j_echo", &format!(r#"{{"text":"{text}"}}"#));
    assert_eq!(
        echoed["result"]["content"][0]["text"],
        format!(r#"{{"text": "{text}"}}"#)
    );
    // A client's message past it: answered unread, naming the bound given.
    let big = "y".repeat(2 * 1024 * 1024);
    client.line(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"j_echo","arguments":{{"text":"{big}"}}}}}}"#
    ));
    let refused = client.answer(&Value::Null);
    assert_eq!(refused["error"]["code"], -32600, "{refused:.300}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("longer than 1 MiB (1048576 bytes)"),
        "{refused:.300}"
    );
    // A server's: its output is cut off, the call fails saying why.
    let flooded = client.call(3, "j_flood", r#"{"mib":2}"#);
    let message = flooded["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`journal`") && message.contains("longer than 1 MiB"),
        "the reason: {flooded}"
    );
    // Nothing past the bound reached the server; the call under it did.
    let sent = calls_of(&journal(&dir.join("journal.jsonl")), "echo");
    assert_eq!(sent.len(), 1, "{:.300}", format!("{sent:?}"));
}

#[test]
fn a_client_message_past_the_bound_is_answered_unread_and_the_session_goes_on() {
    let dir = scratch("gateway-fast-long-client", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);

    // A call whose arguments hold 200 MiB: past the 64 MiB a message may hold.
    let big = "y".repeat(200 * 1024 * 1024);
    client.line(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"j_echo","arguments":{{"text":"{big}"}}}}}}"#
    ));
    drop(big);
    let refused = client.answer(&Value::Null);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("longer than 64 MiB"), "{refused}");
    assert!(
        client.said("longer than 64 MiB", Duration::from_secs(5)),
        "the gateway says so"
    );

    // The session goes on, and the next call is the one served.
    let after = client.call(2, "j_echo", r#"{"after":true}"#);
    assert_eq!(after["result"]["content"][0]["text"], r#"{"after": true}"#);
    let peak = peak_kib(client.child.id()).expect("the gateway runs");
    assert!(
        peak < 150 * 1024,
        "the gateway held {peak} KiB at once for a message of 200 MiB"
    );
    // The message unread went nowhere: not to the server, not on record.
    let sent = calls_of(&journal(&dir.join("journal.jsonl")), "echo");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["params"]["arguments"], json!({"after": true}));
    let records = calls_once(&dir, "echo", 1);
    assert_eq!(outcome(&records, "echo").len(), 1);
}

#[test]
fn a_server_writing_progress_faster_than_the_client_reads_is_held_back_and_nothing_is_lost() {
    let dir = scratch("gateway-fast-spam", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);

    // The client stops reading; the server writes 60,000 progress lines of 3 KB (180 MB).
    client.paused.store(true, Ordering::SeqCst);
    client.line(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"j_spam","arguments":{"count":60000},"_meta":{"progressToken":"t"}}}"#,
    );
    // Until the server is held back: blocked writing to the gateway, which holds no more.
    let gateway = client.child.id();
    assert!(
        proxy_common::settled(gateway, || proxy_common::children(gateway)
            .into_iter()
            .any(blocked_writing_a_pipe)),
        "the server writing progress nobody reads was never held back"
    );
    let peak = peak_kib(gateway).expect("the gateway runs");
    assert!(
        peak < 120 * 1024,
        "the gateway held {peak} KiB at once for a client that does not read"
    );

    // The client reads again: every line arrives, in order, then the answer.
    client.paused.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut next = 0;
    loop {
        let left = deadline
            .checked_duration_since(Instant::now())
            .expect("the answer in time");
        let line = client.lines.recv_timeout(left).expect("a line");
        let value: Value = serde_json::from_str(&line).expect("JSON");
        if value["method"] == "notifications/progress" {
            assert_eq!(value["params"]["progress"], next, "in order");
            next += 1;
            continue;
        }
        assert_eq!(value["id"], 1, "{line:.200}");
        assert_eq!(value["result"]["content"][0]["text"], "spammed");
        break;
    }
    assert_eq!(next, 60_000, "every progress line arrived");
}

#[test]
fn a_client_sending_calls_faster_than_it_reads_the_answers_is_read_no_further_and_nothing_is_lost()
{
    let dir = scratch("gateway-fast-unread", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);

    // The client stops reading and writes 1,000 calls of 40 KB (40 MB) as fast as it can.
    const CALLS: u64 = 1_000;
    let text = "z".repeat(40 * 1024);
    let written = AtomicBool::new(false);
    // How many calls the client has written so far.
    let sent = std::sync::atomic::AtomicU64::new(0);
    client.paused.store(true, Ordering::SeqCst);
    std::thread::scope(|scope| {
        let (input, text, written, sent) = (&mut client.input, &text, &written, &sent);
        let child = KillOnPanic(&mut client.child);
        scope.spawn(move || {
            for id in 1..=CALLS {
                let call = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"j_echo","arguments":{{"text":"{text}"}}}}}}"#
                );
                if writeln!(input, "{call}").is_err() {
                    return;
                }
                sent.store(id, Ordering::SeqCst);
            }
            let _ = input.flush();
            written.store(true, Ordering::SeqCst);
        });
        // Until the client's writing has stopped (or it wrote everything).
        let mut last = u64::MAX;
        assert!(
            proxy_common::settled(child.0.id(), || {
                let now = sent.load(Ordering::SeqCst);
                std::mem::replace(&mut last, now) == now
            }),
            "the client's writing never stopped"
        );
        let peak = peak_kib(child.0.id()).expect("the gateway runs");
        // The gateway stopped reading: the client could not write it all.
        assert!(
            !written.load(Ordering::SeqCst),
            "the gateway read 40 MB of calls whose answers no one read"
        );
        eprintln!("the gateway's peak: {peak} KiB");
        assert!(
            peak < 110 * 1024,
            "the gateway held {peak} KiB at once for a client that does not read"
        );

        // The client reads again: every call is answered, with its own result.
        client.paused.store(false, Ordering::SeqCst);
        let expected = format!(r#"{{"text": "{text}"}}"#);
        let mut answered = std::collections::BTreeSet::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while answered.len() < CALLS as usize {
            let left = deadline
                .checked_duration_since(Instant::now())
                .expect("every answer in time");
            let line = client.lines.recv_timeout(left).expect("a line");
            let value: Value = serde_json::from_str(&line).expect("JSON");
            let id = value["id"].as_u64().expect("an answer");
            assert_eq!(
                value["result"]["content"][0]["text"].as_str(),
                Some(expected.as_str()),
                "{line:.200}"
            );
            assert!(answered.insert(id), "{id} answered twice");
        }
    });
    assert!(written.load(Ordering::SeqCst));
    assert_eq!(
        calls_of(&journal(&dir.join("journal.jsonl")), "echo").len(),
        1_000
    );
}

/// The room calls in flight hold for their answers holds back only the client's reading, never
/// the servers' output their answers come in: a call writing progress while thousands of
/// calls wait behind it at the same server, the client reading all along, gets every line.
#[test]
fn calls_in_flight_past_the_room_do_not_hold_back_the_answers_they_wait_for() {
    let dir = scratch("gateway-fast-held", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);

    // 3,000 progress lines of 3 KB, and behind them 3,000 calls holding 4 KiB each (12 MiB).
    client.line(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"j_spam","arguments":{"count":3000},"_meta":{"progressToken":"t"}}}"#,
    );
    const CALLS: u64 = 3_000;
    std::thread::scope(|scope| {
        let input = &mut client.input;
        let _child = KillOnPanic(&mut client.child);
        scope.spawn(move || {
            for id in 2..CALLS + 2 {
                let call = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"j_echo","arguments":{{"n":{id}}}}}}}"#
                );
                if writeln!(input, "{call}").is_err() {
                    return;
                }
            }
            let _ = input.flush();
        });
        let mut answered = std::collections::BTreeSet::new();
        let mut progress = 0;
        let deadline = Instant::now() + Duration::from_secs(120);
        while answered.len() < CALLS as usize + 1 {
            let left = deadline
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| {
                    panic!(
                        "{} answers and {progress} progress lines, then nothing",
                        answered.len()
                    )
                });
            let Ok(line) = client.lines.recv_timeout(left) else {
                panic!(
                    "{} answers and {progress} progress lines, then nothing",
                    answered.len()
                );
            };
            let value: Value = serde_json::from_str(&line).expect("JSON");
            if value["method"] == "notifications/progress" {
                progress += 1;
                continue;
            }
            let id = value["id"].as_u64().expect("an answer");
            assert!(value["result"].is_object(), "{line:.200}");
            assert!(answered.insert(id), "{id} answered twice");
        }
        assert_eq!(progress, 3_000, "every progress line, before the answer");
    });
}

/// A server that stops reading its input holds up none of the others: the calls written to it
/// pile up (2 MB, far past what its pipe holds), in order, without the client's reader waiting
/// for them; a call to the other server is answered at once, and a call of the first one's that
/// the client cancels is cancelled on record.
#[test]
fn a_server_that_stops_reading_holds_up_no_other_server() {
    let dir = scratch("gateway-fast-deaf", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);

    client.line(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"j_deaf","arguments":{}}}"#);
    assert!(
        wait_for(|| !calls_of(&journal(&dir.join("journal.jsonl")), "deaf").is_empty()),
        "the server read the call that stops it"
    );
    let text = "d".repeat(100 * 1024);
    // Written from a thread of their own: a gateway that waited for the deaf server would stop
    // reading, and this test would fail below rather than hang in a write.
    std::thread::scope(|scope| {
        let (input, lines, text) = (&mut client.input, &client.lines, &text);
        let _child = KillOnPanic(&mut client.child);
        scope.spawn(move || {
            for id in 2..22 {
                let call = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"j_echo","arguments":{{"text":"{text}"}}}}}}"#
                );
                if writeln!(input, "{call}").is_err() {
                    return;
                }
            }
            let other = r#"{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"o_echo","arguments":{"still":"here"}}}"#;
            let _ = writeln!(input, "{other}").and_then(|()| input.flush());
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        let other = loop {
            let left = deadline
                .checked_duration_since(Instant::now())
                .expect("the other server's call answered within 5 s, behind the deaf one");
            let Ok(line) = lines.recv_timeout(left) else {
                panic!("the other server's call was not answered within 5 s, behind the deaf one");
            };
            let value: Value = serde_json::from_str(&line).expect("JSON");
            if value["id"] == 30 {
                break value;
            }
        };
        assert_eq!(
            other["result"]["content"][0]["text"],
            r#"{"still": "here"}"#
        );
    });
    // Cancelled while it waits to be written: no answer, on record as cancelled.
    client
        .line(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":21}}"#);
    client.line(r#"{"jsonrpc":"2.0","id":31,"method":"ping"}"#);
    let pong = client.answer(&json!(31));
    assert_eq!(pong["result"], json!({}), "{pong}");
    let records = proxy_common::records(&dir.join("audit.jsonl"));
    let echoes: Vec<&Value> = records
        .iter()
        .filter(|r| r["tool"] == "echo" && r["provider"] == "journal")
        .collect();
    let intents = echoes.iter().filter(|r| r["phase"] == "intent").count();
    assert_eq!(
        intents, 20,
        "each call on record before it waits: {echoes:?}"
    );
    assert!(
        wait_for(|| proxy_common::records(&dir.join("audit.jsonl"))
            .iter()
            .any(|r| {
                r["phase"] == "outcome"
                    && r["provider"] == "journal"
                    && r["error"].as_str().is_some_and(|e| e.contains("cancelled"))
            })),
        "the cancelled call's outcome"
    );
}

/// A client that leaves as soon as it has its answer: the gateway ends only once the call's
/// end has run, so the call's outcome is on record when the gateway has exited. (The result
/// is large: its digest takes long enough that, without the wait, the exit wins the race.)
#[test]
fn a_client_that_leaves_with_its_answer_leaves_the_calls_outcome_on_record() {
    let dir = scratch("gateway-fast-leaves", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut child = spawn_bare(&dir, Stdio::inherit(), &[]);
    let child = KillOnPanic(&mut child);
    let mut input = child.0.stdin.take().expect("stdin");
    let mut output = BufReader::new(child.0.stdout.take().expect("stdout"));
    let big = "b".repeat(2 << 20);
    let lines = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "j_echo", "arguments": {"big": big}}}),
    ];
    let mut answered = false;
    for line in &lines {
        writeln!(input, "{line}").expect("write");
        input.flush().expect("flush");
        let Some(id) = line.get("id") else { continue };
        let mut text = String::new();
        loop {
            text.clear();
            assert!(
                output.read_line(&mut text).expect("read") > 0,
                "no answer to {id}"
            );
            let message: Value = serde_json::from_str(&text).expect("JSON");
            if &message["id"] == id {
                answered = id == 1 && message["result"]["content"][0]["text"].is_string();
                break;
            }
        }
    }
    assert!(answered, "the call was answered with its result");
    // Gone at once: the gateway sees its input end while the outcome is still being made.
    drop(input);
    exits_within(&mut *child.0, Duration::from_secs(30));
    let records = calls_in(&std::fs::read_to_string(dir.join("audit.jsonl")).expect("trail"));
    let done = outcome(&records, "echo");
    assert_eq!(done.len(), 1, "the outcome is on record: {records:?}");
    assert_eq!(done[0]["success"], true);
}

/// `SIGTERM` while a call waits on its server: the server is stopped, the call fails, and its
/// outcome (a failure) is on record once the gateway has exited. (The input is large: the
/// outcome record, which carries it, takes long, so that without the wait the exit wins the
/// race in most runs, 2 of 3 measured; the leaving client's test above catches it every time.)
#[test]
fn sigterm_with_a_call_in_flight_leaves_its_failure_on_record() {
    let dir = scratch("gateway-fast-sigterm", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);
    client.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "j_slow", "arguments": {"big": "b".repeat(2 << 20)}}}));
    // Written to the server (so its intent is on record): the server never answers.
    assert!(
        wait_for(|| !calls_of(&journal(&dir.join("journal.jsonl")), "slow").is_empty()),
        "the call reached its server"
    );
    terminate(&mut client.child, Duration::from_secs(30));
    let records = calls_in(&std::fs::read_to_string(dir.join("audit.jsonl")).expect("trail"));
    let done = outcome(&records, "slow");
    assert_eq!(done.len(), 1, "the outcome is on record: {records:?}");
    assert_eq!(done[0]["success"], false);
}

/// A client that stops reading while its answer is written holds that call's end (the thread
/// writing the answer waits for room): on `SIGTERM` the gateway waits for it only up to its
/// bound (`--drain`, 2 s here; 10 s unless told), says how many calls it gave up on, and exits
/// with the trail closed whole (the call's intent on record, no outcome, every line sealed).
#[test]
fn sigterm_with_an_answer_the_client_never_reads_ends_after_the_bound_and_says_so() {
    let dir = scratch("gateway-fast-sigterm-unread", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut child = spawn_bare(&dir, Stdio::piped(), &["--drain", "2"]);
    let child = KillOnPanic(&mut child);
    let mut input = child.0.stdin.take().expect("stdin");
    let mut output = BufReader::new(child.0.stdout.take().expect("stdout"));
    let (said, errors) = mpsc::channel();
    let stderr = child.0.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            let _ = said.send(line);
        }
    });
    writeln!(
        input,
        "{}",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
    )
    .expect("write");
    input.flush().expect("flush");
    let mut text = String::new();
    assert!(output.read_line(&mut text).expect("read") > 0, "no answer");
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .expect("write");
    // From here on nothing the gateway writes is read: the 2 MiB answer fills the pipe.
    writeln!(
        input,
        "{}",
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "j_echo", "arguments": {"big": "b".repeat(2 << 20)}}})
    )
    .expect("write");
    input.flush().expect("flush");
    assert!(
        wait_for(|| !calls_of(&journal(&dir.join("journal.jsonl")), "echo").is_empty()),
        "the call reached its server"
    );
    // The server answers at once: wait until a thread of the gateway is blocked writing that
    // answer to the full pipe (its `wchan`, where the kernel shows it), so that SIGTERM cannot
    // come before the server's answer and end the call with a short failure instead.
    let pid = child.0.id();
    assert!(
        wait_for(|| blocked_writing_a_pipe(pid)),
        "no thread of the gateway is blocked writing the answer nobody reads (no `pipe_write` \
         in /proc/{pid}/task/*/wchan)"
    );
    let waited = terminate(&mut *child.0, Duration::from_secs(40));
    assert!(
        waited >= Duration::from_secs(2),
        "the gateway waited for the call's end before giving up: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(9),
        "the gateway gave up after --drain's 2 s, not the default 10: {waited:?}"
    );
    let gave_up = "1 call(s) on the lane had not ended 2 s after the servers stopped";
    // Every line it wrote to standard error (the channel ends with it).
    let said: Vec<String> =
        std::iter::from_fn(|| errors.recv_timeout(Duration::from_secs(5)).ok()).collect();
    assert!(
        said.iter().any(|line| line.contains(gave_up)),
        "the gateway said how many calls it gave up on: {said:?}"
    );
    let records = records_in(&std::fs::read_to_string(dir.join("audit.jsonl")).expect("trail"));
    assert!(
        records
            .iter()
            .any(|r| r["tool"] == "echo" && r["phase"] == "intent"),
        "the call's intent is on record: {records:?}"
    );
    assert!(outcome(&records, "echo").is_empty(), "{records:?}");
    let verified = Command::new(BIN)
        .args(["audit", "verify"])
        .arg(dir.join("audit.jsonl"))
        .output()
        .expect("verify");
    assert!(
        verified.status.success(),
        "the trail verifies: {}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
}

/// `--drain` out of its range, or not a number, is refused before anything starts, by the
/// gateway and the proxy alike: exit 2, the flag and its range named, no trail opened.
#[test]
fn a_drain_past_an_hour_or_not_seconds_is_refused_before_anything_starts() {
    let dir = scratch("gateway-fast-drain-refused", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let trail = dir.join("audit.jsonl");
    for value in ["3601", "-1", "2.5", "ten"] {
        for command in [&["gateway"][..], &["proxy", "--server", "j"]] {
            let out = Command::new(BIN)
                .args(command)
                .arg("--policy")
                .arg(dir.join("policy.toml"))
                .args(["--role", "operator", "--audit"])
                .arg(&trail)
                .args(["--drain", value])
                .args(if command[0] == "proxy" {
                    &["--", "true"][..]
                } else {
                    &[]
                })
                .stdin(Stdio::null())
                .output()
                .expect("capability");
            let said = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{command:?} --drain {value}: {said}"
            );
            assert!(
                said.contains("--drain <SECONDS>") && said.contains(value),
                "{command:?} --drain {value}: {said}"
            );
            if value == "3601" {
                assert!(
                    said.contains("0..=3600"),
                    "{command:?} --drain {value}: {said}"
                );
            }
            assert!(
                !trail.exists(),
                "{command:?} --drain {value}: a trail was opened"
            );
        }
    }
}

/// Requests rmcp's reader cannot read (a number past `f64`, a lone surrogate, nesting past 128
/// levels), each large: every one is answered under its id with a JSON-RPC error, none keeps
/// the room it held (40 of 300 KiB are past the 8 MiB the client may have waiting), and the
/// session goes on. Before, each went unanswered and after about 30 the client was not read.
#[test]
fn requests_rmcp_cannot_read_are_answered_under_their_id_and_give_their_room_back() {
    let dir = scratch("gateway-fast-unreadable", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::start(&dir);
    let pad = "p".repeat(300 * 1024);
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    for n in 0..40u64 {
        let odd = match n % 3 {
            0 => "1e400".to_owned(),
            1 => r#""\ud800""#.to_owned(),
            _ => deep.clone(),
        };
        client.line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"_meta":{{"pad":"{pad}","odd":{odd}}}}}}}"#,
            id = 100 + n
        ));
    }
    for n in 0..40u64 {
        let answer = client.answer(&json!(100 + n));
        assert_eq!(answer["error"]["code"], -32700, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("Parse error: "), "{answer}");
    }
    let after = client.call(2, "j_echo", r#"{"after":true}"#);
    assert_eq!(after["result"]["content"][0]["text"], r#"{"after": true}"#);
}
