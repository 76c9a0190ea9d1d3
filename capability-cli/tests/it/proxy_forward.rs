//! Resources and prompts behind `capability proxy`: neither advertised nor forwarded unless the
//! policy's `[servers.<name>] forward = [..]` names them (the default is tools only); and when
//! forwarded, every list filtered by the caller's role, every read and get decided for it and
//! recorded, and a caller without a token over `--listen` sees and reads nothing, on record.

use crate::proxy_common;
use crate::support;

use proxy_common::{Listening, Proxied, calls, http_client, proxy_args, records, scratch};
use rmcp::ServiceError;
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::Value;
use support::raw_post;

use capability::rmcp::REFUSED_CODE;

/// A static document of server-everything the reader may read, and one it may not.
const ALLOWED_DOC: &str = "demo://resource/static/document/architecture.md";
const OTHER_DOC: &str = "demo://resource/static/document/features.md";

const FORWARD: &str = "[servers.everything]\nforward = [\"resources\", \"prompts\"]\n";

/// `reader` may read one document and get one prompt; `tools_only` may use no resource or
/// prompt at all. The token is `reader-token` (`printf %s reader-token | sha256sum`).
const ROLES: &str = r#"
[roles.reader]
ceiling = "read-only"
allow = ["everything/*"]
resources = ["everything/demo://resource/static/document/architecture.md"]
prompts = ["everything/simple-prompt"]

[roles.tools_only]
ceiling = "unrestricted"
allow = ["everything/*"]

[bearer_tokens]
"sha256:ba5005a40cf5212e4ac0190104cc127edab013294bb71279a975b27a80982d45" = "reader"
"#;

#[tokio::test(flavor = "current_thread")]
async fn tools_only_by_default() {
    let servers = require_servers!("tools_only_by_default");
    let dir = scratch("forward-default", ROLES);
    let audit = dir.join("audit.jsonl");
    let args = proxy_args(
        &dir,
        "reader",
        "everything",
        &audit,
        &["--trust", "trusted"],
        &servers.everything(),
    );
    let proxied = Proxied::start(&args).await;
    let peer = proxied.client.peer().clone();
    let capabilities = peer.peer_info().expect("server info").capabilities.clone();
    assert!(capabilities.resources.is_none(), "advertised");
    assert!(capabilities.prompts.is_none(), "advertised");
    assert!(capabilities.completions.is_none(), "advertised");
    let resources = peer.list_resources(None).await.expect("an empty list");
    assert!(resources.resources.is_empty(), "{resources:?}");
    let read = peer
        .read_resource(ReadResourceRequestParams::new(ALLOWED_DOC))
        .await;
    assert!(read.is_err(), "a resource was read: {read:?}");
    let got = peer
        .get_prompt(GetPromptRequestParams::new("simple-prompt"))
        .await;
    assert!(got.is_err(), "a prompt was got: {got:?}");
    // Tools are governed either way.
    assert!(!proxied.names().await.is_empty());
    assert!(proxied.close().await.success());
}

/// The error of a refused request, with its `data`.
fn refused<T: std::fmt::Debug>(result: Result<T, ServiceError>) -> (i32, Value) {
    match result {
        Err(ServiceError::McpError(error)) => (error.code.0, error.data.unwrap_or_default()),
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn resources_and_prompts_are_decided_and_recorded_per_role() {
    let servers = require_servers!("resources_and_prompts_are_decided_and_recorded_per_role");
    let dir = scratch("forward-roles", &format!("{ROLES}{FORWARD}"));

    // The reader: one document, one prompt.
    let audit = dir.join("reader.jsonl");
    let args = proxy_args(
        &dir,
        "reader",
        "everything",
        &audit,
        &["--trust", "trusted"],
        &servers.everything(),
    );
    let proxied = Proxied::start(&args).await;
    let peer = proxied.client.peer().clone();
    let capabilities = peer.peer_info().expect("server info").capabilities.clone();
    assert!(capabilities.resources.is_some() && capabilities.prompts.is_some());
    let listed = peer.list_all_resources().await.expect("lists");
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, [ALLOWED_DOC], "only what the role may read is listed");
    let read = peer
        .read_resource(ReadResourceRequestParams::new(ALLOWED_DOC))
        .await
        .expect("reads the document it may read");
    assert!(!read.contents.is_empty());
    let (code, data) = refused(
        peer.read_resource(ReadResourceRequestParams::new(OTHER_DOC))
            .await,
    );
    assert_eq!(code, REFUSED_CODE);
    assert_eq!(
        (data["uri"].as_str(), data["role"].as_str()),
        (Some(OTHER_DOC), Some("reader"))
    );
    assert_eq!(data["reasons"][0]["reason"], "not_allowed", "{data}");
    // A path that walks out of the allowed document is decided in its resolved form.
    let (_, data) = refused(
        peer.read_resource(ReadResourceRequestParams::new(
            "demo://resource/static/document/architecture.md/../features.md",
        ))
        .await,
    );
    assert_eq!(data["reasons"][0]["reason"], "not_allowed", "{data}");
    let prompts = peer.list_all_prompts().await.expect("lists");
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["simple-prompt"]);
    peer.get_prompt(GetPromptRequestParams::new("simple-prompt"))
        .await
        .expect("gets the prompt it may get");
    let (_, data) = refused(
        peer.get_prompt(GetPromptRequestParams::new("args-prompt"))
            .await,
    );
    assert_eq!(data["prompt"], "args-prompt", "{data}");
    assert!(proxied.close().await.success());

    // Every read and get is on record: the two allowed as an intent and an outcome, the three
    // refused as one record each.
    let trail = calls(&audit);
    let seen: Vec<(&str, &str, &str)> = trail
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap_or_default(),
                r["tool"].as_str().unwrap_or_default(),
                r["verdict"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("resources/read", ALLOWED_DOC, "allowed"),
            ("resources/read", OTHER_DOC, "denied"),
            (
                "resources/read",
                "demo://resource/static/document/architecture.md/../features.md",
                "denied"
            ),
            ("prompts/get", "simple-prompt", "allowed"),
            ("prompts/get", "args-prompt", "denied"),
        ]
    );
    let intents = records(&audit)
        .iter()
        .filter(|r| r["phase"] == "intent")
        .count();
    assert_eq!(intents, 2);
    assert!(trail.iter().all(|r| r["provider"] == "everything"));

    // A role with no resource or prompt patterns gets nothing of them, on record.
    let audit = dir.join("tools_only.jsonl");
    let args = proxy_args(
        &dir,
        "tools_only",
        "everything",
        &audit,
        &["--trust", "trusted"],
        &servers.everything(),
    );
    let proxied = Proxied::start(&args).await;
    let peer = proxied.client.peer().clone();
    assert!(peer.list_all_resources().await.expect("lists").is_empty());
    assert!(peer.list_all_prompts().await.expect("lists").is_empty());
    let (code, _) = refused(
        peer.read_resource(ReadResourceRequestParams::new(ALLOWED_DOC))
            .await,
    );
    assert_eq!(code, REFUSED_CODE);
    assert!(proxied.close().await.success());
    let trail = calls(&audit);
    assert_eq!(trail.len(), 1, "{trail:?}");
    assert_eq!(trail[0]["verdict"], "denied");
}

#[tokio::test(flavor = "current_thread")]
async fn a_client_without_a_token_sees_and_reads_no_resource_and_no_prompt_on_record() {
    let servers = require_servers!(
        "a_client_without_a_token_sees_and_reads_no_resource_and_no_prompt_on_record"
    );
    let dir = scratch("forward-no-token", &format!("{ROLES}{FORWARD}"));
    let audit = dir.join("audit.jsonl");
    let listening = Listening::start_as(
        &dir,
        &audit,
        "everything",
        &["--trust", "trusted"],
        &servers.everything(),
    )
    .await;
    // No token: nothing reaches the governed server, every answer is a 401 with the challenge,
    // and each read or get attempted is on record all the same.
    let rpc = |method: &str, params: Value| serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    for (method, params) in [
        ("resources/list", serde_json::json!({})),
        ("prompts/list", serde_json::json!({})),
        ("tools/list", serde_json::json!({})),
        ("resources/read", serde_json::json!({"uri": ALLOWED_DOC})),
        ("prompts/get", serde_json::json!({"name": "simple-prompt"})),
    ] {
        let answer = raw_post(&listening.url, &[], &rpc(method, params));
        assert_eq!(answer.status, 401, "{method}: {answer:?}");
        assert_eq!(
            answer.header("www-authenticate"),
            Some("Bearer realm=\"mcp\"")
        );
        assert!(
            !answer.body.contains("architecture"),
            "{method}: {}",
            answer.body
        );
    }
    // A token not in the table: 401, invalid_token.
    let answer = raw_post(
        &listening.url,
        &[("Authorization", "Bearer guessed")],
        &rpc("resources/read", serde_json::json!({"uri": ALLOWED_DOC})),
    );
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(
        answer
            .header("www-authenticate")
            .is_some_and(|h| h.contains("error=\"invalid_token\"")),
        "{answer:?}"
    );
    // With the reader's token, the same proxy serves the document.
    let reader = http_client(&listening.url, Some("reader-token")).await;
    reader
        .peer()
        .read_resource(ReadResourceRequestParams::new(ALLOWED_DOC))
        .await
        .expect("the reader reads");
    let _ = reader.cancel().await;
    assert!(listening.stop().await.success());
    let trail = calls(&audit);
    let seen: Vec<(&str, &str, &str)> = trail
        .iter()
        .map(|r| {
            (
                r["role"].as_str().unwrap_or_default(),
                r["method"].as_str().unwrap_or_default(),
                r["verdict"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("(none)", "resources/read", "denied"),
            ("(none)", "prompts/get", "denied"),
            ("(none)", "resources/read", "denied"),
            ("reader", "resources/read", "allowed"),
        ]
    );
    let reasons: Vec<&str> = trail[..3]
        .iter()
        .map(|r| r["reasons"][0]["reason"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(reasons, ["unauthenticated"; 3], "{trail:?}");
    assert!(
        trail[2]["reasons"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not in the policy's [bearer_tokens]"))
    );
    assert_eq!(
        trail[3]["principal"]["sub"], "token:ba5005a40cf5",
        "the reader's record names the table's entry"
    );
}
