//! A server of 2026-07-28 that answers a call with several JSON texts in one `application/json`
//! body, one per line (a progress notification, then the result), as the MCP conformance
//! project's reference server does: through `capability gateway --listen`, the call that rmcp's
//! client makes for the gateway gets its result, and the progress reaches the client that
//! asked for it. rmcp's own client reads such a body as one message ("trailing characters")
//! and failed the call. The bounds still hold: a body of several texts longer than
//! `--max-message` fails the call and the next is served; a body that is not JSON fails the
//! call as rmcp would. Each failure has the gateway connect to the server again; the server
//! lists its tools slowly when it is connected to again, so the calls made meanwhile are
//! served on the connection being replaced (and one failing there does not take the new one
//! for gone): the test waits for the gateway to say the server is back before the next.
//!
//! The server is bytes written on a loopback socket, with no HTTP library between the test and
//! the gateway.

#![cfg(unix)]

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::proxy_common;
use crate::support::{Raw, raw_post};
use capability_testkit::servers::read_request;

const TOKEN: &str = "json-texts-token";

/// The tools of the server, all read-only.
fn tools() -> Value {
    let tool = |name: &str| {
        json!({"name": name, "inputSchema": {"type": "object"},
               "annotations": {"readOnlyHint": true}})
    };
    json!([
        tool("progress"),
        tool("huge"),
        tool("not_json"),
        tool("resumed"),
        tool("one")
    ])
}

/// A complete result (2026-07-28 says which kind a result is).
fn result(id: &Value, mut result: Value) -> String {
    result["resultType"] = json!("complete");
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

fn text(id: &Value, text: &str) -> String {
    result(id, json!({"content": [{"type": "text", "text": text}]}))
}

fn discover(id: &Value) -> String {
    result(
        id,
        json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
               "ttlMs": 0, "cacheScope": "public",
               "_meta": {"io.modelcontextprotocol/serverInfo":
                         {"name": "json-texts", "version": "1"}}}),
    )
}

/// What the server saw: how many times it was discovered, the call it answers on a resumed
/// stream, and the `Last-Event-ID` of each stream resumed.
#[derive(Default)]
struct Seen {
    discovered: AtomicUsize,
    pending: Mutex<Option<Value>>,
    resumed: Mutex<Vec<String>>,
}

const JSON: &str = "application/json";
const EVENTS: &str = "text/event-stream";

/// The content type and body a request of the server is answered with.
fn answer(request: &Value, seen: &Seen) -> (&'static str, String) {
    let id = &request["id"];
    if request["params"]["name"] == "resumed" {
        // A priming event (an id, no data) and the end of the stream: the client resumes it.
        *seen.pending.lock().expect("pending") = Some(id.clone());
        return (EVENTS, "id: e1\nretry: 50\ndata:\n\n".to_owned());
    }
    let body = match request["method"].as_str().unwrap_or_default() {
        "server/discover" => {
            seen.discovered.fetch_add(1, Ordering::SeqCst);
            discover(id)
        }
        // A session of 2025-11-25 too, as the reference server keeps one.
        "initialize" => result(
            id,
            json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                   "serverInfo": {"name": "json-texts", "version": "1"}}),
        ),
        "tools/list" => {
            // Listed again after a reconnection: slowly, so that calls come while the gateway
            // still serves on the connection it is replacing.
            if seen.discovered.load(Ordering::SeqCst) > 1 {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            result(
                id,
                json!({"tools": tools(), "ttlMs": 0, "cacheScope": "public"}),
            )
        }
        "tools/call" => {
            let params = &request["params"];
            let token = &params["_meta"]["progressToken"];
            let progress = |message: &str| {
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": token, "progress": 1, "total": 2,
                                  "message": message}})
                .to_string()
            };
            match params["name"].as_str().unwrap_or_default() {
                // Two texts, one per line, the result last.
                "progress" => format!("{}\n{}\n", progress("half way"), text(id, "done")),
                // Each text within the gateway's bound of 64 KiB, the two past it.
                "huge" => {
                    let pad = "p".repeat(40 * 1024);
                    format!("{}\n{}\n", progress(&pad), text(id, &pad))
                }
                "not_json" => format!("{}\nnot JSON\n", text(id, "lost")),
                _ => text(id, "one"),
            }
        }
        _ => json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "Method not found"}})
        .to_string(),
    };
    (JSON, body)
}

/// A GET: the resumed stream of the call pending, after the event it names; else 405.
fn resume(last_event_id: Option<String>, seen: &Seen) -> Option<(&'static str, String)> {
    let last = last_event_id?;
    let id = seen.pending.lock().expect("pending").take()?;
    seen.resumed.lock().expect("resumed").push(last);
    Some((
        EVENTS,
        format!("id: e2\ndata: {}\n\n", text(&id, "resumed")),
    ))
}

/// Reads one request and answers it; `Connection: close` after each.
fn serve(stream: TcpStream, seen: &Seen) -> Option<()> {
    let mut writer = stream.try_clone().ok()?;
    let request = read_request(&mut BufReader::new(stream))?;
    let (request_line, body) = (&request.line, &request.body);
    let last_event_id = request.header("last-event-id").map(str::to_owned);
    let head = |status: &str, kind: &str, length: usize| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {length}\r\n\
             Connection: close\r\n\r\n"
        )
    };
    let answer = if request_line.starts_with("GET ") {
        match resume(last_event_id, seen) {
            Some((kind, body)) => head("200 OK", kind, body.len()) + &body,
            None => head("405 Method Not Allowed", "text/plain", 0),
        }
    } else if !request_line.starts_with("POST ") {
        head("405 Method Not Allowed", "text/plain", 0)
    } else {
        let request: Value = serde_json::from_slice(body).ok()?;
        if request.get("id").is_none() {
            head("202 Accepted", "text/plain", 0)
        } else {
            let (kind, body) = answer(&request, seen);
            head("200 OK", kind, body.len()) + &body
        }
    };
    writer.write_all(answer.as_bytes()).ok()
}

/// The server on a free loopback port: its URL, and what it saw.
fn server() -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let seen = Arc::new(Seen::default());
    let kept = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let kept = kept.clone();
            std::thread::spawn(move || serve(stream, &kept));
        }
    });
    (url, seen)
}

/// `tools/call` of `tool`, as a client of 2026-07-28 naming `progress_token` if any.
fn call(url: &str, id: u64, tool: &str, progress_token: Option<&str>) -> Raw {
    let bearer = format!("Bearer {TOKEN}");
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    });
    if let Some(token) = progress_token {
        meta["progressToken"] = json!(token);
    }
    raw_post(
        url,
        &[
            ("Authorization", bearer.as_str()),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": {}, "_meta": meta}}),
    )
}

/// Every JSON-RPC message of an answer: a JSON body, or the data of each event of a stream.
fn messages(raw: &Raw) -> Vec<Value> {
    let body = raw.body.trim();
    if body.starts_with('{') {
        return vec![serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {raw:?}"))];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {raw:?}")))
        .collect()
}

/// The answer to the call `id` among `raw`'s messages.
fn answer_to(raw: &Raw, id: u64) -> Value {
    messages(raw)
        .into_iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id}: {raw:?}"))
}

/// A gateway `--listen` with `--max-message 64KiB` in front of the server at `url` (role
/// `viewer` for [`TOKEN`]), its scratch directory named `name`.
async fn gateway_over(url: &str, name: &str) -> (std::path::PathBuf, proxy_common::Listening) {
    let policy = format!(
        r#"version = "json-texts-1"
[roles.viewer]
ceiling = "read-only"
allow = ["*"]
[bearer_tokens]
"sha256:{hash}" = "viewer"
[servers.texts]
url = "{url}"
trust = "trusted"
prefix = ""
"#,
        hash = capability_rules::sha256_hex(TOKEN.as_bytes()),
    );
    let dir = proxy_common::scratch(name, &policy);
    let mut args = proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &dir.join("trail.jsonl"),
    );
    args.extend(["--max-message".into(), "64KiB".into()]);
    (dir, proxy_common::Listening::start_args(&args).await)
}

/// A client of 2025-11-25: its session at `front`, then `tools/call` of `tool` naming the
/// progress token `tok`.
fn call_in_a_session(front: &str, tool: &str) -> Raw {
    let bearer = format!("Bearer {TOKEN}");
    let opened = raw_post(
        front,
        &[("Authorization", bearer.as_str())],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    let session = opened
        .header("mcp-session-id")
        .unwrap_or_else(|| panic!("a session: {opened:?}"))
        .to_owned();
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(raw_post(front, &headers, &initialized).status, 202);
    raw_post(
        front,
        &headers,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": tool, "arguments": {}, "_meta": {"progressToken": "tok"}}}),
    )
}

/// What a restart of the server is judged against: the discoveries the server has seen and
/// the times the gateway has said it is back, before the call that fails.
type Before = (usize, usize);

const BACK: &str = "server `texts` is back";

fn before(seen: &Seen, said: &Said) -> Before {
    (
        seen.discovered.load(Ordering::SeqCst),
        proxy_common::lines_saying(said, BACK),
    )
}

/// The gateway's standard error so far ([`proxy_common::Listening::said`]).
type Said = Arc<Mutex<Vec<String>>>;

/// Whether, within 10 s, the gateway connected to the server again (it discovered it more
/// times than `before`), swapped the new connection in (it said the server is back: until
/// then calls are still served on the old one, and one that fails there is that
/// connection's), and a call of `one` is answered.
fn served_again(front: &str, seen: &Seen, said: &Said, before: Before) -> bool {
    capability_testkit::wait_for(|| seen.discovered.load(Ordering::SeqCst) > before.0)
        && capability_testkit::wait_for(|| proxy_common::lines_saying(said, BACK) > before.1)
        && capability_testkit::wait_for(|| {
            let one = answer_to(&call(front, 9, "one", None), 9);
            one["result"]["content"][0]["text"] == "one"
        })
}

#[tokio::test(flavor = "current_thread")]
async fn a_json_answer_of_several_json_texts_reaches_the_client_through_rmcps_client() {
    let (url, seen) = server();
    let (dir, gateway) = gateway_over(&url, "gateway-json-texts").await;
    let front = gateway.url.clone();
    let said = gateway.said.clone();

    tokio::task::spawn_blocking(move || {
        // The result answers the call; the progress before it reaches the client that named a
        // token, under that token.
        let answered = call(&front, 1, "progress", Some("tok-1"));
        assert_eq!(answered.status, 200, "{answered:?}");
        let result = answer_to(&answered, 1);
        assert_eq!(
            result["result"]["content"][0]["text"], "done",
            "{answered:?}"
        );
        let progress: Vec<Value> = messages(&answered)
            .into_iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(progress.len(), 1, "{answered:?}");
        assert_eq!(progress[0]["params"]["progressToken"], "tok-1");
        assert_eq!(progress[0]["params"]["message"], "half way");
        // Without a token, the result alone.
        let quiet = call(&front, 2, "progress", None);
        assert_eq!(
            answer_to(&quiet, 2)["result"]["content"][0]["text"],
            "done",
            "{quiet:?}"
        );

        // Several texts longer than the bound in all fail the call, which is not held. (A
        // failed POST has the gateway take the server for gone and connect again, as with
        // rmcp's own client: the next call is served once it has.)
        let restart = before(&seen, &said);
        let huge = answer_to(&call(&front, 3, "huge", Some("tok-3")), 3);
        let why = huge["error"]["message"].as_str().unwrap_or_default();
        assert!(
            why.contains("exceeded the maximum size of 65536 bytes"),
            "{huge}"
        );
        assert!(
            served_again(&front, &seen, &said, restart),
            "a call is served after the one past the bound"
        );
        let restart = before(&seen, &said);
        // A body that is not JSON throughout fails the call as rmcp's client fails it.
        let broken = answer_to(&call(&front, 4, "not_json", None), 4);
        let why = broken["error"]["message"].as_str().unwrap_or_default();
        assert!(
            why.contains("could not parse JSON response as ServerJsonRpcMessage"),
            "{broken}"
        );
        assert!(
            served_again(&front, &seen, &said, restart),
            "a call is served after the one not JSON"
        );
    })
    .await
    .expect("the client ran");

    let outcomes: Vec<(String, bool)> = proxy_common::calls(&dir.join("trail.jsonl"))
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap_or_default().to_owned(),
                r["success"] == true,
            )
        })
        .filter(|(tool, ok)| tool != "one" || *ok)
        .collect();
    let expected = [
        ("progress", true),
        ("progress", true),
        ("huge", false),
        ("one", true),
        ("not_json", false),
        ("one", true),
    ]
    .map(|(tool, ok)| (tool.to_owned(), ok));
    assert_eq!(outcomes, expected, "every call on record");
    assert_eq!(gateway.stop().await.code(), Some(0));
    proxy_common::verifies(&dir.join("trail.jsonl"));
}

/// The same through the server's session of 2025-11-25, which the gateway keeps for a client
/// of that revision.
#[tokio::test(flavor = "current_thread")]
async fn a_2025_11_25_client_gets_the_result_and_the_progress_too() {
    let (url, _) = server();
    let (dir, gateway) = gateway_over(&url, "gateway-json-texts-session").await;
    let front = gateway.url.clone();
    let answered = tokio::task::spawn_blocking(move || call_in_a_session(&front, "progress"))
        .await
        .expect("the client ran");
    let result = answer_to(&answered, 2);
    assert_eq!(
        result["result"]["content"][0]["text"], "done",
        "{answered:?}"
    );
    let progress: Vec<Value> = messages(&answered)
        .into_iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 1, "{answered:?}");
    assert_eq!(progress[0]["params"]["progressToken"], "tok");
    assert_eq!(gateway.stop().await.code(), Some(0));
    let calls = proxy_common::calls(&dir.join("trail.jsonl"));
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["success"], true, "{calls:?}");
}

/// A request's event stream keeps its event ids: one that ends after a priming event (an id,
/// no data) is resumed by rmcp's client from that id, and the call is answered on the resumed
/// stream.
#[tokio::test(flavor = "current_thread")]
async fn a_calls_stream_that_ends_early_is_resumed_from_its_last_event_id() {
    let (url, seen) = server();
    let (_dir, gateway) = gateway_over(&url, "gateway-json-texts-resumed").await;
    let front = gateway.url.clone();
    let answered = tokio::task::spawn_blocking(move || call(&front, 1, "resumed", None))
        .await
        .expect("the client ran");
    let result = answer_to(&answered, 1);
    assert_eq!(
        result["result"]["content"][0]["text"], "resumed",
        "{answered:?}"
    );
    assert_eq!(*seen.resumed.lock().expect("resumed"), ["e1"]);
    assert_eq!(gateway.stop().await.code(), Some(0));
}
