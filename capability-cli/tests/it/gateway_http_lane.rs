//! The gateway's HTTP lane (`gateway/fast/front.rs`, `gateway/reach.rs`): a `tools/call` of a
//! client over Streamable HTTP to a server reached over Streamable HTTP, taken below rmcp's
//! typed model. Driven from outside with raw HTTP requests and the official TypeScript SDK
//! client, against a Python server that says what it was sent and misbehaves on purpose
//! (`tests/python/lane_server.py`) and one that answers past the bound (`big_server.py`).

use crate::proxy_common;
use crate::support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use capability::rmcp::REFUSED_CODE;
use serde_json::{Value, json};

use proxy_common::{Listening, scratch, verifies};
use support::{Raw, TsTarget, raw_post};

const VIEW_TOKEN: &str = "lane-view-token";
const NARROW_TOKEN: &str = "lane-narrow-token";

/// The Python server `script` on a free port, named `name` in the policy of a gateway
/// `--listen` in front of it (tools unprefixed): role
/// `viewer` (read-only, every tool) for [`VIEW_TOKEN`], role `narrow` (only `said`) for
/// [`NARROW_TOKEN`].
/// `extra` ends the policy. Returns the server's process, the scratch directory `dir` (the
/// policy, the trail at `trail.jsonl`) and the gateway.
async fn fleet_of(
    script: &str,
    dir: &str,
    name: &str,
    extra: &str,
) -> (tokio::process::Child, PathBuf, Listening) {
    let (server, port) = support::python_server(script).await;
    let dir = scratch(dir, "");
    let gateway = gateway_over(&dir, name, port, extra).await;
    (server, dir, gateway)
}

/// A gateway `--listen` (the policy of [`fleet_of`]) in front of the server `name` at `port`.
async fn gateway_over(dir: &Path, name: &str, port: u16, extra: &str) -> Listening {
    let policy = format!(
        r#"version = "lane-1"
[roles.viewer]
ceiling = "read-only"
allow = ["*"]
[roles.narrow]
ceiling = "read-only"
allow = ["{name}/said"]
[bearer_tokens]
"sha256:{view}" = "viewer"
"sha256:{narrow}" = "narrow"
[servers.{name}]
url = "http://127.0.0.1:{port}/mcp"
trust = "trusted"
prefix = ""
{extra}
"#,
        view = capability_rules::sha256_hex(VIEW_TOKEN.as_bytes()),
        narrow = capability_rules::sha256_hex(NARROW_TOKEN.as_bytes()),
    );
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    Listening::start_args(&proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &dir.join("trail.jsonl"),
    ))
    .await
}

/// A raw client's session with the gateway at `url`, for `token`.
struct Session {
    url: String,
    token: &'static str,
    id: String,
}

impl Session {
    fn open(url: &str, token: &'static str) -> Session {
        let opened = raw_post(
            url,
            &[("Authorization", &format!("Bearer {token}"))],
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
        );
        let id = opened
            .header("mcp-session-id")
            .unwrap_or_else(|| panic!("a session: {opened:?}"))
            .to_owned();
        let session = Session {
            url: url.to_owned(),
            token,
            id,
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(session.post(&initialized).status, 202);
        session
    }

    fn headers(&self, version: &str) -> Vec<(String, String)> {
        vec![
            ("Authorization".into(), format!("Bearer {}", self.token)),
            ("Mcp-Session-Id".into(), self.id.clone()),
            ("MCP-Protocol-Version".into(), version.into()),
        ]
    }

    fn post_as(&self, version: &str, body: &Value) -> Raw {
        let headers = self.headers(version);
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        raw_post(&self.url, &headers, body)
    }

    fn post(&self, body: &Value) -> Raw {
        self.post_as("2025-11-25", body)
    }

    fn call(&self, id: u64, tool: &str, arguments: Value) -> Raw {
        self.post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}))
    }
}

/// The one JSON-RPC message of a JSON answer.
fn json_answer(raw: &Raw) -> Value {
    assert_eq!(raw.status, 200, "{raw:?}");
    assert_eq!(
        raw.header("content-type"),
        Some("application/json"),
        "{raw:?}"
    );
    serde_json::from_str(&raw.body).unwrap_or_else(|e| panic!("{e}: {raw:?}"))
}

/// The messages of an event stream's body, in order.
fn events(raw: &Raw) -> Vec<Value> {
    assert_eq!(raw.status, 200, "{raw:?}");
    let mut messages = Vec::new();
    let mut data = String::new();
    for line in raw.body.lines() {
        if let Some(more) = line.strip_prefix("data:") {
            data.push_str(more.strip_prefix(' ').unwrap_or(more));
            data.push('\n');
        } else if line.is_empty() && !data.trim().is_empty() {
            messages.push(serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}")));
            data.clear();
        } else if line.is_empty() {
            data.clear();
        }
    }
    messages
}

/// The JSON in a result's first text.
fn text_of(answer: &Value) -> Value {
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {answer}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The call records of `trail` for `tool`: (phase, success, error).
fn recorded(trail: &Path, tool: &str) -> Vec<Value> {
    proxy_common::records(trail)
        .into_iter()
        .filter(|r| r["tool"] == tool)
        .collect()
}

/// Waits up to 20 s for `ready` on the trail's records.
fn wait_for(trail: &Path, what: &str, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let records = proxy_common::records(trail);
        if ready(&records) {
            return records;
        }
        assert!(
            Instant::now() < deadline,
            "waited 20 s for {what}: {records:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A call is sent on the session of the server's own connection, under the lane's id, with
/// the revision agreed and the arguments and `_meta` as the client wrote them; the client gets
/// the server's result as one JSON body under its own id (as an event stream when it asked for
/// progress); intent and outcome are on record and the trail verifies. A call naming another
/// revision than the server's goes through rmcp as before.
#[tokio::test(flavor = "current_thread")]
async fn a_call_goes_on_the_servers_session_and_is_answered_as_json() {
    let (_server, dir, gateway) = fleet_of("lane_server.py", "lane-said", "lane", "").await;
    let url = gateway.url.clone();
    tokio::task::spawn_blocking(move || {
        let session = Session::open(&url, VIEW_TOKEN);
        let answer = json_answer(&session.post(&json!({"jsonrpc": "2.0", "id": "mine-7",
            "method": "tools/call", "params": {"name": "said", "arguments": {"x": [1, 2]},
            "_meta": {"note": "kept"}}})));
        assert_eq!(answer["id"], "mine-7", "{answer}");
        let said = text_of(&answer);
        assert!(
            said["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("capability-gateway/")),
            "{said}"
        );
        assert_eq!(said["session"], "lane-session-1", "{said}");
        assert_eq!(said["version"], "2025-11-25", "{said}");
        assert_eq!(said["arguments"], json!({"x": [1, 2]}), "{said}");
        assert_eq!(said["meta"]["note"], "kept", "{said}");

        // With a progress token: an event stream, the call still on the lane.
        let streamed = session.post(&json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
            "params": {"name": "said", "arguments": {}, "_meta": {"progressToken": "p-1"}}}));
        assert_eq!(
            streamed.header("content-type"),
            Some("text/event-stream"),
            "{streamed:?}"
        );
        let answer = events(&streamed).pop().expect("an answer");
        assert_eq!(answer["id"], 8, "{answer}");
        let said = text_of(&answer);
        assert!(
            said["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("capability-gateway/")),
            "{said}"
        );
        assert_eq!(said["meta"]["progressToken"], "p-1", "{said}");

        // rmcp's path, for a revision other than the server's: rmcp's own numbered id.
        let other = session.post_as(
            "2025-06-18",
            &json!({"jsonrpc": "2.0", "id": 9,
            "method": "tools/call", "params": {"name": "said", "arguments": {}}}),
        );
        assert_eq!(
            other.header("content-type"),
            Some("text/event-stream"),
            "{other:?}"
        );
        let answer = events(&other)
            .into_iter()
            .find(|m| m["id"] == 9)
            .unwrap_or_else(|| panic!("an answer: {other:?}"));
        assert!(text_of(&answer)["id"].is_number(), "{answer}");
    })
    .await
    .expect("the client ran");
    let trail = dir.join("trail.jsonl");
    let said = recorded(&trail, "said");
    assert_eq!(
        said.len(),
        6,
        "three calls, each an intent and an outcome: {said:#?}"
    );
    assert!(said.iter().all(|r| r["provider"] == "lane"), "{said:#?}");
    assert_eq!(gateway.stop().await.code(), Some(0));
    verifies(&trail);
}

/// The official TypeScript SDK client calls through the lane and reads its JSON answer.
#[tokio::test(flavor = "current_thread")]
async fn the_typescript_client_calls_through_the_lane() {
    let Some(servers) = support::require_servers("the_typescript_client_calls_through_the_lane")
    else {
        return;
    };
    let (_server, dir, gateway) = fleet_of("lane_server.py", "lane-ts", "lane", "").await;
    let output = servers
        .ts_client(
            &json!([{"op": "call", "name": "said", "arguments": {"from": "ts"}},
                    {"op": "call", "name": "twice", "arguments": {}}]),
            TsTarget::Http {
                url: &gateway.url,
                token: Some(VIEW_TOKEN),
            },
        )
        .output()
        .expect("runs the client");
    let lines = support::ts_client_lines(&output).expect("the client ran");
    let said = serde_json::from_str::<Value>(
        lines[1]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{lines:?}")),
    )
    .expect("JSON");
    assert!(
        said["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("capability-gateway/")),
        "{said}"
    );
    assert_eq!(said["arguments"], json!({"from": "ts"}));
    let twice = &lines[2]["error"];
    assert!(
        twice["message"]
            .as_str()
            .is_some_and(|m| m.contains("writes a key twice")),
        "{lines:?}"
    );
    assert_eq!(gateway.stop().await.code(), Some(0));
    verifies(&dir.join("trail.jsonl"));
}

/// A result that writes a key twice fails the call (the outcome says so), as does a failed
/// request (with the server's JSON-RPC error when it gave one, else its status); a role not
/// allowed the tool is refused on record and the server never hears of the call; a server's
/// request on the call's stream is answered (over HTTP the gateway refuses it: no one client
/// can be asked) and the call completes.
#[tokio::test(flavor = "current_thread")]
async fn a_hostile_servers_answers_and_a_refused_call_never_reach_the_client_or_the_server() {
    let (_server, dir, gateway) = fleet_of("lane_server.py", "lane-hostile", "lane", "").await;
    let url = gateway.url.clone();
    tokio::task::spawn_blocking(move || {
        let viewer = Session::open(&url, VIEW_TOKEN);
        let twice = json_answer(&viewer.call(2, "twice", json!({})));
        assert_eq!(twice["error"]["code"], -32603, "{twice}");
        assert!(
            twice["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("writes a key twice") && m.contains("isError")),
            "{twice}"
        );
        let rejected = json_answer(&viewer.call(7, "rejected", json!({})));
        assert_eq!(
            rejected["error"]["message"], "rejected: bad arguments",
            "the server's own error, from its 400: {rejected}"
        );
        let broken = json_answer(&viewer.call(8, "broken", json!({})));
        assert!(
            broken["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("`lane` did not answer: HTTP 500")),
            "{broken}"
        );
        let narrow = Session::open(&url, NARROW_TOKEN);
        let refused = json_answer(&narrow.call(3, "ask", json!({})));
        assert_eq!(refused["error"]["code"], REFUSED_CODE, "{refused}");
        let unknown = json_answer(&narrow.call(4, "no_such_tool", json!({})));
        assert_eq!(unknown["error"]["code"], REFUSED_CODE, "{unknown}");
        let calls = text_of(&json_answer(&narrow.call(5, "said", json!({}))))["calls"].clone();
        assert_eq!(
            calls["ask"],
            Value::Null,
            "the refused call reached the server: {calls}"
        );

        let asked = json_answer(&viewer.call(6, "ask", json!({})));
        let answer = text_of(&asked);
        assert!(
            answer["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("roots-")),
            "the server's request was answered under its id: {answer}"
        );
        assert!(answer["error"]["message"].is_string(), "{answer}");
    })
    .await
    .expect("the client ran");
    let trail = dir.join("trail.jsonl");
    let twice = recorded(&trail, "twice");
    assert_eq!(twice.len(), 2, "{twice:#?}");
    assert_eq!(twice[1]["success"], false, "{twice:#?}");
    let asked = proxy_common::records(&trail)
        .into_iter()
        .filter(|r| r["method"] == "roots/list")
        .collect::<Vec<_>>();
    assert_eq!(
        asked.len(),
        1,
        "the server's request is on record: {asked:#?}"
    );
    assert_eq!(asked[0]["verdict"], "denied", "{asked:#?}");
    let ask = recorded(&trail, "ask");
    assert_ne!(ask[0]["verdict"], "allowed", "{ask:#?}");
    assert_eq!(ask.last().expect("recorded")["success"], true, "{ask:#?}");
    assert_eq!(gateway.stop().await.code(), Some(0));
    verifies(&trail);
}

/// A server that answers a call under `application/json` with several JSON texts one after
/// another (a notification, then the answer, as the conformance project's reference server
/// does) is read message by message, as an event stream is: the call gets its answer. Text
/// between them that is not JSON fails the call, saying so, and nothing of it reaches the
/// client.
#[tokio::test(flavor = "current_thread")]
async fn a_json_answer_of_several_json_texts_is_read_one_message_at_a_time() {
    let (_server, dir, gateway) = fleet_of("lane_server.py", "lane-lines", "lane", "").await;
    let url = gateway.url.clone();
    tokio::task::spawn_blocking(move || {
        let viewer = Session::open(&url, VIEW_TOKEN);
        let lined = json_answer(&viewer.call(2, "lines", json!({})));
        assert_eq!(lined["id"], 2, "{lined}");
        assert_eq!(lined["result"]["content"][0]["text"], "lined", "{lined}");
        let broken = json_answer(&viewer.call(3, "lines_broken", json!({})));
        assert_eq!(broken["id"], 3, "{broken}");
        assert!(
            broken["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("`lane` did not answer: its answer is not JSON")),
            "{broken}"
        );
    })
    .await
    .expect("the client ran");
    let trail = dir.join("trail.jsonl");
    let lines = recorded(&trail, "lines");
    assert_eq!(
        lines.last().expect("recorded")["success"],
        true,
        "{lines:#?}"
    );
    let broken = recorded(&trail, "lines_broken");
    assert_eq!(
        broken.last().expect("recorded")["success"],
        false,
        "{broken:#?}"
    );
    assert_eq!(gateway.stop().await.code(), Some(0));
    verifies(&trail);
}

/// A client's `notifications/cancelled` stops its call: the server is told under the lane's
/// id, the client's request ends without an answer, and the record says cancelled. A client
/// that goes away mid-call cancels nothing: the call ends at the server and its outcome is
/// recorded.
#[tokio::test(flavor = "current_thread")]
async fn a_cancelled_call_tells_the_server_and_a_client_gone_loses_no_outcome() {
    let (_server, dir, gateway) = fleet_of("lane_server.py", "lane-cancel", "lane", "").await;
    let url = gateway.url.clone();
    let trail = dir.join("trail.jsonl");
    let in_trail = trail.clone();
    tokio::task::spawn_blocking(move || {
        let session = std::sync::Arc::new(Session::open(&url, VIEW_TOKEN));
        let calling = session.clone();
        let slow = std::thread::spawn(move || calling.call(9, "slow", json!({})));
        wait_for(&in_trail, "the slow call's intent", |r| {
            r.iter().any(|r| r["tool"] == "slow")
        });
        let cancel = session.post(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 9, "reason": "changed my mind"}}),
        );
        assert_eq!(cancel.status, 202, "{cancel:?}");
        let slow = slow.join().expect("the call returned");
        assert_eq!(slow.status, 200, "{slow:?}");
        assert!(
            !slow.body.contains("\"result\""),
            "a cancelled call has no answer: {slow:?}"
        );
        let told = text_of(&json_answer(&session.call(10, "cancelled", json!({}))));
        assert!(
            told.as_array().is_some_and(|ids| ids.iter().any(|id| id
                .as_str()
                .is_some_and(|id| id.starts_with("capability-gateway/")))),
            "the server was told: {told}"
        );

        // A client that leaves as soon as its call is sent.
        let rest = url.strip_prefix("http://").expect("http");
        let (authority, path) = rest.split_once('/').expect("a path");
        let body = json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
            "params": {"name": "wait", "arguments": {"seconds": 1}}})
        .to_string();
        let mut stream = std::net::TcpStream::connect(authority).expect("connects");
        let head = format!(
            "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nAuthorization: Bearer {VIEW_TOKEN}\r\n\
             Mcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n",
            session.id,
            body.len()
        );
        stream.write_all(head.as_bytes()).expect("writes");
        stream.write_all(body.as_bytes()).expect("writes");
        wait_for(&in_trail, "the waiting call's intent", |r| {
            r.iter().any(|r| r["tool"] == "wait")
        });
        drop(stream);
        let records = wait_for(&in_trail, "the waiting call's outcome", |r| {
            r.iter().filter(|r| r["tool"] == "wait").count() == 2
        });
        let outcome = records
            .iter()
            .rfind(|r| r["tool"] == "wait")
            .expect("recorded");
        assert_eq!(outcome["success"], true, "{outcome}");
    })
    .await
    .expect("the client ran");
    let slow = recorded(&trail, "slow");
    assert_eq!(slow.len(), 2, "{slow:#?}");
    assert_eq!(slow[1]["success"], false, "{slow:#?}");
    assert!(
        slow[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("cancel")),
        "{slow:#?}"
    );
    assert_eq!(gateway.stop().await.code(), Some(0));
    verifies(&trail);
}

/// Through the lane as through rmcp, a server may answer with at most 64 MiB: one of 100 MiB,
/// as a JSON body with or without its length or as one event of a stream, fails the call
/// naming the bound, is not held, and the next call is served.
#[tokio::test(flavor = "current_thread")]
async fn an_answer_past_the_bound_fails_the_call_on_the_lane_and_is_not_held() {
    let (_server, dir, gateway) = fleet_of("big_server.py", "lane-big", "big", "").await;
    let pid = gateway.child.id().expect("runs");
    let url = gateway.url.clone();
    tokio::task::spawn_blocking(move || {
        let session = Session::open(&url, VIEW_TOKEN);
        for shape in ["json", "chunked", "sse"] {
            let failed = json_answer(&session.call(
                2,
                "big",
                json!({"size": 100 * 1024 * 1024, "as": shape}),
            ));
            let message = failed["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("`big` did not answer") && message.contains("67108864 bytes"),
                "{shape}: {failed}"
            );
            let after = json_answer(&session.call(3, "big", json!({"size": 10, "as": shape})));
            assert_eq!(
                after["result"]["content"][0]["text"].as_str().map(str::len),
                Some(10),
                "{shape}: {after}"
            );
        }
    })
    .await
    .expect("the client ran");
    let peak = proxy_common::peak_kib(pid).expect("runs");
    assert!(peak < 250 * 1024, "the gateway held {peak} KiB at once");
    assert_eq!(gateway.stop().await.code(), Some(0));
    verifies(&dir.join("trail.jsonl"));
}

/// A session whose client only calls tools (each answered on the lane, which rmcp does not
/// see) stays open while it calls, past its idle limit; left idle past the limit, it is closed.
#[tokio::test(flavor = "current_thread")]
async fn a_session_that_only_calls_on_the_lane_stays_open_until_it_is_idle() {
    let (_server, dir, gateway) = fleet_of(
        "lane_server.py",
        "lane-idle",
        "lane",
        "[http]\nsession_idle_secs = 2\n",
    )
    .await;
    let url = gateway.url.clone();
    tokio::task::spawn_blocking(move || {
        let session = Session::open(&url, VIEW_TOKEN);
        let start = Instant::now();
        let mut last = start;
        let mut n = 2;
        // Calls for 3 s, past the idle limit (2 s), every 200 ms: open throughout.
        while start.elapsed() < Duration::from_secs(3) {
            last = Instant::now();
            let answer = json_answer(&session.call(n, "said", json!({})));
            assert!(
                text_of(&answer)["id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("capability-gateway/")),
                "after {:?}: {answer}",
                start.elapsed()
            );
            n += 1;
            std::thread::sleep(Duration::from_millis(200));
        }
        // Then left idle: closed once the limit has passed since its last call. Another
        // principal naming the session does not touch it (403 while it lives, 404 once it is
        // gone): it is awaited that way, not slept for.
        let other = Session {
            url: url.clone(),
            token: NARROW_TOKEN,
            id: session.id.clone(),
        };
        let mut m = 1_000;
        let closed = capability_testkit::wait_for(|| {
            m += 1;
            let status = other.call(m, "said", json!({})).status;
            assert!(status == 403 || status == 404, "{status}");
            status == 404
        });
        assert!(closed, "not closed within 10 s of its idle limit");
        assert!(
            last.elapsed() > Duration::from_secs(2),
            "closed {:?} after its last call, before its idle limit",
            last.elapsed()
        );
        let idle = session.call(n, "said", json!({}));
        assert_eq!(idle.status, 404, "{idle:?}");
    })
    .await
    .expect("the client ran");
    assert_eq!(gateway.stop().await.code(), Some(0));
    verifies(&dir.join("trail.jsonl"));
}

/// A call that asks for progress hears, on its event stream, the server's progress for its
/// token (in order, a notification written over two lines as well) and nothing for another
/// token, then its answer.
#[tokio::test(flavor = "current_thread")]
async fn a_call_hears_its_own_progress_on_the_lane_before_its_answer() {
    let (_server, dir, gateway) = fleet_of("lane_server.py", "lane-progress", "lane", "").await;
    let url = gateway.url.clone();
    tokio::task::spawn_blocking(move || {
        let session = Session::open(&url, VIEW_TOKEN);
        let raw = session.post(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "progress", "arguments": {}, "_meta": {"progressToken": 77}}}));
        assert_eq!(
            raw.header("content-type"),
            Some("text/event-stream"),
            "{raw:?}"
        );
        let messages = events(&raw);
        let heard: Vec<&Value> = messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| &m["params"])
            .collect();
        assert_eq!(
            heard,
            [
                &json!({"progressToken": 77, "progress": 1, "total": 2}),
                &json!({"progressToken": 77, "progress": 2, "total": 2})
            ],
            "{messages:?}"
        );
        let last = messages.last().expect("messages");
        assert_eq!(last["id"], 4, "{messages:?}");
        assert_eq!(last["result"]["content"][0]["text"], "done", "{messages:?}");
    })
    .await
    .expect("the client ran");
    assert_eq!(gateway.stop().await.code(), Some(0));
    verifies(&dir.join("trail.jsonl"));
}

/// The official TypeScript SDK client's `onprogress` hears a long call of the reference
/// `server-everything`, itself served over Streamable HTTP behind the gateway. (That a call with
/// a progress token takes the lane is shown by
/// `a_call_goes_on_the_servers_session_and_is_answered_as_json`, with a server that says what it
/// received; this test shows that a real client and server agree with the lane.)
#[tokio::test(flavor = "current_thread")]
async fn the_typescript_client_hears_the_progress_of_server_everything_over_http() {
    let Some(servers) =
        support::require_servers("the_typescript_client_hears_the_progress_of_server_everything")
    else {
        return;
    };
    let port = capability_testkit::free_port();
    let _upstream = support::everything_over_http(&servers.everything(), port).await;
    let dir = scratch("lane-everything", "");
    let gateway = gateway_over(&dir, "everything", port, "").await;
    let output = servers
        .ts_client(
            &support::long_call_with_progress("trigger-long-running-operation"),
            TsTarget::Http {
                url: &gateway.url,
                token: Some(VIEW_TOKEN),
            },
        )
        .output()
        .expect("runs the client");
    let lines = support::ts_client_lines(&output).expect("the client ran");
    support::assert_heard_the_long_calls_progress(&lines[1]);
    assert_eq!(gateway.stop().await.code(), Some(0));
    let calls = recorded(&dir.join("trail.jsonl"), "trigger-long-running-operation");
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert_eq!(calls[1]["success"], true, "{calls:#?}");
    verifies(&dir.join("trail.jsonl"));
}
