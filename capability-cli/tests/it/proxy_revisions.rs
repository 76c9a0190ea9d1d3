//! `capability proxy` in front of servers of both protocol revisions the project speaks: one
//! that knows only `server/discover` (2026-07-28) and one that knows only `initialize`
//! (2025-11-25). Both are small `sh` servers, so each revision is the only one on offer; the
//! client is rmcp's. (The client side of both revisions is `proxy_drift.rs`.)

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use proxy_common::{Proxied, proxy_args, scratch, summary, triple, verifies};
use serde_json::json;

const POLICY: &str = r#"
[roles.viewer]
ceiling = "read-only"
allow = ["modern/*", "legacy/*"]
"#;

const TOOLS: &str = r#"[{"name":"peek","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},{"name":"poke","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}]"#;

/// An `sh` MCP server answering line by line; `handshake` holds the `case` arms of its
/// revision. Every `tools/call` is answered `called`, and appended to `calls` (a file), so a
/// test sees what reached the server.
fn sh_server(handshake: &str, calls: &std::path::Path, result_extra: &str) -> support::McpServer {
    let script = format!(
        r#"reply() {{ printf '{{"jsonrpc":"2.0","id":%s,%s}}\n' "$1" "$2"; }}
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^[^{{]*{{[^{{]*"id":\([0-9][0-9]*\|"[^"]*"\).*/\1/p')
  case "$line" in
{handshake}
    *'"method":"tools/list"'*) reply "$id" '"result":{{{result_extra}"tools":{TOOLS}}}' ;;
    *'"method":"tools/call"'*) printf '%s\n' "$line" >> '{calls}'; reply "$id" '"result":{{{result_extra}"content":[{{"type":"text","text":"called"}}]}}' ;;
  esac
done"#,
        calls = calls.display()
    );
    support::McpServer {
        name: "sh",
        program: "sh".into(),
        args: vec!["-c".to_owned(), script],
        env: Vec::new(),
    }
}

const MODERN: &str = r#"    *'"method":"server/discover"'*) reply "$id" '"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"sh-modern","version":"2.0.0"}}}' ;;
    *'"method":"initialize"'*) reply "$id" '"error":{"code":-32601,"message":"Method not found"}' ;;"#;

const LEGACY: &str = r#"    *'"method":"server/discover"'*) reply "$id" '"error":{"code":-32601,"message":"Method not found"}' ;;
    *'"method":"initialize"'*) reply "$id" '"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"sh-legacy","version":"1.0.0"}}' ;;"#;

#[tokio::test(flavor = "current_thread")]
async fn servers_of_both_revisions_are_governed_behind_the_proxy() {
    for (server, handshake, result_extra) in [
        ("modern", MODERN, r#""resultType":"complete","#),
        ("legacy", LEGACY, ""),
    ] {
        let dir = scratch(&format!("revisions-{server}"), POLICY);
        let calls = dir.join("calls.log");
        let audit = dir.join("audit.jsonl");
        let upstream = sh_server(handshake, &calls, result_extra);
        let args = proxy_args(
            &dir,
            "viewer",
            server,
            &audit,
            &["--trust", "trusted"],
            &upstream,
        );
        let proxied = Proxied::start(&args).await;

        assert_eq!(
            proxied.names().await,
            ["peek"],
            "{server}: the viewer's list"
        );
        let peeked = proxied.call("peek", json!({})).await;
        assert!(
            peeked.as_ref().is_ok_and(|text| text.contains("called")),
            "{server}: {peeked:?}"
        );
        let poked = proxied.call("poke", json!({})).await;
        let refused = poked.expect_err("a destructive tool is refused to a read-only role");
        assert!(refused.message.contains("refused"), "{server}: {refused:?}");

        let status = proxied.close().await;
        assert!(status.success(), "{server}: {status}");
        let reached = std::fs::read_to_string(&calls).unwrap_or_default();
        assert_eq!(
            reached.lines().count(),
            1,
            "{server}: only `peek` reached it: {reached}"
        );
        assert!(reached.contains(r#""name":"peek""#), "{server}: {reached}");
        assert_eq!(
            summary(&audit),
            [
                triple("viewer", "peek", "allowed"),
                triple("viewer", "poke", "denied")
            ],
            "{server}"
        );
        verifies(&audit);
    }
}
