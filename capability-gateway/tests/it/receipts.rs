//! Receipts through the gateway (`tlog::Receipt`): a client that asks with
//! `"capability/receipt": true` in a call's `_meta` gets, in the result's `_meta`, the writer,
//! seq, leaf index and leaf hash of the call's outcome record; once the writer's checkpoint
//! covers it, the proof made from the writer's own stored checkpoint has that leaf, and checks
//! with the writer's public key. A client that does not ask gets no receipt. Over HTTP
//! (`GET /receipts/<writer>/<seq>`), the principal whose call it was gets the proof file once a
//! checkpoint covers the record, and it checks with the writer's public key alone; another
//! principal of the same role, a caller without a token, and a seq that is not on record get
//! nothing that tells them about it.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use capability::audit::tlog::encoding::base64;
use capability::audit::tlog::{
    RECEIPT_META_KEY, SignedCheckpoint, TlogProof, check_proof, leaf_hash, prove_stored,
};
use capability::audit::{
    AuditSink, AuditedDispatch, CheckpointEvery, CheckpointSigner, FlushPolicy, JsonlSink,
    read_jsonl,
};
use capability::gate::SecretKey;
use capability_gateway::{Front, Servers};
use capability_testkit::Scratch;
use capability_testkit::servers::{Raw, raw_request};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, MetaObject, RequestMetaObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

const TOKEN: &str = "receipt-viewer-token";
const BOB: &str = "receipt-bob-token";

/// A server in `sh` that lists `status` (read-only) and answers it with `up`.
fn server_script() -> String {
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

/// The policy: the server `ops` of [`server_script`], and a viewer's token each of `tokens`.
fn policy(dir: &Path, tokens: &[&str]) -> PathBuf {
    std::fs::write(dir.join("server.sh"), server_script()).expect("the server");
    let path = dir.join("policy.toml");
    let tokens: String = (tokens.iter())
        .map(|t| {
            format!(
                "\"sha256:{}\" = \"viewer\"\n",
                capability_rules::sha256_hex(t.as_bytes())
            )
        })
        .collect();
    std::fs::write(
        &path,
        format!(
            r#"version = "receipts-1"
[roles.viewer]
ceiling = "read-only"
allow = ["*"]
[bearer_tokens]
{tokens}[servers.ops]
command = ["sh", "{script}"]
trust = "trusted"
prefix = ""
"#,
            script = dir.join("server.sh").display()
        ),
    )
    .expect("the policy");
    path
}

/// An engine serving `policy_path` over HTTP on a free loopback port, recording to `sink`
/// (its trail `trail`), until `stop` is sent.
struct Served {
    base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    engine: tokio::task::JoinHandle<
        Result<capability_gateway::Ended, capability_gateway::GatewayError>,
    >,
}

impl Served {
    fn start(policy_path: &Path, sink: Arc<dyn AuditSink>, trail: &Path) -> Served {
        let policy = capability::Policy::from_toml_file(policy_path).expect("a policy");
        let dispatch = Arc::new(AuditedDispatch::new(sink));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let base = format!("http://{}", listener.local_addr().expect("its address"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let engine = tokio::spawn(
            capability_gateway::builder(policy, policy_path, dispatch)
                .servers(Servers::Policy)
                .store(trail.display().to_string())
                .shutdown(async {
                    let _ = stopped.await;
                })
                .serve(Front::Http(listener)),
        );
        Served { base, stop, engine }
    }

    /// A client with `token`, once the fleet is up.
    async fn client(&self, token: &str) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
        let url = format!("{}/mcp", self.base);
        let config = StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(token);
        tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                let transport = StreamableHttpClientTransport::from_config(config.clone());
                match ().serve(transport).await {
                    Ok(client) => break client,
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        })
        .await
        .expect("the engine serves within 20 s")
    }

    async fn stop(self) {
        self.stop.send(()).expect("the engine listens for its stop");
        let _ = tokio::time::timeout(Duration::from_secs(20), self.engine).await;
    }
}

fn asking() -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new("status");
    let mut meta = serde_json::Map::new();
    meta.insert(RECEIPT_META_KEY.to_owned(), Value::Bool(true));
    params.meta = Some(RequestMetaObject(MetaObject(meta)));
    params
}

/// The receipt of a call of `status` that asks for one.
async fn receipt_of(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>) -> Value {
    let asked = client
        .peer()
        .call_tool(asking())
        .await
        .expect("status runs");
    asked
        .meta
        .as_ref()
        .and_then(|m| m.get(RECEIPT_META_KEY))
        .cloned()
        .unwrap_or_else(|| panic!("a receipt in the result's _meta: {asked:?}"))
}

#[tokio::test(flavor = "current_thread")]
async fn a_call_that_asks_gets_the_receipt_of_its_outcome_and_its_proof_checks() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = Scratch::new("gateway-receipts");
    let policy_path = policy(&dir, &[TOKEN]);
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
    let served = Served::start(&policy_path, sink.clone(), &trail);
    let client = served.client(TOKEN).await;

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
    let receipt = receipt_of(&client).await;
    let _ = client.cancel().await;
    served.stop().await;
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

/// `GET <base><path>` with `token`, off the runtime's thread.
async fn get(base: &str, path: &str, token: Option<&str>) -> Raw {
    let (url, bearer) = (
        format!("{base}{path}"),
        token.map(|t| format!("Bearer {t}")),
    );
    tokio::task::spawn_blocking(move || {
        let headers: Vec<(&str, &str)> = bearer
            .as_deref()
            .map(|b| vec![("Authorization", b)])
            .unwrap_or_default();
        raw_request("GET", &url, &headers, "")
    })
    .await
    .expect("the request")
}

#[tokio::test(flavor = "current_thread")]
async fn a_receipts_proof_is_served_to_the_principal_whose_call_it_was_and_checks_alone() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = Scratch::new("gateway-receipt-proofs");
    let policy_path = policy(&dir, &[TOKEN, BOB]);
    let key = SecretKey::generate().expect("key");
    let public = key.public_key();
    let signer: Arc<dyn CheckpointSigner> = Arc::new(key);
    let trail = dir.join("trail.jsonl");
    // A checkpoint after every record, so the proof is there at once.
    let sink: Arc<dyn AuditSink> = Arc::new(
        JsonlSink::open(&trail, FlushPolicy::EveryRecord)
            .and_then(|s| s.with_writer("proxy:gateway/http"))
            .expect("the trail")
            .with_checkpoints(
                signer,
                CheckpointEvery {
                    records: 1,
                    interval: Duration::from_secs(3600),
                },
            ),
    );
    let served = Served::start(&policy_path, sink.clone(), &trail);
    let (base, client) = (served.base.clone(), served.client(TOKEN).await);
    let receipt = receipt_of(&client).await;
    let writer = receipt["writer"].as_str().expect("writer").to_owned();
    let seq = receipt["seq"].as_u64().expect("seq");
    let path = format!("/receipts/{writer}/{seq}");

    // The caller whose call it was: the proof file, once the record is under a checkpoint (the
    // outcome is written just after the answer).
    let mut mine = get(&base, &path, Some(TOKEN)).await;
    for _ in 0..100 {
        if mine.status == 200 {
            break;
        }
        assert_eq!(mine.status, 404, "not yet, or the proof: {mine:?}");
        assert!(mine.header("retry-after").is_some(), "{mine:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        mine = get(&base, &path, Some(TOKEN)).await;
    }
    assert_eq!(mine.status, 200, "{mine:?}");
    let proof = TlogProof::parse(&mine.body).expect("a tlog-proof file");
    let proven = check_proof(&proof, &public, None).expect("checks with the writer's key alone");
    assert_eq!((proven.writer.as_str(), proven.seq), (writer.as_str(), seq));
    let line = String::from_utf8(proof.extra.clone().expect("the record")).expect("text");
    assert!(line.contains("\"phase\":\"outcome\""), "{line}");
    // Another key does not check it.
    let other = SecretKey::generate().expect("key").public_key();
    assert!(check_proof(&proof, &other, None).is_err());

    // Bob, same role, another principal: the same answer as for a record that is not there.
    let bobs = get(&base, &path, Some(BOB)).await;
    let none = get(
        &base,
        &format!("/receipts/{writer}/{}", seq + 1000),
        Some(TOKEN),
    )
    .await;
    assert_eq!((bobs.status, none.status), (404, 404), "{bobs:?} {none:?}");
    assert_eq!(
        bobs.body, none.body,
        "nothing tells Bob the record is there"
    );
    assert!(!bobs.body.contains("outcome"), "{bobs:?}");
    // No token: 401, with a challenge. A bad token: refused at the edge.
    let anonymous = get(&base, &path, None).await;
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    assert_eq!(anonymous.header("www-authenticate"), Some("Bearer"));
    assert_eq!(get(&base, &path, Some("forged")).await.status, 401);
    // Not a GET; a path that names no record.
    let posted = tokio::task::spawn_blocking({
        let url = format!("{base}{path}");
        let bearer = format!("Bearer {TOKEN}");
        move || raw_request("POST", &url, &[("Authorization", bearer.as_str())], "")
    })
    .await
    .expect("the request");
    assert_eq!(posted.status, 405, "{posted:?}");
    assert_eq!(
        get(&base, "/receipts/nonsense", Some(TOKEN)).await.status,
        404
    );

    let _ = client.cancel().await;
    served.stop().await;
    sink.close().expect("the trail closes");
}
