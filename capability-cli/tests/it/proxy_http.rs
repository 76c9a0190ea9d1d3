//! `capability proxy` over Streamable HTTP (issue 14): `--listen` with roles from the policy's
//! `[bearer_tokens]`, rmcp's client and the official TypeScript SDK client over HTTP, the
//! reference memory server behind it; and `--upstream <url>`, server-everything serving
//! Streamable HTTP behind the proxy, a stdio client in front.

use crate::proxy_common;
use crate::support;

use std::process::Stdio;
use std::time::Duration;

use capability::rmcp::REFUSED_CODE;
use rmcp::model::{CallToolRequestParams, ClientConfig, ServerNotification, SubscriptionFilter};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceError};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use proxy_common::{
    BIN, Listening, Proxied, http_client, listed, scratch, summary, triple, verifies,
};
use support::TsTarget;

const VIEW_TOKEN: &str = "view-token-1";
const OP_TOKEN: &str = "op-token-2";

/// `printf %s view-token-1 | sha256sum`, `printf %s op-token-2 | sha256sum`.
const POLICY: &str = r#"
version = "2026-11"

[roles.viewer]
ceiling = "read-only"
allow = ["*"]

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]

# The memory server is untrusted; its operator vouches for reading the graph.
[assertions."memory/read_graph"]
read_only = true
destructive = false
open_world = false

[bearer_tokens]
"sha256:09e9d7f8abc7fb4c5166489d546ce2d6917ea129392001c9c940fdfc99dacbf0" = "viewer"
"sha256:0600f62603764be3a117c63d3d006b57b2d28e32179766cb5720be552484604b" = "operator"
"#;

async fn names(client: &RunningService<RoleClient, ClientConfig>) -> Vec<String> {
    let tools = client.peer().list_tools(None).await.expect("lists");
    tools.tools.iter().map(|t| t.name.to_string()).collect()
}

async fn call(
    client: &RunningService<RoleClient, ClientConfig>,
    tool: &str,
    arguments: Value,
) -> Result<String, rmcp::ErrorData> {
    let mut request = CallToolRequestParams::new(tool.to_owned());
    request.arguments = arguments.as_object().cloned();
    match client.peer().call_tool(request).await {
        Ok(result) => Ok(serde_json::to_string(&result).expect("JSON")),
        Err(ServiceError::McpError(error)) => Err(error),
        Err(other) => panic!("`{tool}`: {other}"),
    }
}

fn reason_tags(error: &rmcp::ErrorData) -> Vec<String> {
    error.data.as_ref().expect("refusal data")["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .map(|r| r["reason"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn entity(name: &str) -> Value {
    json!({"entities": [{"name": name, "entityType": "test", "observations": ["x"]}]})
}

#[tokio::test(flavor = "current_thread")]
async fn rmcp_clients_over_http_get_the_role_of_their_bearer_token() {
    let servers = require_servers!("rmcp_clients_over_http_get_the_role_of_their_bearer_token");
    let dir = scratch("http_rmcp", POLICY);
    let memory = servers.memory(&dir.join("memory.jsonl"));
    let trail = dir.join("trail.jsonl");
    let proxy = Listening::start(&dir, &trail, &memory).await;
    assert!(proxy.url.starts_with("http://127.0.0.1:") && proxy.url.ends_with("/mcp"));

    let viewer = http_client(&proxy.url, Some(VIEW_TOKEN)).await;
    let operator = http_client(&proxy.url, Some(OP_TOKEN)).await;

    // The viewer sees only what the assertion vouches for; the operator sees every tool.
    assert_eq!(names(&viewer).await, ["read_graph"]);
    let everything = names(&operator).await;
    assert!(everything.len() > 1 && everything.contains(&"create_entities".to_owned()));
    // Without a token, or with an unknown one: a 401 before anything else, for the handshake
    // and for a call; the call is on record.
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let read = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "read_graph", "arguments": {}}});
    for token in [None, Some("Bearer not-a-known-token")] {
        let headers: Vec<(&str, &str)> = token.iter().map(|t| ("Authorization", *t)).collect();
        for body in [&initialize, &read] {
            let answer = support::raw_post(&proxy.url, &headers, body);
            assert_eq!(answer.status, 401, "{token:?}: {answer:?}");
            assert!(
                answer.header("mcp-session-id").is_none(),
                "no session for a stranger"
            );
        }
    }

    // The viewer's write is refused with reasons and never reaches the server.
    let refused = call(&viewer, "create_entities", entity("from-viewer"))
        .await
        .expect_err("a write: refused");
    assert_eq!(refused.code.0, REFUSED_CODE);
    assert!(
        reason_tags(&refused).contains(&"ceiling_exceeded".to_owned()),
        "{refused:?}"
    );
    let graph = call(&operator, "read_graph", json!({}))
        .await
        .expect("read");
    assert!(
        !graph.contains("from-viewer"),
        "the refused write happened: {graph}"
    );

    // The operator's write goes through, and the viewer reads it.
    call(&operator, "create_entities", entity("from-operator"))
        .await
        .expect("the operator may write");
    let graph = call(&viewer, "read_graph", json!({})).await.expect("read");
    assert!(graph.contains("from-operator"), "{graph}");

    for client in [viewer, operator] {
        let _ = client.cancel().await;
    }
    assert!(proxy.stop().await.success(), "SIGTERM: exit 0");
    assert_eq!(
        summary(&trail),
        [
            triple("(none)", "read_graph", "denied"),
            triple("(none)", "read_graph", "denied"),
            triple("viewer", "create_entities", "denied"),
            triple("operator", "read_graph", "allowed"),
            triple("operator", "create_entities", "allowed"),
            triple("viewer", "read_graph", "allowed"),
        ]
    );
    verifies(&trail);
}

#[tokio::test(flavor = "current_thread")]
async fn the_typescript_clients_progress_callback_hears_a_long_call_over_http() {
    let servers =
        require_servers!("the_typescript_clients_progress_callback_hears_a_long_call_over_http");
    let dir = scratch("http_progress", POLICY);
    let everything = servers.everything();
    let trail = dir.join("trail.jsonl");
    let proxy = Listening::start_as(&dir, &trail, "everything", &[], &everything).await;
    let output = servers
        .ts_client(
            &support::long_call_with_progress("trigger-long-running-operation"),
            TsTarget::Http {
                url: &proxy.url,
                token: Some(OP_TOKEN),
            },
        )
        .output()
        .expect("run the TypeScript client");
    let lines = support::ts_client_lines(&output).expect("the client ran");
    support::assert_heard_the_long_calls_progress(&lines[1]);
}

#[tokio::test(flavor = "current_thread")]
async fn the_typescript_client_over_http_lists_and_calls_by_its_token() {
    let servers = require_servers!("the_typescript_client_over_http_lists_and_calls_by_its_token");
    let dir = scratch("http_ts", POLICY);
    let memory = servers.memory(&dir.join("memory.jsonl"));
    let trail = dir.join("trail.jsonl");
    let proxy = Listening::start(&dir, &trail, &memory).await;
    let run = |ops: Value, token: Option<&str>| {
        let output = servers
            .ts_client(
                &ops,
                TsTarget::Http {
                    url: &proxy.url,
                    token,
                },
            )
            .output()
            .expect("run the TypeScript client");
        support::ts_client_lines(&output).expect("the client ran")
    };
    let ops = json!([
        {"op": "list"},
        {"op": "call", "name": "create_entities", "arguments": entity("from-ts")},
        {"op": "call", "name": "read_graph", "arguments": {}},
    ]);

    let viewer = run(ops.clone(), Some(VIEW_TOKEN));
    assert_eq!(listed(&viewer[1]), ["read_graph"]);
    assert_eq!(viewer[2]["error"]["code"], REFUSED_CODE, "{}", viewer[2]);
    assert!(
        !viewer[3]["result"].to_string().contains("from-ts"),
        "{}",
        viewer[3]
    );

    let operator = run(ops.clone(), Some(OP_TOKEN));
    assert!(listed(&operator[1]).contains(&"create_entities".to_owned()));
    assert!(operator[2].get("error").is_none(), "{}", operator[2]);
    assert!(
        operator[3]["result"].to_string().contains("from-ts"),
        "{}",
        operator[3]
    );

    // Without a token, the SDK's client is refused at its first request with a 401.
    let nobody = servers
        .ts_client(
            &ops,
            TsTarget::Http {
                url: &proxy.url,
                token: None,
            },
        )
        .output()
        .expect("run the TypeScript client");
    assert!(!nobody.status.success());
    let said = String::from_utf8_lossy(&nobody.stdout);
    assert!(
        said.contains(r#""op":"connect""#) && said.contains(r#""code":401"#),
        "{said}"
    );

    assert!(proxy.stop().await.success());
    assert_eq!(
        summary(&trail),
        [
            triple("viewer", "create_entities", "denied"),
            triple("viewer", "read_graph", "allowed"),
            triple("operator", "create_entities", "allowed"),
            triple("operator", "read_graph", "allowed"),
        ]
    );
    verifies(&trail);
}

/// `capability proxy` for a viewer, of server-everything at `url`, audited to `trail`.
fn viewer_over(dir: &std::path::Path, trail: &std::path::Path, url: String) -> Vec<String> {
    let path = |path: &std::path::Path| path.display().to_string();
    vec![
        "proxy".into(),
        "--policy".into(),
        path(&dir.join("policy.toml")),
        "--role".into(),
        "viewer".into(),
        "--server".into(),
        "everything".into(),
        "--trust".into(),
        "trusted".into(),
        "--audit".into(),
        path(trail),
        "--upstream".into(),
        url,
    ]
}

#[tokio::test(flavor = "current_thread")]
async fn a_streamable_http_upstream_behind_the_proxy() {
    let servers = require_servers!("a_streamable_http_upstream_behind_the_proxy");
    let everything = servers.everything();
    let port = capability_testkit::free_port();
    let mut upstream = support::everything_over_http(&everything, port).await;

    let dir = scratch("http_upstream", POLICY);
    let trail = dir.join("trail.jsonl");
    let args = viewer_over(&dir, &trail, format!("http://127.0.0.1:{port}/mcp"));
    let viewer = Proxied::start(&args).await;
    let shown = viewer.names().await;
    assert!(shown.contains(&"echo".to_owned()), "{shown:?}");
    assert!(
        !shown.contains(&"toggle-simulated-logging".to_owned()),
        "{shown:?}"
    );
    let echoed = viewer
        .call("echo", json!({"message": "over http upstream"}))
        .await
        .expect("echo is read-only");
    assert!(echoed.contains("over http upstream"), "{echoed}");
    let refused = viewer
        .call("toggle-simulated-logging", json!({}))
        .await
        .expect_err("not read-only: refused");
    assert_eq!(refused.code.0, REFUSED_CODE);

    // The upstream goes away: a call gets an error saying so (not a refusal), and the proxy
    // exits 1 after closing the trail, as when a spawned server exits.
    let _ = upstream.kill().await;
    let _ = upstream.wait().await;
    let failed = viewer
        .call("echo", json!({"message": "anyone?"}))
        .await
        .expect_err("nobody answers");
    failed_and_exited(&failed, "the connection to http://127.0.0.1:", viewer.child).await;
    assert_eq!(
        summary(&trail),
        [
            triple("viewer", "echo", "allowed"),
            triple("viewer", "toggle-simulated-logging", "denied"),
            triple("viewer", "echo", "allowed"),
        ]
    );
    let last = &proxy_common::calls(&trail)[2];
    assert_eq!(last["success"], false, "{last}");
    verifies(&trail);
}

/// The proxy's call `failed` (not refused) says that `everything` did not answer and `why`,
/// and the proxy (`child`) then exits 1, its server gone.
async fn failed_and_exited(failed: &rmcp::ErrorData, why: &str, mut child: tokio::process::Child) {
    assert_ne!(failed.code.0, REFUSED_CODE, "{failed:?}");
    assert!(
        failed.message.contains("`everything` did not answer") && failed.message.contains(why),
        "{failed:?}"
    );
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("the proxy exits once its server is gone")
        .expect("status");
    assert_eq!(status.code(), Some(1), "{status:?}");
}

/// A loopback TCP relay to `port` that counts the connections it accepts.
async fn counting_relay(port: u16) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let relay = listener.local_addr().expect("address").port();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (relay, accepted)
}

/// Through the proxy's `--upstream` and a gateway's `url` server alike, calls share a kept-alive
/// connection to the server (rmcp's own client would open one a request: 20 calls, 20 more
/// connections).
#[tokio::test(flavor = "current_thread")]
async fn calls_to_an_http_server_reuse_one_connection() {
    use std::sync::atomic::Ordering;
    let servers = require_servers!("calls_to_an_http_server_reuse_one_connection");
    let everything = servers.everything();
    let port = capability_testkit::free_port();
    let _upstream = support::everything_over_http(&everything, port).await;
    let dir = scratch("http_pooled", POLICY);
    let proxy_via = counting_relay(port).await;
    let gateway_via = counting_relay(port).await;
    let url = |relay: u16| format!("http://127.0.0.1:{relay}/mcp");
    std::fs::write(
        dir.join("fleet.toml"),
        format!(
            "{POLICY}\n[servers.everything]\nurl = {:?}\ntrust = \"trusted\"\nprefix = \"\"\n",
            url(gateway_via.0)
        ),
    )
    .expect("fleet");
    let proxy = viewer_over(&dir, &dir.join("proxy.jsonl"), url(proxy_via.0));
    let gateway = proxy_common::gateway_stdio(
        &dir.join("fleet.toml"),
        "viewer",
        &dir.join("gateway.jsonl"),
        &[],
    );
    for (args, (_, accepted)) in [(proxy, &proxy_via), (gateway, &gateway_via)] {
        let client = Proxied::start(&args).await;
        let connected = accepted.load(Ordering::SeqCst);
        for n in 0..20 {
            let echoed = client
                .call("echo", json!({"message": format!("call {n}")}))
                .await
                .expect("echo is read-only");
            assert!(echoed.contains(&format!("call {n}")), "{echoed}");
        }
        let opened = accepted.load(Ordering::SeqCst) - connected;
        assert!(
            opened <= 1,
            "`capability {}`: 20 calls opened {opened} more connections to the server \
             ({connected} at the start)",
            args[0]
        );
    }
}

/// rmcp's client, told of list changes.
struct Watching {
    changed: std::sync::Arc<tokio::sync::Notify>,
}

impl rmcp::ClientHandler for Watching {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            rmcp::model::ClientCapabilities::default(),
            rmcp::model::Implementation::new("watching", "0"),
        )
    }

    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }
}

#[tokio::test(flavor = "current_thread")]
async fn every_http_client_is_told_when_the_server_tools_change() {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};

    let servers = require_servers!("every_http_client_is_told_when_the_server_tools_change");
    let dir = scratch("http_drift", POLICY);
    let drift = servers.drift();
    let trail = dir.join("trail.jsonl");
    let proxy = Listening::start_as(&dir, &trail, "drift", &["--trust", "trusted"], &drift).await;
    let _ = rustls::crypto::ring::default_provider().install_default();

    // One client of each protocol revision, both viewers: the first in a session, told on
    // it; the second stateless, told on its `subscriptions/listen`.
    let connect = |lifecycle: ClientLifecycleMode| {
        let changed = std::sync::Arc::new(tokio::sync::Notify::new());
        let config = StreamableHttpClientTransportConfig::with_uri(proxy.url.as_str())
            .auth_header(VIEW_TOKEN);
        let watching = Watching {
            changed: changed.clone(),
        };
        async move {
            let client = watching
                .serve_with_lifecycle(
                    StreamableHttpClientTransport::from_config(config),
                    lifecycle,
                )
                .await
                .expect("connects");
            let shown = client.peer().list_tools(None).await.expect("lists");
            assert!(shown.tools.iter().any(|t| t.name == "shifty"));
            (client, changed)
        }
    };
    let (legacy, legacy_changed) = connect(ClientLifecycleMode::Initialize).await;
    let (modern, _) = connect(ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    })
    .await;
    let version = |client: &RunningService<RoleClient, Watching>| {
        client
            .peer()
            .peer_info()
            .map(|i| i.protocol_version.to_string())
    };
    assert_eq!(version(&legacy).as_deref(), Some("2025-11-25"));
    assert_eq!(version(&modern).as_deref(), Some("2026-07-28"));
    let mut subscription = modern
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("the proxy accepts a subscription to tool list changes");
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));

    legacy
        .peer()
        .call_tool(CallToolRequestParams::new("drift"))
        .await
        .expect("drift runs");
    tokio::time::timeout(Duration::from_secs(15), legacy_changed.notified())
        .await
        .expect("the session's client was told");
    let told = tokio::time::timeout(Duration::from_secs(15), subscription.next())
        .await
        .expect("the subscribed client was told")
        .expect("the subscription is open");
    assert!(
        matches!(
            told,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{told:?}"
    );
    drop(subscription);
    for client in [legacy, modern] {
        let _ = client.cancel().await;
    }
    assert!(proxy.stop().await.success());
}

#[tokio::test(flavor = "current_thread")]
async fn the_server_crashing_ends_the_http_proxy_with_an_error_after_the_trail() {
    let servers =
        require_servers!("the_server_crashing_ends_the_http_proxy_with_an_error_after_the_trail");
    let dir = scratch("http_crash", POLICY);
    let trail = dir.join("trail.jsonl");
    let mut proxy = Listening::start_as(
        &dir,
        &trail,
        "drift",
        &["--trust", "trusted"],
        &servers.drift(),
    )
    .await;
    let viewer = http_client(&proxy.url, Some(VIEW_TOKEN)).await;
    assert_eq!(
        call(&viewer, "stable", json!({}))
            .await
            .ok()
            .map(|s| s.contains("stable")),
        Some(true)
    );
    let crashed = call(&viewer, "crash", json!({}))
        .await
        .expect_err("the server died instead of answering");
    assert_ne!(crashed.code.0, REFUSED_CODE, "{crashed:?}");
    assert!(crashed.message.contains("exit status: 3"), "{crashed:?}");
    let status = tokio::time::timeout(Duration::from_secs(15), proxy.child.wait())
        .await
        .expect("the proxy exits once the server is gone")
        .expect("status");
    assert_eq!(status.code(), Some(1), "{status:?}");
    assert_eq!(
        summary(&trail),
        [
            triple("viewer", "stable", "allowed"),
            triple("viewer", "crash", "allowed"),
        ]
    );
    verifies(&trail);
}

#[tokio::test(flavor = "current_thread")]
async fn listening_beyond_loopback_is_allowed_with_a_warning() {
    let servers = require_servers!("listening_beyond_loopback_is_allowed_with_a_warning");
    let dir = scratch("http_any", POLICY);
    let trail = dir.join("trail.jsonl");
    let mut command = tokio::process::Command::new(BIN);
    command
        .arg("proxy")
        .arg("--policy")
        .arg(dir.join("policy.toml"))
        .args([
            "--server",
            "drift",
            "--trust",
            "trusted",
            "--listen",
            "0.0.0.0:0",
        ])
        .arg("--audit")
        .arg(&trail)
        .arg("--")
        .arg(&servers.drift().program)
        .args(&servers.drift().args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("spawn the proxy");
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let mut seen = Vec::new();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push(line.clone());
            if let Some((_, url)) = line.split_once("listening on http://") {
                return format!("http://{}", url.trim());
            }
        }
        panic!("the proxy ended without listening: {seen:?}");
    })
    .await
    .expect("listens");
    assert!(
        seen.iter()
            .any(|l| l.contains("warning") && l.contains("not a loopback")),
        "{seen:?}"
    );
    // Reachable through the loopback address, whatever Host it is called by.
    let port = url
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches("/mcp").parse::<u16>().ok());
    let port = port.expect("a port in the URL");
    let viewer = http_client(&format!("http://127.0.0.1:{port}/mcp"), Some(VIEW_TOKEN)).await;
    assert!(names(&viewer).await.contains(&"stable".to_owned()));
    let _ = viewer.cancel().await;
    let _ = child.kill().await;
}

/// A call through `client`, failing the test rather than waiting past a minute.
async fn within_a_minute(client: &Proxied, arguments: Value) -> Result<String, rmcp::ErrorData> {
    tokio::time::timeout(Duration::from_secs(60), client.call("big", arguments))
        .await
        .expect("an answer within a minute")
}

/// The length of a call result's text.
fn text_len(answer: &str) -> usize {
    let value: Value = serde_json::from_str(answer).expect("JSON");
    value["content"][0]["text"].as_str().map_or(0, str::len)
}

/// A message may hold 64 MiB over HTTP as over stdio, through rmcp's path too (rmcp's own
/// bound is 16 MiB, and over stdio it drops a longer line without answering): a call of
/// 20 MiB and results of 20 MiB from a server over HTTP and over stdio pass through the proxy;
/// a result of 100 MiB fails the call naming the bound, and the proxy exits 1, as when a
/// server's output is cut off over stdio.
#[tokio::test(flavor = "current_thread")]
async fn messages_of_20_mib_pass_through_the_proxy_and_100_mib_from_an_http_server_end_it() {
    let (_server, port) = support::python_server("big_server.py").await;
    let dir = scratch("http_big_proxy", POLICY);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/python/big_server.py")
        .display()
        .to_string();
    let mut over_stdio = viewer_over(&dir, &dir.join("stdio.jsonl"), String::new());
    over_stdio.truncate(over_stdio.len() - 2);
    over_stdio.extend(["--".into(), "python3".into(), script, "--stdio".into()]);
    let over_http = viewer_over(
        &dir,
        &dir.join("http.jsonl"),
        format!("http://127.0.0.1:{port}/mcp"),
    );
    let pad = "p".repeat(20 * 1024 * 1024);
    for args in [&over_stdio, &over_http] {
        let client = Proxied::start(args).await;
        let within = within_a_minute(&client, json!({"size": 20 * 1024 * 1024}))
            .await
            .unwrap_or_else(|e| panic!("a result of 20 MiB is within the bound: {e:?}"));
        assert_eq!(text_len(&within), 20 * 1024 * 1024);
        let padded = within_a_minute(&client, json!({"size": 10, "pad": pad}))
            .await
            .unwrap_or_else(|e| panic!("a call of 20 MiB is within the bound: {e:?}"));
        assert_eq!(text_len(&padded), 10);
        if args == &over_stdio {
            assert_eq!(client.close().await.code(), Some(0));
            continue;
        }
        let failed = within_a_minute(&client, json!({"size": 100 * 1024 * 1024, "as": "chunked"}))
            .await
            .expect_err("past the bound");
        failed_and_exited(
            &failed,
            "exceeded the maximum size of 67108864 bytes",
            client.child,
        )
        .await;
    }
    let succeeded = |trail: &str| -> Vec<bool> {
        proxy_common::calls(&dir.join(trail))
            .iter()
            .map(|r| r["success"] == true)
            .collect()
    };
    assert_eq!(succeeded("stdio.jsonl"), [true, true]);
    assert_eq!(succeeded("http.jsonl"), [true, true, false]);
}

/// A gateway's `url` server may answer with at most 64 MiB: a result of 20 MiB reaches the
/// client; one of 100 MiB, as a JSON body with or without its length or as one event of a
/// stream, fails the call, is not held, and the next call is served.
#[tokio::test(flavor = "current_thread")]
async fn an_http_servers_answer_past_the_bound_fails_the_gateways_call_and_is_not_held() {
    let (_server, port) = support::python_server("big_server.py").await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let dir = scratch("http_big", POLICY);
    std::fs::write(
        dir.join("fleet.toml"),
        format!("{POLICY}\n[servers.big]\nurl = {url:?}\ntrust = \"trusted\"\nprefix = \"\"\n"),
    )
    .expect("fleet");
    let gateway = proxy_common::gateway_stdio(
        &dir.join("fleet.toml"),
        "viewer",
        &dir.join("gateway.jsonl"),
        &[],
    );
    let client = Proxied::start(&gateway).await;
    let within = within_a_minute(&client, json!({"size": 20 * 1024 * 1024, "as": "json"}))
        .await
        .unwrap_or_else(|e| panic!("20 MiB is within the bound: {e:?}"));
    assert_eq!(text_len(&within), 20 * 1024 * 1024);
    for shape in ["json", "chunked", "sse"] {
        let failed = within_a_minute(&client, json!({"size": 100 * 1024 * 1024, "as": shape}))
            .await
            .expect_err("past the bound");
        assert_ne!(failed.code.0, REFUSED_CODE, "{shape}: {failed:?}");
        assert!(
            failed.message.contains("`big` did not answer"),
            "{shape}: {failed:?}"
        );
        // rmcp says why for a body; for an event of a stream it says only that its transport
        // for that request closed: its own reason, not the JSON body's before it (which it was
        // told while the server was taken for gone).
        assert_eq!(
            failed
                .message
                .contains("exceeded the maximum size of 67108864 bytes"),
            shape != "sse",
            "{shape}: {failed:?}"
        );
        let after = within_a_minute(&client, json!({"size": 10, "as": shape}))
            .await
            .unwrap_or_else(|e| panic!("the next call, after {shape}: {e:?}"));
        assert_eq!(text_len(&after), 10);
    }
    let peak = proxy_common::peak_kib(client.child.id().expect("runs")).expect("runs");
    assert!(
        peak < 250 * 1024,
        "the gateway held {peak} KiB at once for answers of 100 MiB"
    );
    let succeeded: Vec<bool> = proxy_common::calls(&dir.join("gateway.jsonl"))
        .iter()
        .map(|r| r["success"] == true)
        .collect();
    assert_eq!(
        succeeded,
        [true, false, true, false, true, false, true],
        "every call on record, each failed one as failed"
    );
}
