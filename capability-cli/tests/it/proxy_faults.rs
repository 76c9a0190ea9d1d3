//! `capability proxy` when things go wrong (issue 14, item 3): bad input (exit 2, nothing
//! spawned), the server crashing, the client leaving, malformed lines from either side, a
//! server's message past the 64 MiB bound (cut off, none of it held), an audit trail that
//! cannot be written (fail-closed), and a server gone while the client is behind on its answers
//! (each written before the proxy exits).

use crate::proxy_common;
use crate::support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use capability::rmcp::REFUSED_CODE;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use proxy_common::{BIN, Proxied, children, proxy_args, scratch, summary, triple, verifies};

const POLICY: &str = r#"
[roles.viewer]
ceiling = "read-only"
allow = ["*"]

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]
"#;

fn capability(args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run capability")
}

#[test]
fn bad_input_exits_2_before_anything_is_spawned() {
    let dir = scratch("bad_input", POLICY);
    let path = |name: &str| dir.join(name).display().to_string();
    std::fs::write(dir.join("broken.toml"), "[roles.viewer\nceiling = 1").expect("write");
    std::fs::write(dir.join("broken.lock"), "not = [a lockfile").expect("write");
    // A lockfile that pins another server only.
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/mcp/server-memory.tools.json"
    );
    let pinned = capability(&[
        "pin",
        "--server",
        "other",
        "--lock",
        &path("other.lock"),
        fixture,
    ]);
    assert_eq!(
        pinned.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&pinned.stderr)
    );
    let marker = dir.join("spawned");
    let spawn = format!("touch {}", marker.display());
    let (policy, trail, missing) = (path("policy.toml"), path("trail.jsonl"), path("missing"));
    let base = |role: &str, policy: &str, audit: &str| -> Vec<String> {
        [
            "proxy", "--policy", policy, "--role", role, "--server", "fs", "--audit", audit,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    };
    let with = |mut args: Vec<String>, extra: &[&str]| {
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    };
    let command = ["--", "sh", "-c", &spawn];
    // A policy with a bearer token, and a port that is taken.
    let tokens = path("tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "{POLICY}\n[bearer_tokens]\n\"sha256:{}\" = \"viewer\"\n",
            "ab".repeat(32)
        ),
    )
    .expect("write");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let busy = taken.local_addr().expect("address").to_string();
    let no_role = |policy: &str| -> Vec<String> {
        [
            "proxy", "--policy", policy, "--server", "fs", "--audit", &trail,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    };
    let nowhere = format!("{}/no/such/dir/trail.jsonl", dir.display());
    // Said once, with the system's reason (not "cannot open ...: cannot write ...").
    let nowhere_said = format!("cannot open the audit trail {nowhere}: No such file or directory");
    // Trails that are not what their names say: an empty file named as a database is one (not
    // migrated), a directory is none, and a binary file is not a trail (not "torn").
    let (empty_db, dir_db, binary) = (path("state.db"), path("dir.db"), path("picture.db"));
    std::fs::write(&empty_db, "").expect("write");
    std::fs::create_dir_all(&dir_db).expect("mkdir");
    std::fs::write(&binary, b"\x89PNG\r\x1a\x00\x00\x00\rIHDR").expect("write");
    let empty_said = format!(
        "cannot open the audit trail {empty_db}: the database is not migrated (schema version \
         0, this build needs"
    );
    let migrate_said = format!("run `capability db migrate {empty_db}`");
    let dir_said =
        format!("cannot open the audit trail {dir_db}: this is a directory, not a SQLite database");
    let binary_said = format!("the audit trail {binary} is broken (line 1: not an audit record");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            with(base("viewer", &policy, &empty_db), &command),
            &empty_said,
        ),
        (
            with(base("viewer", &policy, &empty_db), &command),
            &migrate_said,
        ),
        (with(base("viewer", &policy, &dir_db), &command), &dir_said),
        (
            with(base("viewer", &policy, &binary), &command),
            &binary_said,
        ),
        (
            with(base("intern", &policy, &trail), &command),
            "role `intern` is not in the policy",
        ),
        (with(base("viewer", &missing, &trail), &command), "missing"),
        (
            with(base("viewer", &path("broken.toml"), &trail), &command),
            "broken.toml",
        ),
        (
            with(
                base("viewer", &policy, &trail),
                &[
                    "--lock", &missing, command[0], command[1], command[2], command[3],
                ],
            ),
            "no such lockfile",
        ),
        (
            with(
                base("viewer", &policy, &trail),
                &[
                    "--lock",
                    &path("broken.lock"),
                    command[0],
                    command[1],
                    command[2],
                    command[3],
                ],
            ),
            "broken.lock",
        ),
        (
            with(
                base("viewer", &policy, &trail),
                &[
                    "--lock",
                    &path("other.lock"),
                    command[0],
                    command[1],
                    command[2],
                    command[3],
                ],
            ),
            "pins no tool of server `fs`",
        ),
        (
            with(base("viewer", &policy, &nowhere), &command),
            &nowhere_said,
        ),
        (
            with(
                base("viewer", &policy, &trail),
                &[
                    "--trust",
                    "sometimes",
                    command[0],
                    command[1],
                    command[2],
                    command[3],
                ],
            ),
            "sometimes",
        ),
        (base("viewer", &policy, &trail), "no server"),
        // The HTTP front and the HTTP upstream.
        (
            with(
                no_role(&policy),
                &[
                    "--listen",
                    "127.0.0.1:0",
                    command[0],
                    command[1],
                    command[2],
                    command[3],
                ],
            ),
            "[bearer_tokens]",
        ),
        (
            with(
                base("viewer", &tokens, &trail),
                &[
                    "--listen",
                    "127.0.0.1:0",
                    command[0],
                    command[1],
                    command[2],
                    command[3],
                ],
            ),
            "is not used with `--listen`",
        ),
        (
            with(
                no_role(&tokens),
                &[
                    "--listen",
                    "nowhere:port",
                    command[0],
                    command[1],
                    command[2],
                    command[3],
                ],
            ),
            "--listen",
        ),
        (
            with(
                no_role(&tokens),
                &[
                    "--listen", &busy, command[0], command[1], command[2], command[3],
                ],
            ),
            "cannot listen on",
        ),
        (with(no_role(&policy), &command), "--role"),
        (
            with(
                base("viewer", &policy, &trail),
                &[
                    "--upstream",
                    "http://127.0.0.1:9/mcp",
                    command[0],
                    command[1],
                    command[2],
                    command[3],
                ],
            ),
            "not both",
        ),
        (
            with(
                base("viewer", &policy, &trail),
                &["--upstream", "ftp://127.0.0.1/mcp"],
            ),
            "http:// or https://",
        ),
        (
            with(
                base("viewer", &policy, &trail),
                &["--upstream", "not a url"],
            ),
            "is not a server's URL",
        ),
        (
            with(
                vec![
                    "proxy".into(),
                    "--policy".into(),
                    policy.clone(),
                    "--role".into(),
                    "viewer".into(),
                    "--server".into(),
                    "fs".into(),
                ],
                &command,
            ),
            "--audit",
        ),
    ];
    for (args, message) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = capability(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: stdout is the client's");
        assert!(!marker.exists(), "{args:?}: the command was spawned");
    }
    assert!(!dir.join("trail.jsonl").exists(), "no trail was started");

    // The same command line with good input does spawn it (so the marker can tell).
    let out = capability(&[
        "proxy", "--policy", &policy, "--role", "viewer", "--server", "fs", "--audit", &trail,
        "--", "sh", "-c", &spawn,
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(marker.exists(), "spawned");
}

#[test]
fn help_documents_every_flag_and_says_tools_only() {
    let out = capability(&["proxy", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--policy",
        "--role",
        "--server",
        "--trust",
        "--lock",
        "--audit",
        "--max-calls",
        "--max-denials",
        "--listen",
        "--upstream",
        "[bearer_tokens]",
        "<COMMAND>",
    ] {
        assert!(help.contains(flag), "{flag} in:\n{help}");
    }
    assert!(help.contains("Tools only"), "{help}");
    assert!(help.contains("mcpServers"), "{help}");
}

#[tokio::test(flavor = "current_thread")]
async fn the_server_crashing_ends_the_proxy_with_an_error_after_the_trail() {
    let servers =
        require_servers!("the_server_crashing_ends_the_proxy_with_an_error_after_the_trail");
    let dir = scratch("crash", POLICY);
    let trail = dir.join("trail.jsonl");
    let args = proxy_args(
        &dir,
        "viewer",
        "drift",
        &trail,
        &["--trust", "trusted"],
        &servers.drift(),
    );
    let mut proxied = Proxied::start(&args).await;
    let stable = proxied.call("stable", json!({})).await.expect("runs");
    assert!(stable.contains("stable"), "{stable}");
    let error = proxied
        .call("crash", json!({}))
        .await
        .expect_err("the server died");
    assert!(
        error
            .message
            .contains("the MCP server `drift` did not answer: `node` exited (exit status: 3)"),
        "{error:?}"
    );
    exits(&mut proxied, 1, "the proxy exits when the server is gone").await;
    assert_eq!(
        summary(&trail),
        [
            triple("viewer", "stable", "allowed"),
            triple("viewer", "crash", "allowed")
        ]
    );
    let records = proxy_common::calls(&trail);
    assert_eq!(records[1]["success"], false, "{:?}", records[1]);
    verifies(&trail);
}

#[tokio::test(flavor = "current_thread")]
async fn the_client_leaving_stops_the_server_and_keeps_the_trail() {
    let servers = require_servers!("the_client_leaving_stops_the_server_and_keeps_the_trail");
    let dir = scratch("client_leaves", POLICY);
    let trail = dir.join("trail.jsonl");
    let args = proxy_args(
        &dir,
        "viewer",
        "drift",
        &trail,
        &["--trust", "trusted"],
        &servers.drift(),
    );
    let proxied = Proxied::start(&args).await;
    proxied.call("stable", json!({})).await.expect("runs");
    proxied.call("shifty", json!({})).await.expect("runs");
    let proxy_pid = proxied.child.id().expect("running");
    let server = children(proxy_pid);
    assert_eq!(server.len(), 1, "one server process: {server:?}");
    assert!(Path::new(&format!("/proc/{}", server[0])).exists());
    let status = proxied.close().await;
    assert_eq!(status.code(), Some(0));
    assert!(
        !Path::new(&format!("/proc/{}", server[0])).exists(),
        "the server process is gone"
    );
    assert_eq!(
        summary(&trail),
        [
            triple("viewer", "stable", "allowed"),
            triple("viewer", "shifty", "allowed")
        ]
    );
    verifies(&trail);
}

/// Reads lines until one satisfies `want`.
async fn read_until(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    want: impl Fn(&Value) -> bool,
) -> Value {
    let read = async {
        while let Some(line) = lines.next_line().await.expect("reads") {
            let value: Value = serde_json::from_str(&line).expect("the proxy writes JSON lines");
            if want(&value) {
                return value;
            }
        }
        panic!("the proxy closed its output");
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("an answer in time")
}

#[tokio::test(flavor = "current_thread")]
async fn malformed_lines_from_the_client_get_a_parse_error_and_the_proxy_goes_on() {
    let servers =
        require_servers!("malformed_lines_from_the_client_get_a_parse_error_and_the_proxy_goes_on");
    let dir = scratch("client_garbage", POLICY);
    let args = proxy_args(
        &dir,
        "viewer",
        "drift",
        &dir.join("t.jsonl"),
        &["--trust", "trusted"],
        &servers.drift(),
    );
    let mut child = tokio::process::Command::new(BIN)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let parse_error = |v: &Value| v["error"]["code"] == -32700;

    stdin.write_all(b"this is not JSON\n").await.expect("write");
    let answer = read_until(&mut lines, parse_error).await;
    assert_eq!(answer["id"], Value::Null, "{answer}");

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    stdin
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .expect("write");
    let answer = read_until(&mut lines, |v| v["id"] == 1).await;
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "capability-proxy",
        "{answer}"
    );
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n{\"broken\n")
        .await
        .expect("write");
    read_until(&mut lines, parse_error).await;
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n")
        .await
        .expect("write");
    let answer = read_until(&mut lines, |v| v["id"] == 2).await;
    assert_eq!(
        answer["result"]["tools"].as_array().map(Vec::len),
        Some(5),
        "{answer}"
    );
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits")
        .expect("status");
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "current_thread")]
async fn malformed_lines_from_the_server_are_ignored_and_the_proxy_goes_on() {
    let servers =
        require_servers!("malformed_lines_from_the_server_are_ignored_and_the_proxy_goes_on");
    let dir = scratch("server_garbage", POLICY);
    let trail = dir.join("trail.jsonl");
    let args = proxy_args(
        &dir,
        "viewer",
        "drift",
        &trail,
        &["--trust", "trusted"],
        &servers.drift(),
    );
    let proxied = Proxied::start(&args).await;
    let noisy = proxied
        .call("noise", json!({}))
        .await
        .expect("answers after its noise");
    assert!(noisy.contains("noisy"), "{noisy}");
    let stable = proxied
        .call("stable", json!({}))
        .await
        .expect("still running");
    assert!(stable.contains("stable"), "{stable}");
    assert_eq!(proxied.names().await.len(), 5);
    assert_eq!(proxied.close().await.code(), Some(0));
}

#[tokio::test(flavor = "current_thread")]
async fn an_audit_trail_that_cannot_be_written_refuses_calls_but_lists() {
    let servers = require_servers!("an_audit_trail_that_cannot_be_written_refuses_calls_but_lists");
    let dir = scratch("full_trail", POLICY);
    // A trail on a full device: it opens, and no record can be written.
    let trail = std::path::PathBuf::from("/dev/full");
    let memory_file = dir.join("memory.jsonl");
    let args = proxy_args(
        &dir,
        "operator",
        "memory",
        &trail,
        &[],
        &servers.memory(&memory_file),
    );
    let proxied = Proxied::start(&args).await;
    assert_eq!(proxied.names().await.len(), 9, "listing needs no record");
    // No call runs: not even the first, since its intent cannot be written.
    let first = proxied
        .call("read_graph", json!({}))
        .await
        .expect_err("refused: its intent cannot be written");
    assert!(
        first
            .data
            .as_ref()
            .expect("data")
            .to_string()
            .contains("could not be written"),
        "{first:?}"
    );
    let create = json!({"entities": [{"name": "x", "entityType": "t", "observations": []}]});
    let refused = proxied
        .call("create_entities", create)
        .await
        .expect_err("refused: its record cannot be written");
    assert_eq!(refused.code.0, REFUSED_CODE, "{refused:?}");
    let data = refused.data.as_ref().expect("data").to_string();
    assert!(data.contains("could not be written"), "{data}");
    assert_eq!(proxied.names().await.len(), 9, "listing still works");
    assert!(!memory_file.exists(), "the call never reached the server");
    assert!(
        proxied.call("read_graph", json!({})).await.is_err(),
        "every call"
    );
    assert_eq!(proxied.close().await.code(), Some(0));
}

#[tokio::test(flavor = "current_thread")]
async fn sigterm_stops_the_server_and_keeps_the_trail() {
    let servers = require_servers!("sigterm_stops_the_server_and_keeps_the_trail");
    let dir = scratch("sigterm", POLICY);
    let trail = dir.join("trail.jsonl");
    let args = proxy_args(
        &dir,
        "viewer",
        "drift",
        &trail,
        &["--trust", "trusted"],
        &servers.drift(),
    );
    let mut proxied = Proxied::start(&args).await;
    proxied.call("stable", json!({})).await.expect("runs");
    let proxy_pid = proxied.child.id().expect("running");
    let server = children(proxy_pid);
    assert_eq!(server.len(), 1, "{server:?}");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &proxy_pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    exits(&mut proxied, 0, "the proxy stops").await;
    assert!(
        !Path::new(&format!("/proc/{}", server[0])).exists(),
        "server gone"
    );
    assert_eq!(summary(&trail), [triple("viewer", "stable", "allowed")]);
    verifies(&trail);
}

/// A stdio MCP server in plain Python whose `flood` writes `mib` MiB in one line.
const FLOODING: &str = r#"
import json, sys
def send(text):
    sys.stdout.write(text + "\n"); sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "flooding", "version": "1"}}}))
    elif method == "tools/list":
        tools = [{"name": n, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
                 for n in ["echo", "flood", "spam"]]
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}}))
    elif method == "tools/call" and message["params"]["name"] == "flood":
        chunk = "x" * (1 << 20)
        for _ in range(int(message["params"]["arguments"]["mib"])):
            sys.stdout.write(chunk)
        send("")
    elif method == "tools/call" and message["params"]["name"] == "spam":
        token = message["params"]["_meta"]["progressToken"]
        pad = "p" * 3000
        for n in range(int(message["params"]["arguments"]["count"])):
            send(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": n, "message": pad}}))
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "spammed"}]}}))
    elif method == "tools/call":
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "echo"}]}}))
    elif method == "ping":
        send(json.dumps({"jsonrpc": "2.0", "id": id, "result": {}}))
    elif id is not None and method is not None:
        send(json.dumps({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}}))
"#;

/// Waits (10 s at most, else panics saying `when`) for the proxy to exit with `code`.
async fn exits(proxied: &mut Proxied, code: i32, when: &str) {
    let status = tokio::time::timeout(Duration::from_secs(10), proxied.child.wait())
        .await
        .unwrap_or_else(|_| panic!("{when}"))
        .expect("status");
    assert_eq!(status.code(), Some(code), "{when}: {status}");
}

/// The proxy in front of [`FLOODING`] (trusted, `flags` added), and its trail.
async fn flooding(name: &str, flags: &[&str]) -> (std::path::PathBuf, Proxied) {
    let dir = scratch(name, POLICY);
    std::fs::write(dir.join("flooding.py"), FLOODING).expect("server");
    let trail = dir.join("trail.jsonl");
    let server = support::McpServer {
        name: "flooding",
        program: "python3".into(),
        args: vec![dir.join("flooding.py").display().to_string()],
        env: Vec::new(),
    };
    let flags: Vec<&str> = ["--trust", "trusted"]
        .iter()
        .chain(flags)
        .copied()
        .collect();
    let args = proxy_args(&dir, "viewer", "flooding", &trail, &flags, &server);
    (trail, Proxied::start(&args).await)
}

/// The proxy in front of `server` (trusted, role `viewer`), spoken to line by line by a client
/// that has initialized: the child, its input, and its output (the answer to `initialize` read).
fn raw_proxy(
    dir: &Path,
    server: &support::McpServer,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
) {
    let trail = dir.join("trail.jsonl");
    let args = proxy_args(
        dir,
        "viewer",
        server.name,
        &trail,
        &["--trust", "trusted"],
        server,
    );
    raw_client(&args, Stdio::inherit())
}

/// `capability <args>` with its standard error to `stderr`, and a raw client's handshake done:
/// the proxy, the client's input, its output.
fn raw_client(
    args: &[String],
    stderr: Stdio,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::{BufRead, Write};
    let mut child = std::process::Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("the proxy");
    let mut input = child.stdin.take().expect("stdin");
    let mut output = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"raw","version":"1"}}}}}}"#
    )
    .and_then(|()| writeln!(input, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#))
    .expect("write");
    let mut line = String::new();
    output.read_line(&mut line).expect("initialized");
    assert!(line.contains(r#""id":0"#), "{line}");
    (child, input, output)
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_writing_a_message_past_the_bound_is_cut_off_and_the_proxy_holds_none_of_it() {
    let (trail, mut proxied) = flooding("server_flood", &[]).await;
    let echo = proxied.call("echo", json!({})).await.expect("runs");
    assert!(echo.contains("echo"), "{echo}");
    // The proxy's peak memory, read until it exits (the last reading is the peak by then).
    let pid = proxied.child.id().expect("running");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watching = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = None;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match proxy_common::peak_kib(pid) {
                    Some(now) => peak = Some(now),
                    None => break,
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        })
    };
    // 300 MiB in one line: past the 64 MiB a message may hold.
    let error = proxied
        .call("flood", json!({"mib": 300}))
        .await
        .expect_err("no answer past the bound");
    // The call's error names the server and why it has no answer.
    assert!(
        error.message.contains("`flooding` did not answer")
            && error.message.contains("output was cut off")
            && error.message.contains("longer than 64 MiB"),
        "{error:?}"
    );
    exits(
        &mut proxied,
        1,
        "the proxy exits when the server's output is cut off",
    )
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = watching
        .join()
        .expect("watcher")
        .expect("read while running");
    assert!(
        peak < 150 * 1024,
        "the proxy held {peak} KiB at once while the server wrote 300 MiB in one line"
    );
    let records = proxy_common::calls(&trail);
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[1]["success"], false, "{:?}", records[1]);
    verifies(&trail);
}

/// `--max-message` moves the bound: a server's answer of 2 MiB, under the default, is past a
/// bound of 1 MiB, and cuts the server's output off.
#[tokio::test(flavor = "current_thread")]
async fn max_message_moves_the_proxys_bound() {
    let (_, mut proxied) = flooding("server_max_message", &["--max-message", "1MiB"]).await;
    let error = proxied
        .call("flood", json!({"mib": 2}))
        .await
        .expect_err("no answer past the bound");
    assert!(
        error.message.contains("output was cut off") && error.message.contains("longer than 1 MiB"),
        "{error:?}"
    );
    exits(
        &mut proxied,
        1,
        "the proxy exits when the server's output is cut off",
    )
    .await;
}

/// A server writing progress faster than its client reads, through rmcp's path: 60,000 lines
/// of 3 KB for a call the client gave a token, the client reading nothing until the server is
/// held back (blocked writing to the proxy, the proxy's memory no longer growing).
#[test]
fn a_servers_progress_for_a_client_that_does_not_read_is_held_back_through_rmcp() {
    use std::io::{BufRead, Write};
    let dir = scratch("progress_unread", POLICY);
    std::fs::write(dir.join("flooding.py"), FLOODING).expect("server");
    let server = support::McpServer {
        name: "flooding",
        program: "python3".into(),
        args: vec![dir.join("flooding.py").display().to_string()],
        env: Vec::new(),
    };
    let (mut child, mut input, mut output) = raw_proxy(&dir, &server);
    let child = proxy_common::KillOnPanic(&mut child);
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"spam","arguments":{{"count":60000}},"_meta":{{"progressToken":"t"}}}}}}"#
    )
    .expect("write");
    let proxy = child.0.id();
    assert!(
        proxy_common::settled(proxy, || proxy_common::children(proxy)
            .into_iter()
            .any(proxy_common::blocked_writing_a_pipe)),
        "the server writing progress nobody reads was never held back"
    );
    let peak = proxy_common::peak_kib(proxy).expect("the proxy runs");
    eprintln!("the proxy's peak: {peak} KiB");
    let mut line = String::new();
    let mut progress = 0;
    loop {
        line.clear();
        assert!(output.read_line(&mut line).expect("read") > 0, "ended");
        let value: Value = serde_json::from_str(&line).expect("JSON");
        if value["method"] == "notifications/progress" {
            assert_eq!(value["params"]["progressToken"], "t");
            assert_eq!(
                value["params"]["progress"].as_f64(),
                Some(progress as f64),
                "in order"
            );
            progress += 1;
        } else if value["id"] == 1 {
            break;
        }
    }
    assert_eq!(progress, 60_000, "every progress line");
    assert!(
        peak < 120 * 1024,
        "the proxy held {peak} KiB at once for a client that does not read"
    );
}

/// A client that writes calls and does not read their answers is read no further once about
/// 8 MiB of them are in flight or waiting, through rmcp's path too (rmcp itself starts a task
/// for every request it reads, however many): 1,000 calls of 40 KB, the client reading nothing
/// until its writing has stopped (the proxy's memory no longer growing), then everything, each
/// answered.
#[test]
fn a_client_that_does_not_read_its_answers_is_read_no_further_and_gets_them_all() {
    use std::io::{BufRead, Write};
    let dir = scratch("client_unread", POLICY);
    let server = support::McpServer {
        name: "big",
        program: "python3".into(),
        args: vec![
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/python/big_server.py")
                .display()
                .to_string(),
            "--stdio".into(),
        ],
        env: Vec::new(),
    };
    let (mut child, mut input, mut output) = raw_proxy(&dir, &server);
    let mut line = String::new();

    const CALLS: usize = 1_000;
    let pad = "p".repeat(40 * 1024);
    let written = std::sync::atomic::AtomicBool::new(false);
    // How many calls the client has written so far.
    let sent = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        // Borrowed: the client's input stays open until every answer is read.
        let (written, sent, pad, input) = (&written, &sent, &pad, &mut input);
        let child = proxy_common::KillOnPanic(&mut child);
        scope.spawn(move || {
            for id in 1..=CALLS {
                let call = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"big","arguments":{{"size":40960,"pad":"{pad}"}}}}}}"#
                );
                if writeln!(input, "{call}").is_err() {
                    return;
                }
                sent.store(id, std::sync::atomic::Ordering::SeqCst);
            }
            written.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        // Until the client's writing has stopped (or it wrote everything).
        let mut last = usize::MAX;
        assert!(
            proxy_common::settled(child.0.id(), || {
                let now = sent.load(std::sync::atomic::Ordering::SeqCst);
                std::mem::replace(&mut last, now) == now
            }),
            "the client's writing never stopped"
        );
        assert!(
            !written.load(std::sync::atomic::Ordering::SeqCst),
            "the proxy read 40 MB of calls whose answers no one read"
        );
        let peak = proxy_common::peak_kib(child.0.id()).expect("the proxy runs");
        assert!(
            peak < 110 * 1024,
            "the proxy held {peak} KiB at once for a client that does not read"
        );
        let mut answered = std::collections::BTreeSet::new();
        while answered.len() < CALLS {
            line.clear();
            assert!(
                output.read_line(&mut line).expect("read") > 0,
                "the proxy ended after {} answers",
                answered.len()
            );
            let value: Value = serde_json::from_str(&line).expect("JSON");
            let id = value["id"].as_u64().expect("an answer");
            let text = value["result"]["content"][0]["text"].as_str();
            assert_eq!(text.map(str::len), Some(40960), "{line:.200}");
            assert!(answered.insert(id), "{id} answered twice");
        }
        assert!(written.load(std::sync::atomic::Ordering::SeqCst));
        let _ = child.0.kill();
    });
    let _ = child.wait();
}

/// A relay's state, set by the test ([`holding_relay`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Relay {
    /// Bytes pass both ways.
    Pass,
    /// Nothing more passes; the connections stay open.
    Hold,
    /// Every connection is closed (and one opened from then on at once).
    Cut,
}

/// A loopback TCP relay to `port`, in the state the sender sets ([`Relay`]).
async fn holding_relay(port: u16) -> (u16, tokio::sync::watch::Sender<Relay>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let relay = listener.local_addr().expect("address").port();
    let (state, watching) = tokio::sync::watch::channel(Relay::Pass);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let mut state = watching.clone();
            tokio::spawn(async move {
                if *state.borrow() == Relay::Pass
                    && let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                {
                    tokio::select! {
                        biased;
                        _ = state.wait_for(|s| *s != Relay::Pass) => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => return,
                    }
                }
                // Held until cut; both ends are closed as they are dropped.
                let _ = state.wait_for(|s| *s == Relay::Cut).await;
            });
        }
    });
    (relay, state)
}

/// A call failed by its HTTP server's end while the client is behind on its answers: the proxy
/// sees the server gone with that answer still queued behind a 1 MiB one the client has not
/// read, and it waits for the client to read both before it exits 1. (It exited once it had
/// seen the server gone, its writer's queue unwritten: the client read part of the first answer
/// and nothing of the second, and CI once saw "Transport closed" where the failed call's answer
/// should have been.) The server is reached through a relay the test cuts.
#[tokio::test(flavor = "current_thread")]
async fn a_call_its_http_servers_end_fails_is_answered_before_the_proxy_exits() {
    let dir = scratch("answered_before_exit", POLICY);
    let (_server, port) = support::python_server("big_server.py").await;
    let (relay, state) = holding_relay(port).await;
    let trail = dir.join("trail.jsonl");
    let args = relayed(&dir, &trail, relay, &[]);
    // The client blocks: it runs on a thread of its own while the relay runs here.
    let client = tokio::task::spawn_blocking(move || {
        use std::io::{BufRead, Write};
        let (mut child, mut input, mut output) = raw_client(&args, Stdio::piped());
        let child = proxy_common::KillOnPanic(&mut child);
        let stderr = child.0.stderr.take().expect("stderr");
        let (said, heard) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                eprintln!("{line}");
                let _ = said.send(line);
            }
        });
        let mut send = |line: Value| {
            writeln!(input, "{line}")
                .and_then(|()| input.flush())
                .expect("write");
        };
        let mut line = String::new();
        // An answer of 1 MiB, not read: the proxy's writer waits on the full pipe.
        send(big(1, 1 << 20));
        let pid = child.0.id();
        assert!(
            capability_testkit::wait_for(|| proxy_common::blocked_writing_a_pipe(pid)),
            "the proxy is blocked writing the first answer"
        );
        state.send_replace(Relay::Hold);
        send(big(2, 10));
        let intents = || {
            std::fs::read_to_string(&trail).map_or(0, |text| {
                proxy_common::records_in(&text)
                    .iter()
                    .filter(|r| r["phase"] == "intent")
                    .count()
            })
        };
        assert!(
            capability_testkit::wait_for(|| intents() == 2),
            "the second call is on its way to the server"
        );
        // Its connection goes: the call fails, and the proxy sees its server gone.
        state.send_replace(Relay::Cut);
        let gone = std::iter::from_fn(|| heard.recv_timeout(Duration::from_secs(30)).ok())
            .any(|line| line.contains("the MCP server is gone"));
        assert!(gone, "the proxy said its server is gone");
        let mut answers = Vec::new();
        loop {
            line.clear();
            if output.read_line(&mut line).expect("read") == 0 {
                break;
            }
            answers.push(serde_json::from_str::<Value>(&line).expect("whole JSON lines"));
        }
        let status = child.0.wait().expect("status");
        (answers, status)
    });
    let (answers, status) = client.await.expect("the client ran");
    assert_eq!(answers.len(), 2, "both answers: {answers:.300?}");
    assert_eq!(
        answers[0]["result"]["content"][0]["text"]
            .as_str()
            .map(str::len),
        Some(1 << 20),
        "the first answer whole"
    );
    assert_eq!(answers[1]["id"], 2);
    let error = answers[1]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        error.contains("the MCP server `everything` did not answer"),
        "{:?}",
        answers[1]
    );
    assert_eq!(status.code(), Some(1), "{status}");
    let outcomes: Vec<Value> = proxy_common::calls(&dir.join("trail.jsonl"))
        .iter()
        .map(|r| r["success"].clone())
        .collect();
    assert_eq!(outcomes, [json!(true), json!(false)]);
}

/// `proxy` for the role `viewer` in front of big_server.py reached through `relay`, its trail
/// at `trail`, with `extra` flags.
fn relayed(dir: &Path, trail: &Path, relay: u16, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "proxy",
        "--policy",
        &dir.join("policy.toml").display().to_string(),
        "--role",
        "viewer",
        "--server",
        "everything",
        "--trust",
        "trusted",
        "--audit",
        &trail.display().to_string(),
        "--upstream",
        &format!("http://127.0.0.1:{relay}/mcp"),
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|flag| (*flag).to_owned()));
    args
}

/// A call of big_server.py's `big` for a text of `size` bytes.
fn big(id: u32, size: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "big", "arguments": {"size": size}}})
}

/// A client that leaves with a call still waiting on its HTTP server (held by the relay): rmcp
/// gives its answers 5 s once the client's input has ended, then cancels the call, and the
/// proxy does not wait for an answer that will not come. With `--drain 30` it exits 0 well
/// before the drain, the call's intent and its failure on record.
#[tokio::test(flavor = "current_thread")]
async fn a_client_leaving_with_a_call_held_upstream_does_not_hold_the_exit_for_the_drain() {
    let dir = scratch("leaves_with_a_held_call", POLICY);
    let (_server, port) = support::python_server("big_server.py").await;
    let (relay, state) = holding_relay(port).await;
    let trail = dir.join("trail.jsonl");
    let args = relayed(&dir, &trail, relay, &["--drain", "30"]);
    let client = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let (mut child, mut input, _output) = raw_client(&args, Stdio::inherit());
        let child = proxy_common::KillOnPanic(&mut child);
        state.send_replace(Relay::Hold);
        writeln!(input, "{}", big(1, 10)).expect("write");
        let intent = || {
            std::fs::read_to_string(&trail)
                .is_ok_and(|text| proxy_common::records_in(&text).len() == 1)
        };
        assert!(
            capability_testkit::wait_for(intent),
            "the call is on its way to the server"
        );
        drop(input);
        let left = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.0.try_wait().expect("status") {
                break status;
            }
            assert!(
                left.elapsed() < Duration::from_secs(20),
                "the proxy still runs 20 s after its client left (--drain 30)"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        (status, left.elapsed(), state)
    });
    let (status, waited, _state) = client.await.expect("the client ran");
    assert_eq!(status.code(), Some(0), "{status}");
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    let records = proxy_common::records(&dir.join("trail.jsonl"));
    let phases: Vec<&Value> = records.iter().map(|r| &r["phase"]).collect();
    assert_eq!(phases, [&json!("intent"), &json!("outcome")], "{records:?}");
    assert_eq!(records[1]["success"], false, "{records:?}");
}
