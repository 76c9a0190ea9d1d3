//! A server's requests to the client behind `capability proxy`: sampling, elicitation and roots
//! are refused unless the client's role allows them (`server_requests`), each one allowed is
//! passed to the client and recorded, each one refused is recorded; over Streamable HTTP, each
//! goes to the client whose call the server is serving, decided for that client's role.
//!
//! The server is a small `sh` server of protocol 2025-11-25 (the revision that has these
//! requests): its tool `ask` sends all three, and it writes every answer it gets to a file.

#![cfg(unix)]
#![allow(deprecated)]

use crate::proxy_common;
use crate::support;

use rmcp::model::{
    ClientCapabilities, ClientInfo, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, Implementation, ListRootsResult, ProtocolVersion, Root,
};
use rmcp::service::{ClientLifecycleMode, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};
use std::path::Path;

use proxy_common::{Proxied, calls, proxy_args, scratch};

const POLICY: &str = r#"
[roles.quiet]
ceiling = "unrestricted"
allow = ["asker/*"]

[roles.interactive]
ceiling = "unrestricted"
allow = ["asker/*"]
server_requests = ["asker/elicitation", "asker/roots"]
"#;

/// The server: `initialize` (2025-11-25), one tool `ask` (its requests' ids numbers or strings:
/// the gateway's forwarding lane numbers its own with strings); calling it sends the client
/// `sampling/createMessage` (id "s1"), `elicitation/create` ("s2") and `roots/list` ("s3"),
/// and every line that answers them goes to `answers`; the call is answered once all three are,
/// as a server that waits for its client does.
fn asker(answers: &Path) -> support::McpServer {
    let script = format!(
        r#"reply() {{ printf '{{"jsonrpc":"2.0","id":%s,%s}}\n' "$1" "$2"; }}
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^[^{{]*{{[^{{]*"id":\([0-9][0-9]*\|"[^"]*"\).*/\1/p')
  case "$line" in
    *'"id":"s'*)
      printf '%s\n' "$line" >> '{answers}'
      pending=$((pending - 1))
      if [ "$pending" -eq 0 ]; then reply "$call" '"result":{{"content":[{{"type":"text","text":"asked"}}]}}'; fi ;;
    *'"method":"initialize"'*) reply "$id" '"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"asker","version":"1.0.0"}}}}' ;;
    *'"method":"server/discover"'*) reply "$id" '"error":{{"code":-32601,"message":"Method not found"}}' ;;
    *'"method":"tools/list"'*) reply "$id" '"result":{{"tools":[{{"name":"ask","inputSchema":{{"type":"object"}}}}]}}' ;;
    *'"method":"tools/call"'*)
      printf '%s\n' '{{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{{"messages":[{{"role":"user","content":{{"type":"text","text":"write a haiku"}}}}],"maxTokens":20}}}}'
      printf '%s\n' '{{"jsonrpc":"2.0","id":"s2","method":"elicitation/create","params":{{"message":"Which pod?","requestedSchema":{{"type":"object","properties":{{"pod":{{"type":"string"}}}}}}}}}}'
      printf '%s\n' '{{"jsonrpc":"2.0","id":"s3","method":"roots/list"}}'
      call="$id"; pending=3 ;;
  esac
done"#,
        answers = answers.display()
    );
    support::McpServer {
        name: "sh",
        program: "sh".into(),
        args: vec!["-c".to_owned(), script],
        env: Vec::new(),
    }
}

/// Calls the server's `ask` through `client`, within 20 s.
async fn ask(
    client: &rmcp::service::RunningService<RoleClient, Answering>,
) -> rmcp::model::CallToolResult {
    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        client
            .peer()
            .call_tool(rmcp::model::CallToolRequestParams::new("ask")),
    )
    .await
    .expect("answered within 20 s")
    .expect("the tool runs")
}

/// A client of 2025-11-25 that answers every server request: a model, a human, its roots.
struct Answering;

impl ClientHandler for Answering {
    fn get_info(&self) -> ClientInfo {
        ClientInfo::new(
            ClientCapabilities::builder()
                .enable_sampling()
                .enable_elicitation()
                .enable_roots()
                .build(),
            Implementation::new("answering-client", "1.0.0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        serde_json::from_value(json!({
            "role": "assistant", "model": "test",
            "content": {"type": "text", "text": "an old pond"}
        }))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        serde_json::from_value(json!({"action": "accept", "content": {"pod": "api-0"}}))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::new(vec![Root::new("file:///srv/app")]))
    }
}

/// Runs the proxy for `role`, calls `ask`, and returns the server's answers by request id, and
/// the trail.
async fn ask_as(role: &str) -> (Vec<(String, Value)>, std::path::PathBuf) {
    ask_through(role, false).await
}

/// As [`ask_as`], through `capability gateway` (the server the policy's `[servers.asker]`)
/// when `gateway`.
async fn ask_through(role: &str, gateway: bool) -> (Vec<(String, Value)>, std::path::PathBuf) {
    let front = if gateway { "gateway" } else { "proxy" };
    let dir = scratch(&format!("server-requests-{front}-{role}"), POLICY);
    let answers = dir.join("answers.log");
    let trail = dir.join("trail.jsonl");
    let args = if gateway {
        let fleet = format!(
            "{POLICY}\n[servers.asker]\ncommand = {}\ntrust = \"trusted\"\nprefix = \"\"\n",
            asker(&answers).toml_command()
        );
        std::fs::write(dir.join("fleet.toml"), fleet).expect("policy");
        proxy_common::gateway_stdio(&dir.join("fleet.toml"), role, &trail, &[])
    } else {
        proxy_args(
            &dir,
            role,
            "asker",
            &trail,
            &["--trust", "trusted"],
            &asker(&answers),
        )
    };
    let (mut child, client) =
        Proxied::spawn_for(&args, Answering, ClientLifecycleMode::Initialize).await;
    let asked = ask(&client).await;
    assert_eq!(
        asked.content[0].as_text().map(|t| t.text.as_str()),
        Some("asked")
    );
    // The server's requests are answered while the client is connected.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let read = || {
        std::fs::read_to_string(&answers)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
            .map(|v| (v["id"].as_str().unwrap_or_default().to_owned(), v))
            .collect::<Vec<_>>()
    };
    while read().len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "answers: {:?}",
            read()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let _ = client.cancel().await;
    let _ = child.wait().await;
    let mut got = read();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    (got, trail)
}

#[tokio::test(flavor = "current_thread")]
async fn server_requests_are_refused_unless_the_role_allows_them() {
    // A role that allows none: every request refused before it reaches the client.
    let (answers, trail) = ask_as("quiet").await;
    for (id, answer) in &answers {
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("refused by capability-proxy"),
            "{id}: {answer}"
        );
    }
    let recorded: Vec<(String, String)> = calls(&trail)
        .iter()
        .filter(|r| r["tool"] != "ask")
        .map(|r| {
            (
                r["method"].as_str().unwrap_or_default().to_owned(),
                r["verdict"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let mut recorded = recorded;
    recorded.sort();
    assert_eq!(
        recorded,
        [
            ("elicitation/create".to_owned(), "denied".to_owned()),
            ("roots/list".to_owned(), "denied".to_owned()),
            ("sampling/createMessage".to_owned(), "denied".to_owned()),
        ]
    );

    // A role that allows elicitation and roots: those two reach the client and are answered;
    // sampling is still refused. Each one allowed is an intent and an outcome.
    let (answers, trail) = ask_as("interactive").await;
    let by_id = |id: &str| {
        answers
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, a)| a.clone())
    };
    let sampling = by_id("s1").expect("answered");
    assert!(
        sampling["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("refused")),
        "{sampling}"
    );
    let elicited = by_id("s2").expect("answered");
    assert_eq!(elicited["result"]["content"]["pod"], "api-0", "{elicited}");
    let roots = by_id("s3").expect("answered");
    assert_eq!(
        roots["result"]["roots"][0]["uri"], "file:///srv/app",
        "{roots}"
    );
    let mut recorded: Vec<(String, String)> = calls(&trail)
        .iter()
        .filter(|r| r["tool"] != "ask")
        .map(|r| {
            (
                r["method"].as_str().unwrap_or_default().to_owned(),
                r["verdict"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    recorded.sort();
    assert_eq!(
        recorded,
        [
            ("elicitation/create".to_owned(), "allowed".to_owned()),
            ("roots/list".to_owned(), "allowed".to_owned()),
            ("sampling/createMessage".to_owned(), "denied".to_owned()),
        ]
    );
    let server_requests = proxy_common::records(&trail)
        .into_iter()
        .filter(|r| r["agent"] == "server:asker")
        .count();
    assert_eq!(server_requests, 5, "two intents, two outcomes, one refusal");
}

#[tokio::test(flavor = "current_thread")]
async fn over_http_a_servers_requests_go_to_the_client_of_the_call_as_its_role_allows() {
    // Over HTTP one server serves many clients: a request the server makes while it serves a
    // call goes to the client that made that call (on its own stream), decided for its role.
    let policy = format!(
        "{POLICY}\n[bearer_tokens]\n\"sha256:fd0e9cd416c210e78ebfba1df5dc3752b4f59c9763d9f05a59fb64501aaf5878\" = \"interactive\"\n"
    );
    let dir = scratch("server-requests-http", &policy);
    let answers = dir.join("answers.log");
    let trail = dir.join("trail.jsonl");
    let proxy = proxy_common::Listening::start_as(
        &dir,
        &trail,
        "asker",
        &["--trust", "trusted"],
        &asker(&answers),
    )
    .await;
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(proxy.url.as_str())
        .auth_header("interactive-token");
    let client = Answering
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("MCP handshake over HTTP");
    let asked = ask(&client).await;
    assert_eq!(
        asked.content[0].as_text().map(|t| t.text.as_str()),
        Some("asked")
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let read = || std::fs::read_to_string(&answers).unwrap_or_default();
    while read().lines().count() < 3 {
        assert!(std::time::Instant::now() < deadline, "answers: {}", read());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let by_id = |id: &str| {
        read()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
            .find(|v| v["id"] == id)
            .unwrap_or_default()
    };
    // Sampling is not the role's: refused. Elicitation and roots: answered by that client.
    assert!(
        by_id("s1")["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("refused by capability-proxy")),
        "{}",
        by_id("s1")
    );
    assert_eq!(by_id("s2")["result"]["content"]["pod"], "api-0");
    assert_eq!(by_id("s3")["result"]["roots"][0]["uri"], "file:///srv/app");
    let _ = client.cancel().await;
    assert!(proxy.stop().await.success());
    let mut recorded = calls(&trail)
        .into_iter()
        .filter(|r| r["agent"] == "server:asker")
        .map(|r| {
            (
                r["method"].as_str().unwrap_or_default().to_owned(),
                r["verdict"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect::<Vec<_>>();
    recorded.sort();
    assert_eq!(
        recorded,
        [
            ("elicitation/create".to_owned(), "allowed".to_owned()),
            ("roots/list".to_owned(), "allowed".to_owned()),
            ("sampling/createMessage".to_owned(), "denied".to_owned()),
        ],
        "each one on record"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn through_the_gateway_a_servers_requests_reach_the_client_only_as_its_role_allows() {
    let server_requests = |trail: &Path| -> Vec<(String, String)> {
        let mut recorded: Vec<(String, String)> = calls(trail)
            .iter()
            .filter(|r| r["agent"] == "server:asker")
            .map(|r| {
                (
                    r["method"].as_str().unwrap_or_default().to_owned(),
                    r["verdict"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        recorded.sort();
        recorded
    };
    // None allowed: each refused by the gateway, on record, and the client never asked.
    let (answers, trail) = ask_through("quiet", true).await;
    for (id, answer) in &answers {
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("refused by capability-gateway"),
            "{id}: {answer}"
        );
    }
    assert_eq!(
        server_requests(&trail),
        [
            ("elicitation/create".to_owned(), "denied".to_owned()),
            ("roots/list".to_owned(), "denied".to_owned()),
            ("sampling/createMessage".to_owned(), "denied".to_owned()),
        ]
    );
    // Elicitation and roots allowed: answered by the client; sampling still refused.
    let (answers, trail) = ask_through("interactive", true).await;
    let by_id = |id: &str| {
        answers
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert!(
        by_id("s1")["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("refused by capability-gateway")),
        "{}",
        by_id("s1")
    );
    assert_eq!(by_id("s2")["result"]["content"]["pod"], "api-0");
    assert_eq!(by_id("s3")["result"]["roots"][0]["uri"], "file:///srv/app");
    assert_eq!(
        server_requests(&trail),
        [
            ("elicitation/create".to_owned(), "allowed".to_owned()),
            ("roots/list".to_owned(), "allowed".to_owned()),
            ("sampling/createMessage".to_owned(), "denied".to_owned()),
        ]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_gateway_reload_that_keeps_the_server_decides_its_requests_under_the_new_policy() {
    let dir = scratch("server-requests-gateway-reload", POLICY);
    let answers = dir.join("answers.log");
    let trail = dir.join("trail.jsonl");
    let server = format!(
        "\n[servers.asker]\ncommand = {}\ntrust = \"trusted\"\nprefix = \"\"\n",
        asker(&answers).toml_command()
    );
    let write = |roles: &str| {
        std::fs::write(dir.join("fleet.toml"), format!("{roles}{server}")).expect("policy")
    };
    // `quiet` allows no request, then (same server entry, so the server keeps running) roots.
    write(POLICY);
    let args = proxy_common::gateway_stdio(&dir.join("fleet.toml"), "quiet", &trail, &[]);
    let (child, client) =
        Proxied::spawn_for(&args, Answering, ClientLifecycleMode::Initialize).await;
    let pid = child.id().expect("running").to_string();
    let roots_answers = || {
        std::fs::read_to_string(&answers)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
            .filter(|v| v["id"] == "s3")
            .collect::<Vec<_>>()
    };
    let wait_for = |n: usize| async move {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while roots_answers().len() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                roots_answers()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    ask(&client).await;
    wait_for(1).await;
    assert!(
        roots_answers()[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("refused by capability-gateway")),
        "{:?}",
        roots_answers()
    );
    write(&POLICY.replace(
        "[roles.quiet]\nceiling = \"unrestricted\"\nallow = [\"asker/*\"]\n",
        "[roles.quiet]\nceiling = \"unrestricted\"\nallow = [\"asker/*\"]\nserver_requests = [\"asker/roots\"]\n",
    ));
    proxy_common::hangup(&pid);
    let reloaded = std::time::Instant::now();
    while !proxy_common::records(&trail)
        .iter()
        .any(|r| r["method"] == "gateway/reload")
    {
        assert!(
            reloaded.elapsed() < std::time::Duration::from_secs(10),
            "not reloaded"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    ask(&client).await;
    wait_for(2).await;
    assert_eq!(
        roots_answers()[1]["result"]["roots"][0]["uri"],
        "file:///srv/app",
        "decided under the new policy: {:?}",
        roots_answers()
    );
    let _ = client.cancel().await;
}
