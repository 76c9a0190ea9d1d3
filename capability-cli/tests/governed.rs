//! The governed client on a real MCP reference server: the role sees only what the policy
//! shows, and a call it may not make is refused before it reaches the server.

mod support;

use std::process::Stdio;
use std::sync::Arc;

use capability::rmcp::{GovernedClient, GovernedError, connect_client};
use capability::{Policy, Server};
use rmcp::model::CallToolRequestParams;
use serde_json::Value;

fn recorded_read_only_tools() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/mcp/server-everything.tools.json"
    );
    let list: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("JSON");
    list["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter(|t| t["annotations"]["readOnlyHint"] == true)
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn governed_client_on_server_everything() {
    let servers = require_servers!("governed_client_on_server_everything");
    let server = servers.everything();
    let policy = Arc::new(
        Policy::from_toml_str(
            "[roles.reader]\nceiling = \"read-only\"\nallow = [\"everything/*\"]\n\
             [roles.writer]\nceiling = \"unrestricted\"\nallow = [\"everything/*\"]\n",
        )
        .expect("policy"),
    );
    for (trust, role, expect_visible) in [
        (
            Server::trusted("everything"),
            "reader",
            recorded_read_only_tools(),
        ),
        (Server::untrusted("everything"), "reader", Vec::new()),
    ] {
        let mut child = tokio::process::Command::new(&server.program)
            .args(&server.args)
            .envs(server.env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn server-everything");
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            panic!("piped stdio");
        };
        let connection = connect_client((stdout, stdin))
            .await
            .expect("MCP handshake");
        let client = GovernedClient::connect(
            connection.peer().clone(),
            trust.clone(),
            policy.clone(),
            role,
            None,
        )
        .await
        .expect("lists the tools");
        let visible: Vec<String> = client
            .visible_tools()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(visible, expect_visible, "{trust}");
        assert_eq!(
            client.visible_tools().len() + client.hidden().len(),
            13,
            "every tool is either shown or hidden with a reason"
        );

        let mut echo = CallToolRequestParams::new("echo");
        echo.arguments = serde_json::json!({ "message": "governed hello" })
            .as_object()
            .cloned();
        let result = client.call_tool(echo).await;
        if trust.trust() == capability::mcp::Trust::Trusted {
            let result = result.expect("echo is read-only and visible");
            let text = serde_json::to_string(&result).expect("json");
            assert!(text.contains("governed hello"), "{text}");
        } else {
            assert!(
                matches!(result, Err(GovernedError::Denied { .. })),
                "{result:?}"
            );
        }
        // A tool that is not read-only is refused before anything is sent.
        let refused = client
            .call_tool(CallToolRequestParams::new("toggle-simulated-logging"))
            .await;
        let Err(GovernedError::Denied { tool, reasons }) = refused else {
            panic!("expected a denial, got {refused:?}");
        };
        assert_eq!(tool, "toggle-simulated-logging");
        assert!(!reasons.is_empty());
        let _ = connection.cancel().await;
        let _ = child.kill().await;
    }
}
