//! Receipts through the gateway (`tlog::Receipt`): a client that asks with
//! `"capability/receipt": true` in a call's `_meta` gets, in the result's `_meta`, the writer,
//! seq, leaf index and leaf hash of the call's outcome record; once the writer's checkpoint
//! covers it, the proof made from the writer's own stored checkpoint has that leaf, and checks
//! with the writer's public key. A client that does not ask gets no receipt.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use capability::audit::tlog::encoding::base64;
use capability::audit::tlog::{
    RECEIPT_META_KEY, SignedCheckpoint, check_proof, leaf_hash, prove_stored,
};
use capability::audit::{AuditedDispatch, CheckpointSigner, read_jsonl};
use capability::gate::SecretKey;
use capability_gateway::{Front, Servers};
use capability_testkit::Scratch;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, MetaObject, RequestMetaObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

const TOKEN: &str = "receipt-viewer-token";

/// A server in `sh` that lists `status` (read-only) and answers it with `up`.
pub(crate) fn server_script() -> String {
    r#"reply() { printf '{"jsonrpc":"2.0","id":%s,%s}\n' "$1" "$2"; }
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^[^{]*{[^{]*"id":\([0-9][0-9]*\|"[^"]*"\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) reply "$id" '"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"ops","version":"1.0.0"}}' ;;
    *'"method":"tools/list"'*) reply "$id" '"result":{"tools":[{"name":"status","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}' ;;
    *'"method":"tools/call"'*) reply "$id" '"result":{"content":[{"type":"text","text":"up"}]}' ;;
    *'"method":"'*) [ -n "$id" ] && reply "$id" '"error":{"code":-32601,"message":"Method not found"}' ;;
  esac
done"#
        .to_owned()
}

fn policy(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("server.sh"), server_script()).expect("the server");
    let path = dir.join("policy.toml");
    std::fs::write(
        &path,
        format!(
            r#"version = "receipts-1"
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
    path
}

fn asking() -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new("status");
    let mut meta = serde_json::Map::new();
    meta.insert(RECEIPT_META_KEY.to_owned(), Value::Bool(true));
    params.meta = Some(RequestMetaObject(MetaObject(meta)));
    params
}

#[tokio::test(flavor = "current_thread")]
async fn a_call_that_asks_gets_the_receipt_of_its_outcome_and_its_proof_checks() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = Scratch::new("gateway-receipts");
    let policy_path = policy(&dir);
    let policy = capability::Policy::from_toml_file(&policy_path).expect("a policy");
    let key = SecretKey::generate().expect("key");
    let public = key.public_key();
    let signer: Arc<dyn CheckpointSigner> = Arc::new(key);
    let trail = dir.join("trail.jsonl");
    let sink = capability_gateway::trail::open(
        &trail.display().to_string(),
        "gateway",
        "http",
        Some(signer),
    )
    .expect("the trail");
    let dispatch = Arc::new(AuditedDispatch::new(sink.clone()));
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

    let plain = client
        .peer()
        .call_tool(CallToolRequestParams::new("status"))
        .await
        .expect("status runs");
    assert!(
        plain
            .meta
            .as_ref()
            .is_none_or(|m| !m.contains_key(RECEIPT_META_KEY)),
        "no receipt unasked: {plain:?}"
    );
    let asked = client
        .peer()
        .call_tool(asking())
        .await
        .expect("status runs");
    let receipt = asked
        .meta
        .as_ref()
        .and_then(|m| m.get(RECEIPT_META_KEY))
        .cloned()
        .unwrap_or_else(|| panic!("a receipt in the result's _meta: {asked:?}"));
    let _ = client.cancel().await;
    stop.send(()).expect("the engine listens for its stop");
    let _ = tokio::time::timeout(Duration::from_secs(20), engine).await;
    sink.close()
        .expect("the trail closes: its final checkpoint");

    let writer = receipt["writer"].as_str().expect("writer").to_owned();
    let seq = receipt["seq"].as_u64().expect("seq");
    assert_eq!(receipt["index"], json!(seq - 1));
    assert_eq!(receipt["origin"], json!(format!("capability/{writer}")));
    let (records, report) = read_jsonl(&trail).expect("the trail");
    let record = records
        .iter()
        .find(|r| r.writer == writer && r.seq == seq)
        .expect("the receipt's record");
    assert_eq!(record.phase, Some(capability::audit::Phase::Outcome));
    assert_eq!(record.success, Some(true));
    assert_eq!(
        receipt["leaf_hash"],
        json!(base64(&leaf_hash(record.to_line().as_bytes())))
    );
    let notes: Vec<SignedCheckpoint> = report
        .tree_checkpoints
        .iter()
        .map(|t| SignedCheckpoint::parse(t).expect("a note"))
        .collect();
    let proof = prove_stored(&records, &notes, &writer, seq)
        .expect("prove")
        .expect("the final checkpoint covers it");
    let proven = check_proof(&proof, &public, Some(&record.to_line())).expect("checks");
    assert_eq!((proven.writer, proven.seq), (writer, seq));
    assert_eq!(
        proof.extra.as_deref().map(leaf_hash).map(|h| base64(&h)),
        receipt["leaf_hash"].as_str().map(str::to_owned)
    );
}
