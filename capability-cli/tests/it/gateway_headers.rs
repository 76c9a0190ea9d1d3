//! SEP-2243's headers (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) across the gateway, for a tool
//! shown under a prefix: checked on what a client of 2026-07-28 sends (against the shown tool's
//! schema, before anything is routed), written on what the gateway sends its server of
//! 2026-07-28 (the server's own tool name, the marked argument). The server
//! (`tests/python/headers_server.py`) refuses a call whose headers do not match its body, as
//! SEP-2243 requires, and keeps those it took.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use serde_json::{Value, json};

use support::{Raw, raw_post};

const TOKEN: &str = "headers-view-token";

/// A 2026-07-28 request's `_meta`.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    })
}

/// `tools/call` of `tool` with `arguments`, posted as a client of 2026-07-28 with `headers`
/// added to the transport's own.
fn call(url: &str, id: u64, tool: &str, arguments: &Value, headers: &[(&str, &str)]) -> Raw {
    let bearer = format!("Bearer {TOKEN}");
    let mut all = vec![
        ("Authorization", bearer.as_str()),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
    ];
    all.extend_from_slice(headers);
    raw_post(
        url,
        &all,
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments, "_meta": meta()}}),
    )
}

/// The one JSON-RPC message of an answer (a JSON body, or the data of an event stream).
fn message(raw: &Raw) -> Value {
    let body = raw.body.trim();
    let text = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or(body);
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {raw:?}"))
}

#[tokio::test(flavor = "current_thread")]
async fn sep_2243_headers_are_checked_inbound_and_written_outbound_for_a_prefixed_tool() {
    let (_server, port) = support::python_server("headers_server.py").await;
    let policy = format!(
        r#"version = "headers-1"
[roles.viewer]
ceiling = "read-only"
allow = ["*"]
[bearer_tokens]
"sha256:{hash}" = "viewer"
[servers.ops]
url = "http://127.0.0.1:{port}/mcp"
trust = "trusted"
prefix = "ops_"
"#,
        hash = capability_rules::sha256_hex(TOKEN.as_bytes()),
    );
    let dir = proxy_common::scratch("gateway-headers", &policy);
    let gateway = proxy_common::Listening::start_args(&proxy_common::gateway_listen(
        &dir.join("policy.toml"),
        "127.0.0.1:0",
        &dir.join("trail.jsonl"),
    ))
    .await;
    let url = gateway.url.clone();
    let eu = json!({"region": "eu"});

    // The headers match the body and the shown tool's schema: routed, and the server is sent
    // its own tool's name and the marked argument.
    let answer = call(
        &url,
        1,
        "ops_deploy",
        &eu,
        &[("Mcp-Name", "ops_deploy"), ("Mcp-Param-Region", "eu")],
    );
    let ok = message(&answer);
    assert_eq!(ok["result"]["content"][0]["text"], "deployed", "{answer:?}");

    // Each mismatch is refused at the gateway (400, -32020) and reaches no server.
    for (why, headers) in [
        (
            "another region in the header",
            vec![("Mcp-Name", "ops_deploy"), ("Mcp-Param-Region", "us")],
        ),
        ("no Mcp-Param-Region", vec![("Mcp-Name", "ops_deploy")]),
        (
            "the server's own name, not the shown one",
            vec![("Mcp-Name", "deploy"), ("Mcp-Param-Region", "eu")],
        ),
    ] {
        let refused = call(&url, 2, "ops_deploy", &eu, &headers);
        assert_eq!(refused.status, 400, "{why}: {refused:?}");
        assert_eq!(
            message(&refused)["error"]["code"],
            -32020,
            "{why}: {refused:?}"
        );
    }

    let seen = call(&url, 3, "ops_seen", &json!({}), &[("Mcp-Name", "ops_seen")]);
    let seen: Value = serde_json::from_str(
        message(&seen)["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{seen:?}")),
    )
    .expect("JSON");
    assert_eq!(
        seen,
        json!([{"method": "tools/call", "name": "deploy", "region": "eu"}]),
        "one call reached the server, under its own name with the marked argument"
    );
    gateway.stop().await;
}
