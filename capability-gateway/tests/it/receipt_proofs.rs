//! A receipt's proof over HTTP (`GET /receipts/<writer>/<seq>` on the gateway's front): the
//! principal whose call it was gets the proof file once a checkpoint covers the record, and it
//! checks with the writer's public key alone; another principal of the same role, a caller
//! without a token, and a seq that is not on record get nothing that tells them about it.

#![cfg(unix)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capability::audit::tlog::{RECEIPT_META_KEY, TlogProof, check_proof};
use capability::audit::{
    AuditSink, AuditedDispatch, CheckpointEvery, CheckpointSigner, FlushPolicy, JsonlSink,
};
use capability::gate::SecretKey;
use capability_gateway::{Front, Servers};
use capability_testkit::Scratch;
use capability_testkit::servers::{Raw, raw_request};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, MetaObject, RequestMetaObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;

const ALICE: &str = "proof-alice-token";
const BOB: &str = "proof-bob-token";

fn policy(dir: &Path) -> std::path::PathBuf {
    std::fs::write(dir.join("server.sh"), super::receipts::server_script()).expect("the server");
    let path = dir.join("policy.toml");
    std::fs::write(
        &path,
        format!(
            r#"version = "proofs-1"
[roles.viewer]
ceiling = "read-only"
allow = ["*"]
[bearer_tokens]
"sha256:{alice}" = "viewer"
"sha256:{bob}" = "viewer"
[servers.ops]
command = ["sh", "{script}"]
trust = "trusted"
prefix = ""
"#,
            alice = capability_rules::sha256_hex(ALICE.as_bytes()),
            bob = capability_rules::sha256_hex(BOB.as_bytes()),
            script = dir.join("server.sh").display()
        ),
    )
    .expect("the policy");
    path
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
    let policy_path = policy(&dir);
    let policy = capability::Policy::from_toml_file(&policy_path).expect("a policy");
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
    let dispatch = Arc::new(AuditedDispatch::new(sink.clone()));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let base = format!("http://{}", listener.local_addr().expect("its address"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let engine = tokio::spawn(
        capability_gateway::builder(policy, &policy_path, dispatch)
            .servers(Servers::Policy)
            .store(trail.display().to_string())
            .shutdown(async {
                let _ = stopped.await;
            })
            .serve(Front::Http(listener)),
    );
    let url = format!("{base}/mcp");
    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(ALICE);
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
    let mut params = CallToolRequestParams::new("status");
    let mut meta = serde_json::Map::new();
    meta.insert(RECEIPT_META_KEY.to_owned(), Value::Bool(true));
    params.meta = Some(RequestMetaObject(MetaObject(meta)));
    let asked = client.peer().call_tool(params).await.expect("status runs");
    let receipt = asked
        .meta
        .as_ref()
        .and_then(|m| m.get(RECEIPT_META_KEY))
        .cloned()
        .unwrap_or_else(|| panic!("a receipt in the result's _meta: {asked:?}"));
    let writer = receipt["writer"].as_str().expect("writer").to_owned();
    let seq = receipt["seq"].as_u64().expect("seq");
    let path = format!("/receipts/{writer}/{seq}");

    // Alice, whose call it was: the proof file, once the record is under a checkpoint (the
    // outcome is written just after the answer).
    let mut mine = get(&base, &path, Some(ALICE)).await;
    for _ in 0..100 {
        if mine.status == 200 {
            break;
        }
        assert_eq!(mine.status, 404, "not yet, or the proof: {mine:?}");
        assert!(mine.header("retry-after").is_some(), "{mine:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        mine = get(&base, &path, Some(ALICE)).await;
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
        Some(ALICE),
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
        let bearer = format!("Bearer {ALICE}");
        move || raw_request("POST", &url, &[("Authorization", bearer.as_str())], "")
    })
    .await
    .expect("the request");
    assert_eq!(posted.status, 405, "{posted:?}");
    assert_eq!(
        get(&base, "/receipts/nonsense", Some(ALICE)).await.status,
        404
    );

    let _ = client.cancel().await;
    stop.send(()).expect("the engine listens for its stop");
    let _ = tokio::time::timeout(Duration::from_secs(20), engine).await;
    sink.close().expect("the trail closes");
}
