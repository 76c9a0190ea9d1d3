//! `capability proxy --listen` as an OAuth 2.1 resource server, against a real authorization
//! server (`oidc-provider`, `tests/mcp-servers/auth-server.mjs`) and the official SDKs' OAuth
//! clients (TypeScript and Python), which find the authorization server from the proxy's `401`
//! by themselves. The MCP server behind is `server-everything`.
//!
//! Tried as an attacker would: no token, an expired one, one for another audience, from another
//! issuer, signed with `alg: none`, re-signed with HMAC, a tampered signature, an opaque token;
//! a rotated signing key; a token that gives several roles; 5,000 tokenless `initialize`s; one
//! principal's denials against another's budget; a made-up session id and another principal's.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use serde_json::{Value, json};

use proxy_common::{Listening, calls, records, scratch};
use support::auth::{AuthServer, python_oauth_client};
use support::{Raw, Servers, raw_post, raw_request};

const VIEWER: (&str, &str) = ("viewer-client", "viewer-secret");
const VIEWER2: (&str, &str) = ("viewer2-client", "viewer2-secret");
const OPERATOR: (&str, &str) = ("operator-client", "operator-secret");
const SCALER: (&str, &str) = ("scaler-client", "scaler-secret");

/// The clients of the authorization server: two viewers (ES256, EdDSA), an operator (RS256,
/// both scopes), and an operator who may also scale.
fn clients() -> Value {
    json!([
        {"client_id": VIEWER.0, "client_secret": VIEWER.1, "scope": "mcp:read", "alg": "ES256"},
        {"client_id": VIEWER2.0, "client_secret": VIEWER2.1, "scope": "mcp:read", "alg": "EdDSA"},
        {"client_id": OPERATOR.0, "client_secret": OPERATOR.1, "scope": "mcp:read mcp:admin", "alg": "RS256"},
        {"client_id": SCALER.0, "client_secret": SCALER.1, "scope": "mcp:admin k8s:scale", "alg": "ES256"},
    ])
}

/// The policy: `viewer` reads, `operator` may do anything, roles from the token's scopes.
fn policy(issuer: &str, audience: &str, auth_extra: &str, http: &str) -> String {
    format!(
        r#"
[roles.viewer]
ceiling = "read-only"
allow = ["everything/*"]

[roles.operator]
ceiling = "unrestricted"
allow = ["everything/*"]

[auth]
issuer = "{issuer}"
audience = "{audience}"
leeway_secs = 0
jwks_refresh_secs = 1
{auth_extra}

[auth.scope_roles]
"mcp:read" = "viewer"
"mcp:admin" = "operator"

[http]
{http}
"#
    )
}

/// An authorization server, and the proxy in front of server-everything with its policy.
struct Setup {
    auth: AuthServer,
    proxy: Listening,
    url: String,
    trail: std::path::PathBuf,
    dir: std::path::PathBuf,
    servers: Servers,
}

async fn setup(name: &str, auth_extra: &str, http: &str, proxy_extra: &[&str]) -> Option<Setup> {
    let servers = support::require_servers(name)?;
    let dir = scratch(name, "");
    let keys = dir.join("issuer-keys.json");
    let auth = AuthServer::start(
        &servers,
        &dir,
        &json!({"port": 0, "clients": clients(), "keys": keys}),
    );
    let port = capability_testkit::free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    std::fs::write(
        dir.join("policy.toml"),
        policy(&auth.issuer, &url, auth_extra, http),
    )
    .expect("policy");
    let trail = dir.join("trail.jsonl");
    let mut extra = vec!["--trust", "trusted"];
    extra.extend_from_slice(proxy_extra);
    let proxy = Listening::start_at(
        &dir,
        &trail,
        "everything",
        &extra,
        &servers.everything(),
        &format!("127.0.0.1:{port}"),
    )
    .await;
    assert_eq!(proxy.url, url);
    Some(Setup {
        auth,
        proxy,
        url,
        trail,
        dir,
        servers,
    })
}

impl Setup {
    fn token(&self, (id, secret): (&str, &str), scope: &str) -> String {
        self.auth
            .token(id, secret, scope, Some(&self.url))
            .expect("a token")
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn call(tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
           "params": {"name": tool, "arguments": {"message": "hi"}}})
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
}

fn post_as(url: &str, token: Option<&str>, body: &Value) -> Raw {
    let auth = token.map(bearer);
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    raw_post(url, &headers, body)
}

/// The JSON lines an SDK client printed.
fn lines(output: &std::process::Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn ops((id, secret): (&str, &str), scope: &str, issuer: &str, tools: &[&str]) -> Value {
    let mut list = vec![json!({"op": "list"})];
    list.extend(
        tools
            .iter()
            .map(|t| json!({"op": "call", "name": t, "arguments": {"message": "hi"}})),
    );
    json!({"client_id": id, "client_secret": secret, "scope": scope, "issuer": issuer, "ops": list})
}

#[tokio::test(flavor = "current_thread")]
async fn the_sdk_clients_find_the_authorization_server_and_act_as_their_role() {
    let Some(s) = setup(
        "oauth-sdk",
        "role_precedence = [\"operator\", \"viewer\"]",
        "",
        &[],
    )
    .await
    else {
        return;
    };
    let tools = ["echo", "toggle-simulated-logging"];
    // The TypeScript SDK as the viewer: the read runs, the write is refused by the ceiling.
    let ts = s
        .servers
        .ts_oauth_client(
            &s.dir,
            &s.url,
            &ops(VIEWER, "mcp:read", &s.auth.issuer, &tools),
        )
        .output()
        .expect("runs node");
    let ts = lines(&ts);
    let listed: Vec<&str> = ts[0]["tools"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        listed.contains(&"echo") && !listed.contains(&"toggle-simulated-logging"),
        "{ts:?}"
    );
    assert!(ts[1]["result"].to_string().contains("hi"), "{}", ts[1]);
    assert_eq!(ts[2]["error"]["code"], -32602, "{}", ts[2]);
    // The Python SDK as the operator: both run.
    let py = python_oauth_client(
        &s.dir,
        &s.url,
        &ops(OPERATOR, "mcp:read mcp:admin", &s.auth.issuer, &tools),
    );
    let py = match py {
        Ok(mut command) => command.output().expect("runs python"),
        Err(why) if std::env::var(support::REQUIRE_ENV).as_deref() != Ok("1") => {
            println!("SKIPPED: the Python SDK client: {why}");
            return;
        }
        Err(why) => panic!("the Python SDK client: {why}"),
    };
    let py = lines(&py);
    assert!(py.iter().all(|l| l.get("error").is_none()), "{py:?}");
    assert!(
        py[0]["tools"]
            .to_string()
            .contains("toggle-simulated-logging"),
        "{py:?}"
    );
    s.proxy.stop().await;

    // Every call is on record with who made it.
    let who: Vec<(String, String, String, String)> = calls(&s.trail)
        .iter()
        .map(|r| {
            let t = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                t(&r["principal"]["sub"]),
                t(&r["principal"]["iss"]),
                t(&r["role"]),
                t(&r["verdict"]),
            )
        })
        .collect();
    let issuer = s.auth.issuer.clone();
    let row = |sub: &str, role: &str, verdict: &str| {
        (
            sub.to_owned(),
            issuer.clone(),
            role.to_owned(),
            verdict.to_owned(),
        )
    };
    assert_eq!(
        who,
        [
            row(VIEWER.0, "viewer", "allowed"),
            row(VIEWER.0, "viewer", "denied"),
            row(OPERATOR.0, "operator", "allowed"),
            row(OPERATOR.0, "operator", "allowed"),
        ]
    );
    assert!(
        records(&s.trail)
            .iter()
            .all(|r| r["session"].as_str().is_some_and(|s| s.contains(&issuer))),
        "each session is its principal's"
    );
}

/// A JWT with `header` over the payload of `token`, and `signature`.
fn forged(token: &str, header: &Value, signature: &str) -> String {
    use std::fmt::Write as _;
    let payload = token.split('.').nth(1).expect("a JWT");
    let mut encoded = String::new();
    // base64url without padding.
    let bytes = header.to_string().into_bytes();
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            let _ = write!(
                encoded,
                "{}",
                char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize])
            );
        }
    }
    format!("{encoded}.{payload}.{signature}")
}

/// What else the issuer signs with its key is no access token: a JWT typed `JWT` (an ID token,
/// say) is refused (RFC 9068), unless `[auth] allow_typ_jwt` says the issuer cannot type its
/// access tokens; a token without `sub` is refused rather than take its identity from
/// `client_id`, where it would become the user whose `sub` that is.
#[tokio::test(flavor = "current_thread")]
async fn an_issuers_jwt_that_is_not_an_access_token_or_names_no_subject_gets_401() {
    let Some(s) = setup("oauth-typ", "", "", &[]).await else {
        return;
    };
    let keys = s.dir.join("issuer-keys.json");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let claims = |sub: Option<&str>| {
        let mut claims = json!({"iss": s.auth.issuer, "aud": s.url, "client_id": VIEWER.0,
            "scope": "mcp:read", "iat": now, "exp": now + 300});
        if let Some(sub) = sub {
            claims["sub"] = json!(sub);
        }
        claims
    };
    let mint = |typ: &str, claims: &Value| {
        AuthServer::mint(
            &s.servers,
            &keys,
            &json!({"alg": "ES256", "typ": typ}),
            claims,
        )
    };
    // The same claims as an access token, typed `at+jwt`: taken (the key and claims are good).
    let typed = mint("at+jwt", &claims(Some(VIEWER.0)));
    assert_eq!(post_as(&s.url, Some(&typed), &initialize()).status, 200);
    let untyped = mint("JWT", &claims(Some(VIEWER.0)));
    let answer = post_as(&s.url, Some(&untyped), &call("echo"));
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(
        answer.body.contains("`typ: JWT`, not `at+jwt`"),
        "{answer:?}"
    );
    // No `sub`: its `client_id` would make it another principal.
    let subjectless = mint("at+jwt", &claims(None));
    let answer = post_as(&s.url, Some(&subjectless), &call("echo"));
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(answer.body.contains("names no subject"), "{answer:?}");
    let refusals: Vec<String> = calls(&s.trail)
        .iter()
        .filter(|r| r["reasons"][0]["reason"] == "unauthenticated")
        .map(|r| r["reasons"][0].to_string())
        .collect();
    assert_eq!(refusals.len(), 2, "each refusal is on record: {refusals:?}");
    assert!(
        refusals[0].contains("at+jwt") && refusals[1].contains("no subject"),
        "{refusals:?}"
    );

    // An operator who opts in for an issuer that cannot type its tokens.
    let opted = setup("oauth-typ-allowed", "allow_typ_jwt = true", "", &[]).await;
    let Some(o) = opted else { return };
    let claims = json!({"iss": o.auth.issuer, "aud": o.url, "sub": VIEWER.0, "scope": "mcp:read",
        "iat": now, "exp": now + 300});
    let keys = o.dir.join("issuer-keys.json");
    let untyped = AuthServer::mint(
        &o.servers,
        &keys,
        &json!({"alg": "ES256", "typ": "JWT"}),
        &claims,
    );
    assert_eq!(post_as(&o.url, Some(&untyped), &initialize()).status, 200);
    let other = AuthServer::mint(
        &o.servers,
        &keys,
        &json!({"alg": "ES256", "typ": "dpop+jwt"}),
        &claims,
    );
    assert_eq!(post_as(&o.url, Some(&other), &initialize()).status, 401);
}

#[tokio::test(flavor = "current_thread")]
async fn tokens_that_are_not_valid_get_401_and_each_call_is_on_record() {
    let Some(s) = setup("oauth-bad-tokens", "", "", &[]).await else {
        return;
    };
    // The challenge points at the metadata, and the metadata at the authorization server.
    let answer = post_as(&s.url, None, &call("echo"));
    assert_eq!(answer.status, 401, "{answer:?}");
    let port = s
        .url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp");
    let metadata = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    assert_eq!(
        answer.header("www-authenticate"),
        Some(format!("Bearer resource_metadata=\"{metadata}\"").as_str())
    );
    let document = raw_request("GET", &metadata, &[], "");
    let document: Value = serde_json::from_str(&document.body).expect("JSON");
    assert_eq!(document["resource"], s.url.as_str());
    assert_eq!(document["authorization_servers"], json!([s.auth.issuer]));

    let good = s.token(VIEWER, "mcp:read");
    // One character in the middle of the signature changed: still base64url, other bytes.
    let (head, signature) = good.rsplit_once('.').expect("a JWT");
    let mut chars: Vec<char> = signature.chars().collect();
    chars[10] = if chars[10] == 'A' { 'B' } else { 'A' };
    let tampered = format!("{head}.{}", chars.into_iter().collect::<String>());
    let none = forged(&good, &json!({"alg": "none", "typ": "at+jwt"}), "");
    let hmac = forged(
        &good,
        &json!({"alg": "HS256", "typ": "at+jwt"}),
        "c2lnbmF0dXJl",
    );
    let elsewhere = s
        .auth
        .token(
            VIEWER.0,
            VIEWER.1,
            "mcp:read",
            Some("http://127.0.0.1:1/elsewhere"),
        )
        .expect("a token for another resource");
    let opaque = s
        .auth
        .token(VIEWER.0, VIEWER.1, "mcp:read", None)
        .expect("an opaque token");
    let other = AuthServer::start(
        &s.servers,
        &s.dir,
        &json!({"port": 0, "clients": clients()}),
    );
    let foreign = other
        .token(VIEWER.0, VIEWER.1, "mcp:read", Some(&s.url))
        .expect("a token of another issuer");
    // Signed by the issuer's key for this audience, its `exp` a minute ago: an expired access
    // token without waiting for one to run out (the expiry to the second, on the resource
    // server's clock: capability-http's auth::jwt tests).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let short = AuthServer::mint(
        &s.servers,
        &s.dir.join("issuer-keys.json"),
        &json!({"alg": "ES256", "typ": "at+jwt"}),
        &json!({"iss": s.auth.issuer, "aud": s.url, "sub": VIEWER.0, "client_id": VIEWER.0,
            "scope": "mcp:read", "iat": now - 120, "exp": now - 60}),
    );

    for (what, token, says) in [
        ("expired", short.as_str(), "expired"),
        ("another audience", elsewhere.as_str(), "another audience"),
        ("another issuer", foreign.as_str(), "does not publish"),
        ("alg none", none.as_str(), "not a signed JWT"),
        ("HMAC", hmac.as_str(), "not among the algorithms"),
        ("tampered", tampered.as_str(), "signature does not verify"),
        ("opaque", opaque.as_str(), "not a signed JWT"),
    ] {
        let answer = post_as(&s.url, Some(token), &call("echo"));
        assert_eq!(answer.status, 401, "{what}: {answer:?}");
        let challenge = answer.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.contains("error=\"invalid_token\"") && challenge.contains(says),
            "{what}: {challenge}"
        );
    }
    // The good token passes the edge.
    let answer = post_as(&s.url, Some(&good), &initialize());
    assert_eq!(answer.status, 200, "{answer:?}");
    s.proxy.stop().await;
    other.stop();

    let refused: Vec<(String, String)> = calls(&s.trail)
        .iter()
        .map(|r| {
            (
                r["reasons"][0]["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                r["role"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        refused,
        vec![("unauthenticated".to_owned(), "(none)".to_owned()); 8],
        "the tokenless call and the seven bad tokens"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_rotated_signing_key_is_picked_up_and_the_retired_one_refused() {
    let Some(s) = setup("oauth-rotation", "", "", &[]).await else {
        return;
    };
    let port = s.auth.port;
    let first = s.token(VIEWER, "mcp:read");
    assert_eq!(post_as(&s.url, Some(&first), &initialize()).status, 200);
    let Setup {
        auth,
        proxy,
        url,
        dir,
        servers,
        ..
    } = s;
    auth.stop();
    // The same issuer again, with new keys (new `kid`s).
    let rotated = AuthServer::start(
        &servers,
        &dir,
        &json!({"port": port, "clients": clients(), "keys": dir.join("rotated-keys.json")}),
    );
    let second = rotated
        .token(VIEWER.0, VIEWER.1, "mcp:read", Some(&url))
        .expect("a token of the new key");
    // Past the refresh interval (1 s), an unknown `kid` makes the proxy fetch the keys again:
    // refused until then (the keys are not fetched for every unknown `kid`), taken after.
    let taken = capability_testkit::wait_for(|| {
        let status = post_as(&url, Some(&second), &initialize()).status;
        assert!(status == 200 || status == 401, "{status}");
        status == 200
    });
    assert!(taken, "the new key was never fetched");
    // The retired key is gone from the issuer's keys: a token of it is refused now, though it
    // was taken before (what was verified under the old keys is verified again).
    let answer = post_as(&url, Some(&first), &call("echo"));
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(
        answer
            .header("www-authenticate")
            .unwrap_or_default()
            .contains("does not publish"),
        "{answer:?}"
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_token_of_several_roles_is_refused_unless_the_policy_says_which() {
    let Some(s) = setup("oauth-several-roles", "", "", &[]).await else {
        return;
    };
    let both = s.token(OPERATOR, "mcp:read mcp:admin");
    let answer = post_as(&s.url, Some(&both), &call("echo"));
    assert_eq!(answer.status, 403, "{answer:?}");
    let challenge = answer.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.contains("several roles (operator, viewer)") && !challenge.contains("error="),
        "{challenge}"
    );
    // A token of one role passes.
    let read = s.token(OPERATOR, "mcp:read");
    assert_eq!(post_as(&s.url, Some(&read), &initialize()).status, 200);
    s.proxy.stop().await;
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "current_thread")]
async fn tokenless_initializes_make_no_session_and_sessions_are_capped() {
    let Some(s) = setup(
        "oauth-flood",
        "",
        "max_sessions_per_principal = 2\nrate_burst = 1000000\nrate_per_second = 1000000",
        &[],
    )
    .await
    else {
        return;
    };
    let pid = s.proxy.child.id().expect("running");
    let before = rss_kib(pid);
    for i in 0..5_000 {
        let answer = post_as(&s.url, None, &initialize());
        assert_eq!(answer.status, 401, "request {i}: {answer:?}");
        assert!(answer.header("mcp-session-id").is_none());
    }
    let after = rss_kib(pid);
    assert!(
        after < before + 20 * 1024,
        "RSS grew from {before} KiB to {after} KiB for 5,000 refused requests"
    );
    // With a token: two sessions, then no third.
    let token = s.token(VIEWER, "mcp:read");
    for _ in 0..2 {
        let answer = post_as(&s.url, Some(&token), &initialize());
        assert_eq!(answer.status, 200, "{answer:?}");
        assert!(answer.header("mcp-session-id").is_some());
    }
    let third = post_as(&s.url, Some(&token), &initialize());
    assert_eq!(third.status, 429, "{third:?}");
    assert!(third.header("retry-after").is_some());
    assert!(
        third.body.contains("max_sessions_per_principal"),
        "{}",
        third.body
    );
    // Another principal has its own.
    let other = s.token(VIEWER2, "mcp:read");
    assert_eq!(post_as(&s.url, Some(&other), &initialize()).status, 200);
    s.proxy.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_session_id_counts_only_for_the_principal_it_was_issued_to() {
    let Some(s) = setup("oauth-sessions", "", "", &[]).await else {
        return;
    };
    let alice = s.token(VIEWER, "mcp:read");
    let bob = s.token(VIEWER2, "mcp:read");
    let answer = post_as(&s.url, Some(&alice), &initialize());
    let session = answer
        .header("mcp-session-id")
        .expect("a session")
        .to_owned();
    let with = |token: &str, id: &str| {
        let auth = bearer(token);
        raw_post(
            &s.url,
            &[
                ("Authorization", auth.as_str()),
                ("Mcp-Session-Id", id),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            &call("echo"),
        )
    };
    let stolen = with(&bob, &session);
    assert_eq!(stolen.status, 403, "{stolen:?}");
    assert!(
        stolen.body.contains("issued to another caller"),
        "{}",
        stolen.body
    );
    let made_up = with(&alice, "made-up-session");
    assert_eq!(made_up.status, 404, "{made_up:?}");
    s.proxy.stop().await;
    assert!(
        records(&s.trail).iter().all(|r| !r["session"]
            .as_str()
            .unwrap_or_default()
            .contains("made-up")),
        "a session id the edge did not issue is never recorded"
    );
}

/// An rmcp client of protocol 2026-07-28 (no session: every request stands alone) with a
/// bearer token.
async fn modern_client(
    url: &str,
    token: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig> {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    rmcp::model::ClientConfig::default()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("connects")
}

async fn call_tool(
    client: &rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig>,
    tool: &str,
) -> Result<(), rmcp::ErrorData> {
    let mut request = rmcp::model::CallToolRequestParams::new(tool.to_owned());
    request.arguments = json!({"message": "hi"}).as_object().cloned();
    match client.peer().call_tool(request).await {
        Ok(_) => Ok(()),
        Err(rmcp::ServiceError::McpError(error)) => Err(error),
        Err(other) => panic!("{other}"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn one_principal_degrading_leaves_another_of_its_role_alone() {
    let Some(s) = setup("oauth-budgets", "", "", &["--max-denials", "1"]).await else {
        return;
    };
    let alice = s.token(VIEWER, "mcp:read");
    let bob = s.token(VIEWER2, "mcp:read");
    // Alice's second denial degrades her; a new connection of hers is still degraded (her
    // budget is the principal's, with no session to start afresh).
    let first = modern_client(&s.url, &alice).await;
    for _ in 0..2 {
        call_tool(&first, "toggle-simulated-logging")
            .await
            .expect_err("denied");
    }
    let _ = first.cancel().await;
    let again = modern_client(&s.url, &alice).await;
    let degraded = call_tool(&again, "echo").await.expect_err("degraded");
    assert!(degraded.message.contains("degrade"), "{degraded:?}");
    let _ = again.cancel().await;
    // Bob, of the same role, is not.
    let other = modern_client(&s.url, &bob).await;
    call_tool(&other, "echo").await.expect("bob's read runs");
    let _ = other.cancel().await;
    s.proxy.stop().await;
    let verdicts: Vec<(String, String)> = calls(&s.trail)
        .iter()
        .map(|r| {
            (
                r["principal"]["sub"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                r["verdict"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let row = |who: &str, v: &str| (who.to_owned(), v.to_owned());
    assert_eq!(
        verdicts,
        [
            row(VIEWER.0, "denied"),
            row(VIEWER.0, "degraded"),
            row(VIEWER.0, "degraded"),
            row(VIEWER2.0, "allowed"),
        ]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn origin_body_and_rate_limits_answer_before_anything_runs() {
    let Some(s) = setup(
        "oauth-limits",
        "",
        "allowed_origins = [\"http://localhost:3000\"]\nmax_body_bytes = 2048\nrate_burst = 3\nrate_per_second = 1",
        &[],
    )
    .await
    else {
        return;
    };
    let evil = raw_post(&s.url, &[("Origin", "http://evil.example")], &initialize());
    assert_eq!(evil.status, 403, "{evil:?}");
    let friend = raw_post(
        &s.url,
        &[("Origin", "http://localhost:3000")],
        &initialize(),
    );
    assert_eq!(
        friend.status, 401,
        "an allowed Origin goes on to authentication: {friend:?}"
    );
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"message": "x".repeat(4096)}}});
    assert_eq!(post_as(&s.url, None, &big).status, 413);
    let token = s.token(VIEWER, "mcp:read");
    let statuses: Vec<u16> = (0..4)
        .map(|_| post_as(&s.url, Some(&token), &call("echo")).status)
        .collect();
    assert_eq!(statuses[3], 429, "{statuses:?}");
    assert!(statuses[..3].iter().all(|s| *s != 429), "{statuses:?}");
    let limited = post_as(&s.url, Some(&token), &call("echo"));
    assert!(
        limited
            .header("retry-after")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n >= 1),
        "{limited:?}"
    );
    s.proxy.stop().await;
    let limits = calls(&s.trail)
        .iter()
        .filter(|r| r["reasons"][0]["reason"] == "limited")
        .count();
    assert_eq!(limits, 2, "the calls over the rate are on record");
}

#[tokio::test(flavor = "current_thread")]
async fn a_clients_token_never_reaches_the_upstream_server() {
    let Some(servers) =
        support::require_servers("a_clients_token_never_reaches_the_upstream_server")
    else {
        return;
    };
    // The upstream: another proxy, over HTTP, that knows one token only: the front proxy's own.
    let dir = scratch("oauth-upstream", "");
    let upstream_dir = dir.join("upstream");
    std::fs::create_dir_all(&upstream_dir).expect("dir");
    let secret = "upstream-secret-of-the-front-proxy";
    let hash = capability_rules::sha256_hex(secret.as_bytes());
    std::fs::write(
        upstream_dir.join("policy.toml"),
        format!(
            "[roles.operator]\nceiling = \"unrestricted\"\nallow = [\"everything/*\"]\n\n\
             [bearer_tokens]\n\"sha256:{hash}\" = \"operator\"\n"
        ),
    )
    .expect("policy");
    let upstream_trail = upstream_dir.join("trail.jsonl");
    let upstream = Listening::start_as(
        &upstream_dir,
        &upstream_trail,
        "everything",
        &["--trust", "trusted"],
        &servers.everything(),
    )
    .await;

    let keys = dir.join("issuer-keys.json");
    let auth = AuthServer::start(
        &servers,
        &dir,
        &json!({"port": 0, "clients": clients(), "keys": keys}),
    );
    let port = capability_testkit::free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    std::fs::write(dir.join("policy.toml"), policy(&auth.issuer, &url, "", "")).expect("policy");
    let token_file = dir.join("upstream.token");
    std::fs::write(&token_file, format!("{secret}\n")).expect("token file");
    let trail = dir.join("trail.jsonl");
    let arg = |p: &std::path::Path| p.display().to_string();
    let front = Listening::start_args(&front_args(
        &dir,
        port,
        &trail,
        &upstream.url,
        &token_file,
        &[],
    ))
    .await;
    let jwt = auth
        .token(VIEWER.0, VIEWER.1, "mcp:read", Some(&url))
        .expect("a token");
    let client = modern_client(&url, &jwt).await;
    call_tool(&client, "echo")
        .await
        .expect("echo runs through both proxies");
    let _ = client.cancel().await;
    front.stop().await;
    upstream.stop().await;

    // The upstream saw the front proxy's credential, never the client's token.
    let seen = std::fs::read_to_string(&upstream_trail).expect("the upstream's trail");
    assert!(
        !seen.contains(&jwt),
        "the client's token reached the upstream"
    );
    let echo = calls(&upstream_trail)
        .into_iter()
        .find(|r| r["tool"] == "echo")
        .expect("the upstream ran echo");
    assert_eq!(echo["principal"]["sub"], format!("token:{}", &hash[..12]));
    // The front recorded the client.
    let front_echo = calls(&trail)
        .into_iter()
        .find(|r| r["tool"] == "echo")
        .expect("the front recorded echo");
    assert_eq!(front_echo["principal"]["sub"], VIEWER.0);

    // Without its own credential the front proxy cannot reach the upstream at all.
    let refused = std::process::Command::new(proxy_common::BIN)
        .args([
            "proxy",
            "--policy",
            &arg(&dir.join("policy.toml")),
            "--server",
            "everything",
            "--listen",
            "127.0.0.1:0",
            "--audit",
            &arg(&dir.join("other.jsonl")),
            "--upstream",
            "http://127.0.0.1:1/mcp",
            "--upstream-token-file",
            &arg(&dir.join("missing.token")),
        ])
        .output()
        .expect("runs");
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("missing.token"));
}

/// `capability proxy` over HTTP on `port`, in front of the HTTP server `upstream` (reached with
/// the token in `token_file`), with the policy of `dir`, and `extra` arguments.
fn front_args(
    dir: &std::path::Path,
    port: u16,
    trail: &std::path::Path,
    upstream: &str,
    token_file: &std::path::Path,
    extra: &[&str],
) -> Vec<String> {
    let arg = |p: &std::path::Path| p.display().to_string();
    let mut args: Vec<String> = vec![
        "proxy".into(),
        "--policy".into(),
        arg(&dir.join("policy.toml")),
        "--server".into(),
        "everything".into(),
        "--trust".into(),
        "trusted".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--audit".into(),
        arg(trail),
        "--upstream".into(),
        upstream.to_owned(),
        "--upstream-token-file".into(),
        arg(token_file),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

const EXCHANGER: (&str, &str) = ("proxy-client", "proxy-secret");

#[tokio::test(flavor = "current_thread")]
async fn calls_on_the_callers_behalf_carry_a_token_exchanged_for_the_upstream() {
    let Some(servers) = support::require_servers("calls_on_the_callers_behalf") else {
        return;
    };
    let dir = scratch("oauth-exchange", "");
    let mut registered = clients();
    registered.as_array_mut().expect("clients").push(json!({
        "client_id": EXCHANGER.0, "client_secret": EXCHANGER.1, "scope": "mcp:read",
        "alg": "RS256", "exchange": true,
    }));
    let auth = AuthServer::start(
        &servers,
        &dir,
        &json!({"port": 0, "clients": registered,
                "exchange_log": dir.join("exchanges.log").display().to_string()}),
    );

    // The upstream: a proxy that is itself a resource server of the same issuer, for its own
    // audience.
    let upstream_dir = dir.join("upstream");
    std::fs::create_dir_all(&upstream_dir).expect("dir");
    let upstream_port = capability_testkit::free_port();
    let upstream_url = format!("http://127.0.0.1:{upstream_port}/mcp");
    std::fs::write(
        upstream_dir.join("policy.toml"),
        policy(&auth.issuer, &upstream_url, "", ""),
    )
    .expect("policy");
    let upstream_trail = upstream_dir.join("trail.jsonl");
    let upstream = Listening::start_at(
        &upstream_dir,
        &upstream_trail,
        "everything",
        &["--trust", "trusted"],
        &servers.everything(),
        &format!("127.0.0.1:{upstream_port}"),
    )
    .await;

    // The front: its own token (for listing) and its exchange client's secret, in files.
    let own = auth
        .token(EXCHANGER.0, EXCHANGER.1, "mcp:read", Some(&upstream_url))
        .expect("the front's own token");
    let token_file = dir.join("upstream.token");
    std::fs::write(&token_file, &own).expect("token file");
    let secret_file = dir.join("exchange.secret");
    std::fs::write(&secret_file, EXCHANGER.1).expect("secret file");
    let port = capability_testkit::free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    std::fs::write(dir.join("policy.toml"), policy(&auth.issuer, &url, "", "")).expect("policy");
    let trail = dir.join("trail.jsonl");
    let arg = |p: &std::path::Path| p.display().to_string();
    let front = Listening::start_args(&front_args(
        &dir,
        port,
        &trail,
        &upstream_url,
        &token_file,
        &[
            "--upstream-exchange-client",
            EXCHANGER.0,
            "--upstream-exchange-secret-file",
            &arg(&secret_file),
        ],
    ))
    .await;

    // Two callers: each call reaches the upstream as that caller.
    let mut tokens = Vec::new();
    for who in [VIEWER, VIEWER2] {
        let jwt = auth
            .token(who.0, who.1, "mcp:read", Some(&url))
            .expect("a token");
        let client = modern_client(&url, &jwt).await;
        call_tool(&client, "echo")
            .await
            .expect("echo on the caller's behalf");
        call_tool(&client, "echo")
            .await
            .expect("again, with the token exchanged before");
        let _ = client.cancel().await;
        tokens.push(jwt);
    }
    // A long call on the caller's behalf (the TypeScript client, the first caller's token,
    // already exchanged): the upstream's progress comes back over the caller's own connection.
    let output = servers
        .ts_client(
            &support::long_call_with_progress("trigger-long-running-operation"),
            support::TsTarget::Http {
                url: &url,
                token: Some(&tokens[0]),
            },
        )
        .output()
        .expect("runs the client");
    let lines = support::ts_client_lines(&output).expect("the client ran");
    support::assert_heard_the_long_calls_progress(&lines[1]);
    // The caller's own token is for the front's audience: the upstream refuses it.
    let direct = post_as(&upstream_url, Some(&tokens[0]), &initialize());
    assert_eq!(direct.status, 401, "{direct:?}");
    front.stop().await;
    upstream.stop().await;

    let seen = std::fs::read_to_string(&upstream_trail).expect("the upstream's trail");
    for jwt in &tokens {
        assert!(
            !seen.contains(jwt.as_str()),
            "a client's token reached the upstream"
        );
    }
    let echoes: Vec<Value> = calls(&upstream_trail)
        .into_iter()
        .filter(|r| r["tool"] == "echo")
        .collect();
    let callers: Vec<(&str, &str)> = echoes
        .iter()
        .map(|r| {
            (
                r["principal"]["sub"].as_str().unwrap_or_default(),
                r["principal"]["client_id"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        callers,
        [
            (VIEWER.0, EXCHANGER.0),
            (VIEWER.0, EXCHANGER.0),
            (VIEWER2.0, EXCHANGER.0),
            (VIEWER2.0, EXCHANGER.0),
        ],
        "the upstream knows each caller, and the proxy as the client acting for it"
    );
    // One exchange per caller's token, not per call: the issuer logged two for four calls.
    let exchanges = std::fs::read_to_string(dir.join("exchanges.log")).expect("the issuer's log");
    assert_eq!(
        exchanges.lines().collect::<Vec<_>>(),
        [VIEWER.0, VIEWER2.0],
        "{exchanges}"
    );
    assert!(echoes.iter().all(|r| r["role"] == "viewer"), "{echoes:#?}");
    let front_echoes: Vec<Value> = calls(&trail)
        .into_iter()
        .filter(|r| r["tool"] == "echo")
        .collect();
    assert_eq!(front_echoes.len(), 4);
    assert!(
        front_echoes.iter().all(|r| r["success"] == true),
        "{front_echoes:#?}"
    );

    // A client the issuer does not let exchange: the proxy starts, the call fails saying why,
    // nothing reaches the upstream on the caller's behalf, and the proxy keeps serving.
    let upstream = Listening::start_at(
        &upstream_dir,
        &upstream_trail,
        "everything",
        &["--trust", "trusted"],
        &servers.everything(),
        &format!("127.0.0.1:{upstream_port}"),
    )
    .await;
    let not_allowed = dir.join("viewer.secret");
    std::fs::write(&not_allowed, VIEWER.1).expect("secret file");
    let front = Listening::start_args(&front_args(
        &dir,
        port,
        &dir.join("refused.jsonl"),
        &upstream_url,
        &token_file,
        &[
            "--upstream-exchange-client",
            VIEWER.0,
            "--upstream-exchange-secret-file",
            &arg(&not_allowed),
        ],
    ))
    .await;
    let jwt = auth
        .token(VIEWER2.0, VIEWER2.1, "mcp:read", Some(&url))
        .expect("a token");
    let client = modern_client(&url, &jwt).await;
    let error = call_tool(&client, "echo")
        .await
        .expect_err("not exchanged, not called");
    assert!(
        error.message.contains("could not be exchanged")
            && error.message.contains("the issuer refused the exchange")
            && error.message.contains("not allowed for this client"),
        "{error:?}"
    );
    call_tool(&client, "echo").await.expect_err("still refused");
    let listed = client
        .list_all_tools()
        .await
        .expect("the proxy still serves");
    assert!(listed.iter().any(|t| t.name == "echo"));
    let _ = client.cancel().await;
    front.stop().await;
    upstream.stop().await;
    let upstream_echoes = calls(&upstream_trail)
        .into_iter()
        .filter(|r| r["tool"] == "echo")
        .count();
    assert_eq!(upstream_echoes, 4, "nothing more reached the upstream");
    let outcome = calls(&dir.join("refused.jsonl"))
        .into_iter()
        .find(|r| r["tool"] == "echo")
        .expect("the front recorded the call");
    assert_eq!(outcome["success"], false);

    // Without --listen and [auth] there is no caller's token to exchange: refused at setup.
    let refused = std::process::Command::new(proxy_common::BIN)
        .args([
            "proxy",
            "--policy",
            &arg(&dir.join("policy.toml")),
            "--server",
            "everything",
            "--audit",
            &arg(&dir.join("other.jsonl")),
            "--role",
            "viewer",
            "--upstream",
            &upstream_url,
            "--upstream-exchange-client",
            VIEWER.0,
            "--upstream-exchange-secret-file",
            &arg(&secret_file),
        ])
        .output()
        .expect("runs");
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("needs `--listen`"),
        "{refused:?}"
    );
}

/// A stdio MCP server in plain Python: `scale` needs the scope `k8s:scale` (its `_meta` says
/// so), `status` none; journals each line it reads to `$JOURNAL`.
const SCALED: &str = r#"
import json, os, sys
journal = open(os.environ["JOURNAL"], "a", buffering=1)
def send(message):
    message["jsonrpc"] = "2.0"
    sys.stdout.write(json.dumps(message) + "\n"); sys.stdout.flush()
scale = {"name": "scale", "inputSchema": {"type": "object"},
         "annotations": {"readOnlyHint": False, "destructiveHint": False},
         "_meta": {"dev.capability/manifest": {"scopes": ["k8s:scale"]}}}
status = {"name": "status", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
for line in sys.stdin:
    journal.write(line)
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"id": id, "result": {"protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "scaled", "version": "1"}}})
    elif method == "tools/list":
        send({"id": id, "result": {"tools": [scale, status]}})
    elif method == "tools/call":
        send({"id": id, "result": {"content": [{"type": "text", "text": "did " + message["params"]["name"]}]}})
    elif method == "ping":
        send({"id": id, "result": {}})
    elif id is not None and method is not None:
        send({"id": id, "error": {"code": -32601, "message": "no"}})
"#;

#[tokio::test(flavor = "current_thread")]
async fn the_gateway_answers_403_insufficient_scope_for_a_fleet_tool_and_records_its_server() {
    let Some(servers) = support::require_servers("gateway-oauth-scope") else {
        return;
    };
    let dir = scratch("gateway-oauth-scope", "");
    let keys = dir.join("issuer-keys.json");
    let auth = AuthServer::start(
        &servers,
        &dir,
        &json!({"port": 0, "clients": clients(), "keys": keys}),
    );
    let port = capability_testkit::free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    std::fs::write(dir.join("scaled.py"), SCALED).expect("server");
    let journal = dir.join("journal.jsonl");
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            r#"
[roles.operator]
ceiling = "unrestricted"
allow = ["scaled/*"]
scopes = ["k8s:scale"]

[auth]
issuer = "{issuer}"
audience = "{url}"

[auth.scope_roles]
"mcp:admin" = "operator"

[servers.scaled]
command = ["python3", {script:?}]
env = {{ JOURNAL = {journal:?} }}
prefix = "k8s_"
"#,
            issuer = auth.issuer,
            script = dir.join("scaled.py").display().to_string(),
            journal = journal.display().to_string(),
        ),
    )
    .expect("policy");
    let trail = dir.join("trail.jsonl");
    let gateway = Listening::start_args(&proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        &format!("127.0.0.1:{port}"),
        &trail,
    ))
    .await;
    assert_eq!(gateway.url, url);

    // Without the tool's scope: refused at the edge, naming it, before any MCP message runs.
    let admin = auth
        .token(OPERATOR.0, OPERATOR.1, "mcp:admin", Some(&url))
        .expect("a token");
    let answer = post_as(&url, Some(&admin), &call("k8s_scale"));
    assert_eq!(answer.status, 403, "{answer:?}");
    let challenge = answer.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.contains(r#"error="insufficient_scope""#) && challenge.contains("k8s:scale"),
        "{challenge}"
    );

    // With it (the role holds it, and so does the token), the official TypeScript client's call
    // runs; a tool of no scope runs for both.
    let scaler = auth
        .token(SCALER.0, SCALER.1, "mcp:admin k8s:scale", Some(&url))
        .expect("a token");
    let ops = json!([
        {"op": "call", "name": "k8s_scale", "arguments": {}},
        {"op": "call", "name": "k8s_status", "arguments": {}},
    ]);
    let run = |token: &str| {
        let output = servers
            .ts_client(
                &ops,
                support::TsTarget::Http {
                    url: &url,
                    token: Some(token),
                },
            )
            .output()
            .expect("runs the client");
        support::ts_client_lines(&output).expect("the client ran")
    };
    let as_scaler = run(&scaler);
    assert_eq!(
        as_scaler[1]["result"]["content"][0]["text"], "did scale",
        "{as_scaler:?}"
    );
    let as_admin = run(&admin);
    assert!(as_admin[1].get("error").is_some(), "{as_admin:?}");
    assert_eq!(as_admin[2]["result"]["content"][0]["text"], "did status");
    assert_eq!(gateway.stop().await.code(), Some(0));

    let scaled: Vec<String> = std::fs::read_to_string(&journal)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"]["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        scaled,
        ["scale", "status", "status"],
        "only the call with the scope reached the server"
    );
    let refused: Vec<(String, String, String)> = calls(&trail)
        .iter()
        .filter(|r| r["tool"] == "scale" && r["verdict"] == "denied")
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (text("provider"), text("role"), r["reasons"].to_string())
        })
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    for (provider, role, reasons) in &refused {
        assert_eq!(provider, "scaled", "the tool's own server on record");
        assert_eq!(role, "operator");
        assert!(reasons.contains("k8s:scale"), "{reasons}");
    }
}
