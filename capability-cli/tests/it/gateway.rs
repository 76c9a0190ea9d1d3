//! `capability gateway` over real servers (the reference servers `server-memory` and
//! `server-everything`, spawned from the policy's `[servers]`, and a recorded tool list).
//!
//! `--check`: each role's view under the shown names, decided on the servers' own names; a name
//! two servers would share withheld from every role and reported (exit 1); a bad file refused
//! before anything starts (exit 2, line and column); a server that cannot start named.
//!
//! Serving, with the official TypeScript SDK client over stdio: the role's union listed under
//! the shown names, each call routed to its server under its own name and on record with that
//! server as provider, a hidden tool of one server and a made-up name refused on record and
//! never forwarded.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use proxy_common::{BIN, calls, scratch};
use support::{McpServer, TsTarget, raw_post, ts_client_lines};

fn gateway(dir: &Path, extra: &[&str]) -> Output {
    Command::new(BIN)
        .arg("gateway")
        .arg("--policy")
        .arg(dir.join("policy.toml"))
        .arg("--check")
        .args(extra)
        .env("TMPDIR", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("runs")
}

/// memory and everything, spawned; `recorded` a tool list in a file, prefix `prefix`.
fn policy(memory: &McpServer, everything: &McpServer, recorded_prefix: &str) -> String {
    format!(
        r#"version = "fleet/1"

[roles.viewer]
ceiling = "read-only"
allow = ["memory/*", "everything/*", "recorded/*"]

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]

[assertions."memory/read_graph"]
read_only = true

[servers.memory]
command = {memory_cmd}
env = {memory_env}
prefix = "mem_"

[servers.everything]
command = {everything_cmd}
trust = "trusted"
prefix = ""

[servers.recorded]
file = "recorded.json"
trust = "trusted"
prefix = "{recorded_prefix}"
"#,
        memory_cmd = memory.toml_command(),
        memory_env = memory.toml_env(),
        everything_cmd = everything.toml_command(),
    )
}

/// [`policy`] without the recorded list, which cannot be served: the two live servers.
fn live_policy(memory: &McpServer, everything: &McpServer) -> String {
    let fleet = policy(memory, everything, "rec_");
    fleet[..fleet.find("[servers.recorded]").expect("recorded entry")].to_owned()
}

fn recorded() -> Value {
    json!({"tools": [
        {"name": "echo", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}},
        {"name": "wipe", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": true}},
    ]})
}

#[test]
fn each_role_sees_its_share_of_the_fleet_under_the_shown_names() {
    let Some(servers) = support::require_servers("gateway_check_views") else {
        return;
    };
    let dir = scratch("gateway-check", "");
    let memory = servers.memory(&dir.join("memory.jsonl"));
    let everything = servers.everything();
    std::fs::write(
        dir.join("policy.toml"),
        policy(&memory, &everything, "rec_"),
    )
    .expect("policy");
    std::fs::write(dir.join("recorded.json"), recorded().to_string()).expect("recorded");

    let output = gateway(&dir, &["--json"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(report["policy_version"], "fleet/1");
    let servers: Vec<&str> = report["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .map(|s| s["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        servers,
        ["everything", "memory", "recorded"],
        "in name order"
    );
    assert_eq!(report["servers"][1]["trust"], "untrusted");
    assert_eq!(report["servers"][0]["prefix"], "");

    let role = |name: &str| {
        report["roles"]
            .as_array()
            .expect("roles")
            .iter()
            .find(|r| r["role"] == name)
            .cloned()
            .expect("role")
    };
    let shown = |role: &Value, list: &str| -> Vec<(String, String, String)> {
        role[list]
            .as_array()
            .expect("list")
            .iter()
            .map(|t| {
                (
                    t["shown"].as_str().unwrap_or_default().to_owned(),
                    t["server"].as_str().unwrap_or_default().to_owned(),
                    t["tool"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let viewer = role("viewer");
    let visible = shown(&viewer, "visible");
    // Untrusted memory: only the tool the operator vouches for; everything's read-only tools
    // under their own names; the recorded list's read-only tool under its prefix.
    assert!(
        visible.contains(&(
            "mem_read_graph".into(),
            "memory".into(),
            "read_graph".into()
        )),
        "{visible:?}"
    );
    assert!(
        !visible.iter().any(|(s, _, _)| s == "mem_create_entities"),
        "{visible:?}"
    );
    assert!(
        visible.contains(&("echo".into(), "everything".into(), "echo".into())),
        "{visible:?}"
    );
    assert!(
        visible.contains(&("rec_echo".into(), "recorded".into(), "echo".into())),
        "{visible:?}"
    );
    assert!(!visible.iter().any(|(s, _, _)| s == "rec_wipe"));
    let hidden = viewer["hidden"].as_array().expect("hidden");
    let wipe = hidden
        .iter()
        .find(|t| t["shown"] == "rec_wipe")
        .expect("listed, hidden");
    assert!(
        wipe["reasons"][0]
            .as_str()
            .unwrap_or_default()
            .contains("ceiling"),
        "{wipe}"
    );
    let operator = shown(&role("operator"), "visible");
    assert!(operator.contains(&(
        "mem_create_entities".into(),
        "memory".into(),
        "create_entities".into()
    )));
    assert!(operator.contains(&("rec_wipe".into(), "recorded".into(), "wipe".into())));
    assert_eq!(report["collisions"], json!([]));

    // The text form says the same, for people.
    let text = gateway(&dir, &["--role", "viewer"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("fleet: 3 servers"), "{text}");
    assert!(text.contains("role viewer:"), "{text}");
    assert!(
        !text.contains("role operator:"),
        "--role shows one role: {text}"
    );
    assert!(text.contains("  shown   rec_echo"), "{text}");
    assert!(text.contains("no shown name is shared"), "{text}");
}

#[test]
fn a_name_two_servers_would_share_is_withheld_and_reported() {
    let Some(servers) = support::require_servers("gateway_check_collision") else {
        return;
    };
    let dir = scratch("gateway-collision", "");
    let memory = servers.memory(&dir.join("memory.jsonl"));
    let everything = servers.everything();
    // The recorded list without a prefix: its `echo` is everything's `echo`.
    std::fs::write(dir.join("policy.toml"), policy(&memory, &everything, "")).expect("policy");
    std::fs::write(dir.join("recorded.json"), recorded().to_string()).expect("recorded");
    let output = gateway(&dir, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "findings: {stdout}");
    assert!(
        stdout.contains("  echo: everything/echo, recorded/echo"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("  shown   echo "),
        "withheld from every role: {stdout}"
    );
    assert!(stdout.contains("  hidden  echo"), "{stdout}");
    assert!(
        stdout.contains("give one of their servers another `prefix`"),
        "{stdout}"
    );
}

#[test]
fn a_bad_file_or_a_server_that_cannot_start_stops_it_before_anything_runs() {
    let dir = scratch("gateway-bad", "");
    // `--check` over `servers`: its standard error, once it has exited 2.
    let refused = |servers: &str| {
        let roles = "[roles.viewer]\nceiling = \"read-only\"\nallow = [\"*\"]\n\n";
        std::fs::write(dir.join("policy.toml"), format!("{roles}{servers}")).expect("policy");
        let output = gateway(&dir, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        stderr
    };
    let stderr = refused(
        "[servers.git]\ncommand = [\"uvx\", \"mcp-server-git\"]\nurl = \"http://127.0.0.1:1/mcp\"\n",
    );
    assert!(
        stderr.contains("policy.toml:7:7") && stderr.contains("not both"),
        "{stderr}"
    );

    let stderr = refused("[servers.ghost]\ncommand = [\"/nonexistent/mcp-server\"]\n");
    assert!(
        stderr.contains("server `ghost`") && stderr.contains("/nonexistent/mcp-server"),
        "{stderr}"
    );

    // A server that exits without answering, and one that cannot be reached: said as what
    // happened, not as rmcp prints its errors (a transport's type name, "discover response").
    let stderr = refused("[servers.mute]\ncommand = [\"sh\", \"-c\", \"echo not-mcp; exit 3\"]\n");
    assert!(
        stderr.contains(
            "server `mute`: `sh` did not connect: it exited (exit status: 3) before answering \
             the MCP handshake"
        ),
        "{stderr}"
    );
    let port = capability_testkit::free_port();
    let stderr = refused(&format!(
        "[servers.away]\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
    ));
    assert!(
        stderr.contains(&format!(
            "server `away`: http://127.0.0.1:{port}/mcp did not connect: it could not be reached"
        )) && stderr.contains("Connection refused"),
        "{stderr}"
    );
    for rmcps_words in ["discover", "rmcp::", "Transport ["] {
        assert!(!stderr.contains(rmcps_words), "{stderr}");
    }
    // One that answers the handshake and exits when asked for its tools: its exit, not the
    // closed connection ("Transport closed").
    let script = dir.join("exits_on_list.py");
    std::fs::write(
        &script,
        "import json, sys\n\
         for line in sys.stdin:\n\
         \x20   m = json.loads(line)\n\
         \x20   if m.get('method') == 'initialize':\n\
         \x20       print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {\n\
         \x20           'protocolVersion': '2025-06-18', 'capabilities': {'tools': {}},\n\
         \x20           'serverInfo': {'name': 'exits', 'version': '1'}}}), flush=True)\n\
         \x20   elif m.get('method') == 'tools/list':\n\
         \x20       sys.exit(7)\n\
         \x20   elif 'id' in m:\n\
         \x20       print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'error': {\n\
         \x20           'code': -32601, 'message': 'Method not found'}}), flush=True)\n",
    )
    .expect("script");
    let stderr = refused(&format!(
        "[servers.quits]\ncommand = [\"python3\", {:?}]\n",
        script.display().to_string()
    ));
    assert!(
        stderr
            .contains("server `quits`: `python3` exited (exit status: 7) while listing its tools"),
        "{stderr}"
    );

    let output = Command::new(BIN)
        .args(["gateway", "--policy"])
        .arg(dir.join("policy.toml"))
        .output()
        .expect("runs");
    assert_eq!(
        output.status.code(),
        Some(2),
        "neither --check nor a role and a trail"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("--role <role> --audit <trail>"));
}

#[test]
fn the_typescript_client_is_served_the_fleet_and_each_call_reaches_its_server_on_record() {
    let Some(servers) = support::require_servers("gateway_serves_the_fleet") else {
        return;
    };
    let dir = scratch("gateway-serve", "");
    let memory_file = dir.join("memory.jsonl");
    let memory = servers.memory(&memory_file);
    let everything = servers.everything();
    let served = live_policy(&memory, &everything);
    std::fs::write(dir.join("policy.toml"), served).expect("policy");
    let trail = dir.join("trail.jsonl");
    let args = proxy_common::gateway_stdio(&dir.join("policy.toml"), "viewer", &trail, &[]);
    let ops = json!([
        {"op": "list"},
        {"op": "call", "name": "mem_read_graph", "arguments": {}},
        {"op": "call", "name": "echo", "arguments": {"message": "through the gateway"}},
        {"op": "call", "name": "mem_create_entities",
         "arguments": {"entities": [{"name": "x", "entityType": "t", "observations": []}]}},
        {"op": "call", "name": "create_entities", "arguments": {}},
    ]);
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
    let listed = proxy_common::listed(&lines[1]);
    let names: Vec<&str> = listed.iter().map(String::as_str).collect();
    assert!(
        names.contains(&"mem_read_graph") && names.contains(&"echo"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"mem_create_entities"),
        "a write, hidden from a viewer: {names:?}"
    );
    assert!(
        !names.contains(&"read_graph"),
        "only shown names: {names:?}"
    );
    assert!(lines[2].get("result").is_some(), "{}", lines[2]);
    assert_eq!(
        lines[3]["result"]["content"][0]["text"], "Echo: through the gateway",
        "{}",
        lines[3]
    );
    for refused in [&lines[4], &lines[5]] {
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("refused by capability-gateway"),
            "{refused}"
        );
    }

    // A lane answers before it writes the call's outcome, so the next call's refusal may be
    // on record first: each call is on record once, in whatever order the writes landed.
    let mut on_record: Vec<(String, String, String)> = calls(&trail)
        .iter()
        .map(|r| {
            (
                r["provider"].as_str().unwrap_or("-").to_owned(),
                r["tool"].as_str().unwrap_or_default().to_owned(),
                r["verdict"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    on_record.sort();
    let mut expected: Vec<(String, String, String)> = [
        ("memory", "read_graph", "allowed"),
        ("everything", "echo", "allowed"),
        ("memory", "create_entities", "denied"),
        ("-", "create_entities", "denied"),
    ]
    .iter()
    .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
    .collect();
    expected.sort();
    assert_eq!(on_record, expected);
    let graph = std::fs::read_to_string(&memory_file).unwrap_or_default();
    assert!(
        !graph.contains("\"x\""),
        "the refused write never reached the server: {graph}"
    );
}

#[test]
fn the_typescript_clients_progress_callback_hears_a_long_call_through_the_gateway() {
    let Some(servers) = support::require_servers("gateway_passes_progress_on") else {
        return;
    };
    let dir = scratch("gateway-progress", "");
    let memory = servers.memory(&dir.join("memory.jsonl"));
    let everything = servers.everything();
    std::fs::write(dir.join("policy.toml"), live_policy(&memory, &everything)).expect("policy");
    let trail = dir.join("trail.jsonl");
    let args = proxy_common::gateway_stdio(&dir.join("policy.toml"), "viewer", &trail, &[]);
    let output = servers
        .ts_client(
            &support::long_call_with_progress("trigger-long-running-operation"),
            TsTarget::Stdio {
                program: Path::new(BIN),
                args: &args,
            },
        )
        .output()
        .expect("runs the client");
    let lines = ts_client_lines(&output).expect("the client ran");
    support::assert_heard_the_long_calls_progress(&lines[1]);
}

#[tokio::test(flavor = "current_thread")]
async fn over_http_the_typescript_clients_progress_callback_hears_a_long_call() {
    let Some(servers) = support::require_servers("gateway_http_passes_progress_on") else {
        return;
    };
    let dir = scratch("gateway-http-progress", "");
    let memory = servers.memory(&dir.join("memory.jsonl"));
    let everything = servers.everything();
    let token = "viewer-token-of-the-gateway";
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            "{}\n[bearer_tokens]\n\"sha256:{}\" = \"viewer\"\n",
            live_policy(&memory, &everything),
            capability_rules::sha256_hex(token.as_bytes())
        ),
    )
    .expect("policy");
    let trail = dir.join("trail.jsonl");
    let gateway = proxy_common::Listening::start_args(&proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &trail,
    ))
    .await;
    let output = servers
        .ts_client(
            &support::long_call_with_progress("trigger-long-running-operation"),
            TsTarget::Http {
                url: &gateway.url,
                token: Some(token),
            },
        )
        .output()
        .expect("runs the client");
    let lines = ts_client_lines(&output).expect("the client ran");
    support::assert_heard_the_long_calls_progress(&lines[1]);
    assert_eq!(gateway.stop().await.code(), Some(0));
}

#[tokio::test(flavor = "current_thread")]
async fn over_http_two_sessions_giving_the_same_progress_token_each_hear_only_their_own_call() {
    let Some(servers) = support::require_servers("gateway_http_progress_is_the_callers") else {
        return;
    };
    let dir = scratch("gateway-http-progress-sessions", "");
    let memory = servers.memory(&dir.join("memory.jsonl"));
    let everything = servers.everything();
    let token = "viewer-token-of-the-gateway";
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            "{}\n[bearer_tokens]\n\"sha256:{}\" = \"viewer\"\n",
            live_policy(&memory, &everything),
            capability_rules::sha256_hex(token.as_bytes())
        ),
    )
    .expect("policy");
    let gateway = proxy_common::Listening::start_args(&proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &dir.join("trail.jsonl"),
    ))
    .await;
    let url = gateway.url.clone();
    let post = move |session: Option<&str>, body: &Value| {
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        if let Some(id) = session {
            headers.push(("Mcp-Session-Id", id));
        }
        raw_post(&url, &headers, body)
    };
    let open = |post: &dyn Fn(Option<&str>, &Value) -> support::Raw| {
        let opened = post(
            None,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
        );
        let session = opened
            .header("mcp-session-id")
            .expect("a session")
            .to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(post(Some(&session), &initialized).status, 202);
        session
    };
    let sessions = [open(&post), open(&post)];
    // Both calls name the same token; each runs a different number of steps.
    let calls: Vec<_> = sessions
        .iter()
        .zip([3u64, 5])
        .map(|(session, steps)| {
            let (post, session) = (post.clone(), session.clone());
            std::thread::spawn(move || {
                let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "trigger-long-running-operation",
                    "arguments": {"duration": steps as f64 / 10.0, "steps": steps},
                    "_meta": {"progressToken": "the-same-token"}}});
                (steps, post(Some(&session), &call))
            })
        })
        .collect();
    for call in calls {
        let (steps, answer) = call.join().expect("the call ran");
        assert_eq!(answer.status, 200, "{answer:?}");
        let messages: Vec<Value> = answer
            .body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect();
        let progress: Vec<&Value> = messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| &m["params"])
            .collect();
        assert!(
            progress
                .iter()
                .all(|p| p["progressToken"] == "the-same-token"
                    && p["total"].as_f64() == Some(steps as f64)),
            "a session hears its own call's progress, under its own token: {progress:?}"
        );
        // rmcp writes the numbers again as floats (`1.0`): the same JSON number.
        let heard: Vec<f64> = progress
            .iter()
            .filter_map(|p| p["progress"].as_f64())
            .collect();
        let sent: Vec<f64> = (1..=steps).map(|i| i as f64).collect();
        // The last may follow the answer by a hair, after which the stream is closed.
        assert!(
            heard == sent || heard == sent[..sent.len() - 1],
            "steps {steps}: heard {heard:?}"
        );
        assert!(
            messages.iter().any(|m| m["id"] == 2
                && m["result"]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("Long running operation completed"))),
            "{messages:?}"
        );
    }
    assert_eq!(gateway.stop().await.code(), Some(0));
}

/// The drift server (`crash` exits it) and server-everything, for `role` viewer.
fn lifecycle_policy(
    drift: &McpServer,
    everything: &McpServer,
    version: &str,
    viewer_allow: &str,
) -> String {
    format!(
        r#"version = "{version}"

[roles.viewer]
ceiling = "read-only"
allow = [{viewer_allow}]

[servers.drift]
command = {drift_cmd}
trust = "trusted"
prefix = "drift_"

[servers.everything]
command = {everything_cmd}
trust = "trusted"
prefix = ""
"#,
        drift_cmd = drift.toml_command(),
        everything_cmd = everything.toml_command(),
    )
}

/// Waits (20 s at most) until the trail holds `count` reloads (`gateway/reload`, done or
/// refused): a reload is on record once it is over.
async fn until_reloads(trail: &std::path::Path, count: usize) {
    let since = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(trail).unwrap_or_default();
        let reloads = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|r| r["method"] == "gateway/reload")
            .count();
        if reloads >= count {
            assert_eq!(reloads, count, "{text}");
            return;
        }
        assert!(
            since.elapsed() < std::time::Duration::from_secs(20),
            "{count} reloads not on record: {text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_that_dies_comes_back_and_sighup_reloads_all_or_nothing() {
    use std::time::{Duration, Instant};
    let Some(servers) = support::require_servers("gateway_lifecycle") else {
        return;
    };
    let dir = scratch("gateway-lifecycle", "");
    let (drift, everything) = (servers.drift(), servers.everything());
    let write = |version: &str, allow: &str| {
        std::fs::write(
            dir.join("policy.toml"),
            lifecycle_policy(&drift, &everything, version, allow),
        )
        .expect("policy")
    };
    write("fleet/1", r#""drift/*", "everything/*""#);
    let trail = dir.join("trail.jsonl");
    let args = proxy_common::gateway_stdio(&dir.join("policy.toml"), "viewer", &trail, &[]);
    let gateway = proxy_common::Proxied::start(&args).await;
    // A client of 2026-07-28 (rmcp's typed path; the TypeScript and Python clients of the other
    // tests speak 2025-11-25 and take the forwarding lane).
    assert_eq!(
        gateway
            .client
            .peer()
            .peer_info()
            .map(|i| i.protocol_version.to_string())
            .as_deref(),
        Some("2026-07-28")
    );
    let pid = gateway.child.id().expect("running").to_string();
    let names = gateway.names().await;
    assert!(
        names.contains(&"drift_stable".to_owned()) && names.contains(&"echo".to_owned()),
        "{names:?}"
    );

    // The drift server dies during a call: that call fails saying so, the other server serves.
    let crashed = gateway
        .call("drift_crash", json!({}))
        .await
        .expect_err("the server died");
    assert!(crashed.message.contains("did not answer"), "{crashed:?}");
    gateway
        .call("echo", json!({"message": "still here"}))
        .await
        .expect("the other server serves");
    // It is started again.
    let started = Instant::now();
    loop {
        match gateway.call("drift_stable", json!({})).await {
            Ok(answer) => {
                assert!(answer.contains("stable"), "{answer}");
                break;
            }
            Err(error) if started.elapsed() < Duration::from_secs(15) => {
                assert!(error.message.contains("did not answer"), "{error:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("not back within 15 s: {error:?}"),
        }
    }

    let hup = || proxy_common::hangup(&pid);
    // A bad file: what runs keeps running.
    std::fs::write(
        dir.join("policy.toml"),
        "[roles.viewer]\nceiling = \"sometimes\"\n",
    )
    .expect("bad");
    hup();
    // Tried and refused (on record) before the next change is written.
    until_reloads(&trail, 1).await;
    assert!(
        gateway.names().await.contains(&"drift_stable".to_owned()),
        "kept"
    );
    gateway
        .call("drift_stable", json!({}))
        .await
        .expect("kept serving");

    // A good file: the viewer loses the drift server's tools, at once, under the new version.
    write("fleet/2", r#""everything/*""#);
    hup();
    let reloaded = Instant::now();
    while gateway.names().await.contains(&"drift_stable".to_owned()) {
        assert!(reloaded.elapsed() < Duration::from_secs(10), "not reloaded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = gateway
        .call("drift_stable", json!({}))
        .await
        .expect_err("no longer allowed");
    assert!(
        refused.message.contains("refused by capability-gateway"),
        "{refused:?}"
    );
    gateway
        .call("echo", json!({"message": "after"}))
        .await
        .expect("echo");
    gateway.close().await;

    let records = proxy_common::records(&trail);
    let reloads: Vec<&Value> = records
        .iter()
        .filter(|r| r["method"] == "gateway/reload")
        .collect();
    assert_eq!(reloads.len(), 2, "{reloads:#?}");
    assert_eq!(reloads[0]["reasons"][0]["reason"], "reload_refused");
    assert_eq!(
        reloads[0]["policy_version"], "fleet/1",
        "refused: the version in force"
    );
    assert!(
        reloads[0]["reasons"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("sometimes")
    );
    assert_eq!(reloads[1]["reasons"][0]["reason"], "reloaded");
    assert_eq!(reloads[1]["policy_version"], "fleet/2");
    let last_echo = records
        .iter()
        .rev()
        .find(|r| r["tool"] == "echo")
        .expect("echo on record");
    assert_eq!(
        last_echo["policy_version"], "fleet/2",
        "decided under the new policy"
    );
    let crash = records
        .iter()
        .find(|r| r["tool"] == "crash" && r["phase"] == "outcome")
        .expect("crash outcome");
    assert_eq!(crash["success"], false);
    assert_eq!(crash["provider"], "drift");
}

#[tokio::test(flavor = "current_thread")]
async fn over_http_each_token_is_served_its_roles_share_and_a_tokenless_request_gets_401() {
    let Some(servers) = support::require_servers("gateway_http") else {
        return;
    };
    let dir = scratch("gateway-http", "");
    let memory = servers.memory(&dir.join("memory.jsonl"));
    let everything = servers.everything();
    let fleet = live_policy(&memory, &everything);
    let (viewer, operator) = (
        "viewer-token-of-the-gateway",
        "operator-token-of-the-gateway",
    );
    let hash = |t: &str| capability_rules::sha256_hex(t.as_bytes());
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            "{fleet}\n[bearer_tokens]\n\"sha256:{}\" = \"viewer\"\n\"sha256:{}\" = \"operator\"\n",
            hash(viewer),
            hash(operator)
        ),
    )
    .expect("policy");
    let trail = dir.join("trail.jsonl");
    let gateway = proxy_common::Listening::start_args(&proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &trail,
    ))
    .await;
    let ops = json!([
        {"op": "list"},
        {"op": "call", "name": "mem_create_entities",
         "arguments": {"entities": [{"name": "x", "entityType": "t", "observations": []}]}},
    ]);
    let run = |token: &'static str| {
        let output = servers
            .ts_client(
                &ops,
                TsTarget::Http {
                    url: &gateway.url,
                    token: Some(token),
                },
            )
            .output()
            .expect("runs the client");
        ts_client_lines(&output).expect("the client ran")
    };
    let names = |lines: &[Value]| proxy_common::listed(&lines[1]);
    let as_viewer = run(viewer);
    assert!(
        names(&as_viewer).contains(&"mem_read_graph".to_owned()),
        "{:?}",
        names(&as_viewer)
    );
    assert!(!names(&as_viewer).contains(&"mem_create_entities".to_owned()));
    assert!(
        as_viewer[2]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("refused by capability-gateway"),
        "{}",
        as_viewer[2]
    );
    let as_operator = run(operator);
    assert!(names(&as_operator).contains(&"mem_create_entities".to_owned()));
    assert!(
        as_operator[2].get("result").is_some(),
        "the operator's write runs: {}",
        as_operator[2]
    );
    let tokenless = raw_post(
        &gateway.url,
        &[("Accept", "application/json, text/event-stream")],
        &json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}
        }),
    );
    assert_eq!(tokenless.status, 401, "{tokenless:?}");
    assert_eq!(gateway.stop().await.code(), Some(0));

    let creates: Vec<(String, String, String)> = calls(&trail)
        .iter()
        .filter(|r| r["tool"] == "create_entities")
        .map(|r| {
            (
                r["role"].as_str().unwrap_or_default().to_owned(),
                r["verdict"].as_str().unwrap_or_default().to_owned(),
                r["principal"]["sub"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        creates,
        [
            (
                "viewer".to_owned(),
                "denied".to_owned(),
                format!("token:{}", &hash(viewer)[..12])
            ),
            (
                "operator".to_owned(),
                "allowed".to_owned(),
                format!("token:{}", &hash(operator)[..12])
            ),
        ]
    );
}

/// Counts the `notifications/tools/list_changed` the gateway sends its client.
#[derive(Clone, Default)]
struct Told(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl rmcp::ClientHandler for Told {
    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_servers_list_change_is_listed_again_and_the_client_told() {
    use std::time::{Duration, Instant};
    let Some(servers) = support::require_servers("gateway_list_changed") else {
        return;
    };
    let dir = scratch("gateway-list-changed", "");
    std::fs::write(
        dir.join("policy.toml"),
        lifecycle_policy(
            &servers.drift(),
            &servers.everything(),
            "fleet/1",
            r#""drift/*""#,
        ),
    )
    .expect("policy");
    let args = proxy_common::gateway_stdio(
        &dir.join("policy.toml"),
        "viewer",
        &dir.join("trail.jsonl"),
        &[],
    );
    let told = Told::default();
    let (_child, client) = proxy_common::Proxied::spawn_for(
        &args,
        told.clone(),
        rmcp::service::ClientLifecycleMode::Initialize,
    )
    .await;
    let description = |tools: &[rmcp::model::Tool]| {
        tools
            .iter()
            .find(|t| t.name == "drift_shifty")
            .and_then(|t| t.description.as_deref().map(str::to_owned))
            .unwrap_or_default()
    };
    let before = client.peer().list_all_tools().await.expect("lists");
    assert_eq!(description(&before), "Answers shifty.");
    let mut drift = rmcp::model::CallToolRequestParams::new("drift_drift");
    drift.arguments = Some(serde_json::Map::new());
    client.peer().call_tool(drift).await.expect("drift runs");
    let started = Instant::now();
    while told.0.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the client was not told"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Listed again: shifty's new description asks for ~/.ssh/id_rsa, so the scan of tool
    // descriptors now withholds it. (The client may answer from a list it cached until it has
    // handled the notification itself, so ask until it has.)
    loop {
        let after = client.peer().list_all_tools().await.expect("lists");
        if after.iter().all(|t| t.name != "drift_shifty") {
            assert!(after.iter().any(|t| t.name == "drift_stable"), "{after:?}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not listed again: {}",
            description(&after)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "current_thread")]
async fn over_http_each_session_and_subscription_is_told_when_a_servers_tools_change() {
    use rmcp::service::ClientServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use std::time::{Duration, Instant};
    let Some(servers) = support::require_servers("gateway_http_list_changed") else {
        return;
    };
    let dir = scratch("gateway-http-list-changed", "");
    let token = "viewer-token-of-the-http-gateway";
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            "{}\n[bearer_tokens]\n\"sha256:{}\" = \"viewer\"\n",
            lifecycle_policy(
                &servers.drift(),
                &servers.everything(),
                "fleet/1",
                r#""drift/*""#,
            ),
            capability_rules::sha256_hex(token.as_bytes())
        ),
    )
    .expect("policy");
    let gateway = proxy_common::Listening::start_args(&proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &dir.join("trail.jsonl"),
    ))
    .await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let connect = |told: Told, lifecycle: rmcp::service::ClientLifecycleMode| {
        let config =
            StreamableHttpClientTransportConfig::with_uri(gateway.url.as_str()).auth_header(token);
        told.serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            lifecycle,
        )
    };
    // Two sessions (2025-11-25) and a stateless client (2026-07-28) on `subscriptions/listen`;
    // the first changes the drift server's tools, all three are told.
    let (first, second) = (Told::default(), Told::default());
    let one = connect(
        first.clone(),
        rmcp::service::ClientLifecycleMode::Initialize,
    )
    .await
    .expect("first session");
    let two = connect(
        second.clone(),
        rmcp::service::ClientLifecycleMode::Initialize,
    )
    .await
    .expect("second session");
    let modern = connect(
        Told::default(),
        rmcp::service::ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("a client of 2026-07-28");
    assert_eq!(
        modern
            .peer()
            .peer_info()
            .map(|i| i.protocol_version.to_string())
            .as_deref(),
        Some("2026-07-28")
    );
    let mut subscription = modern
        .peer()
        .listen(
            rmcp::model::SubscriptionFilter::builder()
                .tools_list_changed()
                .build(),
        )
        .await
        .expect("the gateway accepts a subscription to tool list changes");
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));
    let mut drift = rmcp::model::CallToolRequestParams::new("drift_drift");
    drift.arguments = Some(serde_json::Map::new());
    one.peer().call_tool(drift).await.expect("drift runs");
    let started = Instant::now();
    let count = |t: &Told| t.0.load(std::sync::atomic::Ordering::SeqCst);
    while count(&first) == 0 || count(&second) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not every session was told: first {}, second {}",
            count(&first),
            count(&second)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let told = tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("the subscribed client was told")
        .expect("the subscription is open");
    assert!(
        matches!(
            told,
            Some(rmcp::model::ServerNotification::ToolListChangedNotification(_))
        ),
        "{told:?}"
    );
    drop(subscription);
    // Listed again: shifty now asks for ~/.ssh/id_rsa, and the scan of tool descriptors
    // withholds it; its neighbour stays.
    let listed = two.peer().list_all_tools().await.expect("lists");
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        !names.contains(&"drift_shifty") && names.contains(&"drift_stable"),
        "listed again: {names:?}"
    );
    let _ = one.cancel().await;
    let _ = two.cancel().await;
    let _ = modern.cancel().await;
    let _ = gateway.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn over_http_sighup_reloads_the_tokens_and_limits_and_keeps_the_sessions() {
    use std::time::{Duration, Instant};
    let Some(servers) = support::require_servers("gateway_http_reload") else {
        return;
    };
    let dir = scratch("gateway-http-reload", "");
    let memory = servers.memory(&dir.join("memory.jsonl"));
    let everything = servers.everything();
    let fleet = live_policy(&memory, &everything);
    let (leaked, kept, new) = ("a-token-that-leaked", "a-token-that-stays", "a-new-token");
    let hash = |t: &str| capability_rules::sha256_hex(t.as_bytes());
    let write = |tokens: &[(&str, &str)], http: &str| {
        let table: String = tokens
            .iter()
            .map(|(token, role)| format!("\"sha256:{}\" = \"{role}\"\n", hash(token)))
            .collect();
        std::fs::write(
            dir.join("policy.toml"),
            format!("{fleet}\n[bearer_tokens]\n{table}\n[http]\n{http}\n"),
        )
        .expect("policy");
    };
    write(&[(leaked, "viewer"), (kept, "operator")], "");
    let trail = dir.join("trail.jsonl");
    let gateway = proxy_common::Listening::start_args(&proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &trail,
    ))
    .await;
    let pid = gateway.child.id().expect("a pid").to_string();
    let hup = || proxy_common::hangup(&pid);
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}
    });
    let post = |token: &str, session: Option<&str>, body: &Value| {
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        if let Some(id) = session {
            headers.push(("Mcp-Session-Id", id));
        }
        raw_post(&gateway.url, &headers, body)
    };
    assert_eq!(post(leaked, None, &initialize).status, 200);
    let opened = post(kept, None, &initialize);
    let session = opened
        .header("mcp-session-id")
        .expect("a session")
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(kept, Some(&session), &initialized).status, 202);

    // The leaked token taken out, a new one added, a body limit lowered: at the next SIGHUP.
    write(
        &[(kept, "operator"), (new, "viewer")],
        "max_body_bytes = 2000",
    );
    hup();
    let reloaded = Instant::now();
    while post(leaked, None, &initialize).status != 401 {
        assert!(
            reloaded.elapsed() < Duration::from_secs(10),
            "the leaked token still passes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        post(new, None, &initialize).status,
        200,
        "the new token passes"
    );
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let listed = post(kept, Some(&session), &list);
    assert_eq!(
        listed.status, 200,
        "the session opened before is kept: {listed:?}"
    );
    assert!(
        listed.body.contains("mem_create_entities"),
        "{}",
        listed.body
    );
    let big = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "x".repeat(3000)}}});
    assert_eq!(
        post(kept, Some(&session), &big).status,
        413,
        "the new body limit holds"
    );

    // An [auth] whose issuer cannot be reached: refused, what runs keeps running.
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            "{fleet}\n[auth]\nissuer = \"http://127.0.0.1:9\"\naudience = \"{}\"\n",
            gateway.url
        ),
    )
    .expect("policy");
    hup();
    let refused_at = Instant::now();
    loop {
        let reloads = proxy_common::records(&trail)
            .into_iter()
            .filter(|r| r["method"] == "gateway/reload")
            .count();
        if reloads == 2 {
            break;
        }
        assert!(
            refused_at.elapsed() < Duration::from_secs(20),
            "the second reload was not recorded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(post(new, None, &initialize).status, 200, "kept serving");
    assert_eq!(gateway.stop().await.code(), Some(0));
    let reasons: Vec<String> = proxy_common::records(&trail)
        .iter()
        .filter(|r| r["method"] == "gateway/reload")
        .map(|r| {
            r["reasons"][0]["reason"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(reasons, ["reloaded", "reload_refused"]);
}

#[tokio::test(flavor = "current_thread")]
async fn with_watch_a_change_of_the_file_reloads_and_a_bad_change_is_refused_once() {
    use std::time::{Duration, Instant};
    let Some(servers) = support::require_servers("gateway_watch") else {
        return;
    };
    let dir = scratch("gateway-watch", "");
    let (drift, everything) = (servers.drift(), servers.everything());
    // Each version whole at once (as editors save): a watcher that looked between a truncation
    // and the write after it would see an empty policy, and rightly refuse it.
    let write = |text: String| {
        std::fs::write(dir.join("policy.toml.new"), text).expect("policy");
        std::fs::rename(dir.join("policy.toml.new"), dir.join("policy.toml")).expect("policy");
    };
    write(lifecycle_policy(
        &drift,
        &everything,
        "watch/1",
        r#""drift/*", "everything/*""#,
    ));
    let trail = dir.join("trail.jsonl");
    let args =
        proxy_common::gateway_stdio(&dir.join("policy.toml"), "viewer", &trail, &["--watch"]);
    let gateway = proxy_common::Proxied::start(&args).await;
    assert!(gateway.names().await.contains(&"drift_stable".to_owned()));

    // No signal: the file changes, and the viewer loses the drift server's tools.
    write(lifecycle_policy(
        &drift,
        &everything,
        "watch/2",
        r#""everything/*""#,
    ));
    let changed = Instant::now();
    while gateway.names().await.contains(&"drift_stable".to_owned()) {
        assert!(changed.elapsed() < Duration::from_secs(10), "not reloaded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A bad change: refused, once (not at every look), and what runs keeps running.
    write("[roles.viewer]\nceiling = \"sometimes\"\n".to_owned());
    // Settled for a second, then read and refused; then not tried again at the watcher's next
    // looks (one every 200 ms): three of them.
    until_reloads(&trail, 2).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    gateway
        .call("echo", json!({"message": "still"}))
        .await
        .expect("kept serving");
    gateway.close().await;
    let reloads: Vec<(String, String)> = proxy_common::records(&trail)
        .iter()
        .filter(|r| r["method"] == "gateway/reload")
        .map(|r| {
            (
                r["reasons"][0]["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                r["policy_version"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        reloads,
        [
            ("reloaded".to_owned(), "watch/2".to_owned()),
            ("reload_refused".to_owned(), "watch/2".to_owned()),
        ]
    );
}

/// A policy rewritten in place in two writes, its `deny` line in the second, 600 ms apart:
/// `--watch` never applies the first half (it parses, and would allow the denied tool). Every
/// call of the denied tool made between the writes is refused, and the file is reloaded once,
/// whole.
#[tokio::test(flavor = "current_thread")]
async fn with_watch_a_file_written_in_two_parts_is_never_applied_half_written() {
    use std::io::Write as _;
    use std::time::{Duration, Instant};
    let Some(servers) = support::require_servers("gateway_watch_half") else {
        return;
    };
    let dir = scratch("gateway-watch-half", "");
    let everything = servers.everything();
    let policy = |version: &str| {
        format!(
            "version = \"{version}\"\n\n[servers.everything]\ncommand = {}\ntrust = \"trusted\"\n\
             prefix = \"\"\n\n[roles.operator]\nceiling = \"unrestricted\"\n\
             allow = [\"everything/*\"]\ndeny = [\"everything/echo\"]\n",
            everything.toml_command()
        )
    };
    std::fs::write(dir.join("policy.toml"), policy("half/1")).expect("policy");
    let trail = dir.join("trail.jsonl");
    let args =
        proxy_common::gateway_stdio(&dir.join("policy.toml"), "operator", &trail, &["--watch"]);
    let gateway = proxy_common::Proxied::start(&args).await;
    let echo = || gateway.call("echo", json!({"message": "must not run"}));
    assert!(echo().await.is_err(), "echo is denied");

    // In place: truncated, the part before `deny`, 600 ms of calls, then the rest.
    let next = policy("half/2");
    let (first, rest) = next.split_at(next.find("deny").expect("a deny line"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(dir.join("policy.toml"))
        .expect("open");
    file.write_all(first.as_bytes()).expect("first part");
    file.flush().expect("flush");
    let written = Instant::now();
    while written.elapsed() < Duration::from_millis(600) {
        assert!(echo().await.is_err(), "echo ran between the two writes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    file.write_all(rest.as_bytes()).expect("the rest");
    drop(file);
    let reloaded = |records: &[Value]| {
        records
            .iter()
            .filter(|r| r["method"] == "gateway/reload")
            .map(|r| {
                (
                    r["reasons"][0]["reason"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    r["policy_version"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while reloaded(&proxy_common::records(&trail)).is_empty() {
        assert!(Instant::now() < deadline, "the whole file is reloaded");
        assert!(echo().await.is_err(), "echo is denied");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        echo().await.is_err(),
        "echo is denied under the new file too"
    );
    gateway.close().await;
    let records = proxy_common::records(&trail);
    assert_eq!(
        reloaded(&records),
        [("reloaded".to_owned(), "half/2".to_owned())]
    );
    let ran: Vec<&Value> = records
        .iter()
        .filter(|r| r["tool"] == "echo" && r["verdict"] == "allowed")
        .collect();
    assert!(ran.is_empty(), "{ran:?}");
}
