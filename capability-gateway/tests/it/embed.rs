//! The engine embedded in a program, as a downstream crate uses it: a policy, an audited
//! dispatch, a fleet of one spawned server, served over Streamable HTTP to an rmcp client,
//! stopped by the program's own signal. What the policy refuses reaches no server, every call
//! is on the trail, and the server is gone when `serve` returns.

#![cfg(unix)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capability::audit::AuditedDispatch;
use capability_gateway::{Ended, Front, GatewayError, Servers};
use capability_testkit::Scratch;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;

const TOKEN: &str = "embedded-viewer-token";

/// A server in `sh`: writes its pid to `pid`, lists `status` (read-only) and `restart`
/// (destructive), answers `status` with `up`, and writes to `heard` every call it gets.
fn server_script(pid: &Path, heard: &Path) -> String {
    format!(
        r#"echo $$ > '{pid}'
reply() {{ printf '{{"jsonrpc":"2.0","id":%s,%s}}\n' "$1" "$2"; }}
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^[^{{]*{{[^{{]*"id":\([0-9][0-9]*\|"[^"]*"\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) reply "$id" '"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"ops","version":"1.0.0"}}}}' ;;
    *'"method":"tools/list"'*) reply "$id" '"result":{{"tools":[{{"name":"status","inputSchema":{{"type":"object"}},"annotations":{{"readOnlyHint":true}}}},{{"name":"restart","inputSchema":{{"type":"object"}},"annotations":{{"readOnlyHint":false,"destructiveHint":true}}}}]}}' ;;
    *'"method":"tools/call"'*) printf '%s\n' "$line" >> '{heard}'; reply "$id" '"result":{{"content":[{{"type":"text","text":"up"}}]}}' ;;
    *'"method":"'*) [ -n "$id" ] && reply "$id" '"error":{{"code":-32601,"message":"Method not found"}}' ;;
  esac
done"#,
        pid = pid.display(),
        heard = heard.display()
    )
}

#[tokio::test(flavor = "current_thread")]
async fn a_program_serves_a_fleet_and_stops_it_with_its_own_signal() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = Scratch::new("gateway-embed");
    let (pid, heard) = (dir.join("server.pid"), dir.join("heard.log"));
    std::fs::write(dir.join("server.sh"), server_script(&pid, &heard)).expect("the server");
    let policy_path = dir.join("policy.toml");
    std::fs::write(
        &policy_path,
        format!(
            r#"version = "embed-1"
[roles.viewer]
ceiling = "read-only"
allow = ["*"]
[bearer_tokens]
"sha256:{token}" = "viewer"
[servers.ops]
command = ["sh", "{script}"]
trust = "trusted"
prefix = ""
"#,
            token = capability_rules::sha256_hex(TOKEN.as_bytes()),
            script = dir.join("server.sh").display()
        ),
    )
    .expect("the policy");
    let policy = capability::Policy::from_toml_file(&policy_path).expect("a policy");
    let trail = dir.join("trail.jsonl");
    let sink =
        capability_gateway::trail::open(&trail.display().to_string(), "gateway", "http", None)
            .expect("the trail");
    // The default budget degrades a session at its first refusal; this program allows ten.
    let budget = capability::audit::Budget {
        max_calls: 100,
        max_denials: 10,
    };
    let dispatch = Arc::new(AuditedDispatch::new(sink.clone()).with_budget(budget));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let url = format!("http://{}/mcp", listener.local_addr().expect("its address"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let engine = tokio::spawn(
        capability_gateway::builder(policy, &policy_path, dispatch)
            .servers(Servers::Policy)
            .shutdown(async {
                let _ = stopped.await;
            })
            .serve(Front::Http(listener)),
    );

    // The front answers once the fleet is up: a client connects as any MCP client does.
    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(TOKEN);
    let client = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let transport = StreamableHttpClientTransport::from_config(config.clone());
            match ().serve(transport).await {
                Ok(client) => break client,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .expect("the engine serves within 20 s");
    let tools = client.peer().list_all_tools().await.expect("the tools");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        ["status"],
        "a read-only role is shown the read-only tool only"
    );
    let status = client
        .peer()
        .call_tool(CallToolRequestParams::new("status"))
        .await
        .expect("status runs");
    assert_eq!(
        status.content[0].as_text().map(|t| t.text.as_str()),
        Some("up")
    );
    let refused = client
        .peer()
        .call_tool(CallToolRequestParams::new("restart"))
        .await
        .expect_err("restart is refused");
    let refused = format!("{refused}");
    assert!(
        refused.contains("refused by capability-gateway"),
        "{refused}"
    );
    let _ = client.cancel().await;

    stop.send(()).expect("the engine listens for its stop");
    let ended = tokio::time::timeout(Duration::from_secs(20), engine)
        .await
        .expect("the engine stops within 20 s")
        .expect("the engine's task");
    assert_eq!(ended, Ok(Ended::Stopped));
    sink.close().expect("the trail closes");

    // The server heard the allowed call only; it was stopped and waited for.
    let heard = std::fs::read_to_string(&heard).unwrap_or_default();
    assert_eq!(heard.lines().count(), 1, "{heard}");
    assert!(heard.contains("\"status\""), "{heard}");
    let pid = std::fs::read_to_string(&pid).expect("the server's pid");
    let alive = std::process::Command::new("kill")
        .args(["-0", pid.trim()])
        .status()
        .expect("kill -0");
    assert!(
        !alive.success(),
        "the server {} outlived the engine",
        pid.trim()
    );
    // Both calls on the trail: the allowed one with its outcome, the refused one denied.
    let records: Vec<Value> = std::fs::read_to_string(&trail)
        .expect("the trail")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let verdict = |tool: &str| {
        records
            .iter()
            .filter(|r| r["tool"].as_str().is_some_and(|t| t.ends_with(tool)))
            .filter_map(|r| r["verdict"].as_str())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert!(
        verdict("status").iter().any(|v| v == "allowed"),
        "{records:#?}"
    );
    assert_eq!(verdict("restart"), ["denied"], "{records:#?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_that_cannot_be_started_is_an_error_of_its_own_kind() {
    let dir = Scratch::new("gateway-unstarted");
    let policy_path = dir.join("policy.toml");
    std::fs::write(
        &policy_path,
        "[roles.viewer]\nceiling = \"read-only\"\nallow = [\"*\"]\n[servers.gone]\ncommand = [\"/nonexistent/mcp-server\"]\n",
    )
    .expect("the policy");
    let policy = capability::Policy::from_toml_file(&policy_path).expect("a policy");
    let sink = capability_gateway::trail::open(
        &dir.join("trail.jsonl").display().to_string(),
        "gateway",
        "viewer",
        None,
    )
    .expect("the trail");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let served = capability_gateway::builder(
        policy,
        &policy_path,
        Arc::new(AuditedDispatch::new(sink.clone())),
    )
    .serve(Front::Http(listener))
    .await;
    match served {
        Err(GatewayError::Unstarted(why)) => {
            assert!(why.contains("server `gone`"), "{why}");
            assert!(why.contains("/nonexistent/mcp-server"), "{why}");
        }
        other => panic!("expected Unstarted, got {other:?}"),
    }
}
