//! The proxy's trail and the server's lists, tried from outside:
//!
//! - with `--checkpoint-key`, records cut off the end of the trail are found by `audit verify
//!   --key`;
//! - a second proxy given the same JSON Lines trail is refused at start, naming it;
//! - a server that answers `tools/list` with a tool object writing a key twice is refused;
//! - a storm of `notifications/tools/list_changed` is coalesced: a few relists, one
//!   notification to the client per change;
//! - a server's `notifications/resources/updated` reaches the client only for a URI its role
//!   may read;
//! - a call the client cancels is cancelled upstream too (the server is sent
//!   `notifications/cancelled`), and its outcome on record says so.
//!
//! The servers are small `sh` servers of protocol 2025-11-25.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{ClientLifecycleMode, NotificationContext};
use rmcp::{ClientHandler, RoleClient};
use serde_json::json;

use proxy_common::{BIN, Proxied, calls, proxy_args, scratch};

const POLICY: &str = r#"
[roles.operator]
ceiling = "unrestricted"
allow = ["*"]
"#;

/// An `sh` server of 2025-11-25 whose `tools/list` answer is `tools` (JSON text, with `'`
/// escaped for the shell by the caller) and whose every call answers `called`. Each
/// `tools/list` it is asked is appended to `listed`. `on_call` runs before a call is answered.
fn sh_server(tools: &str, listed: &Path, on_call: &str) -> support::McpServer {
    let script = format!(
        r#"reply() {{ printf '{{"jsonrpc":"2.0","id":%s,%s}}\n' "$1" "$2"; }}
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^[^{{]*{{[^{{]*"id":\([0-9][0-9]*\|"[^"]*"\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) reply "$id" '"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{"listChanged":true}},"resources":{{"subscribe":true}}}},"serverInfo":{{"name":"sh","version":"1.0.0"}}}}' ;;
    *'"method":"server/discover"'*) reply "$id" '"error":{{"code":-32601,"message":"Method not found"}}' ;;
    *'"method":"tools/list"'*) echo x >> '{listed}'; reply "$id" "\"result\":{{\"tools\":$(cat tools.json)}}" ;;
    *'"method":"resources/list"'*) reply "$id" '"result":{{"resources":[]}}' ;;
    *'"method":"resources/templates/list"'*) reply "$id" '"result":{{"resourceTemplates":[]}}' ;;
    *'"method":"tools/call"'*) {on_call} reply "$id" '"result":{{"content":[{{"type":"text","text":"called"}}]}}' ;;
  esac
done"#,
        listed = listed.display()
    );
    let dir = listed.parent().expect("a directory");
    std::fs::write(dir.join("tools.json"), tools).expect("tools");
    support::McpServer {
        name: "sh",
        program: "sh".into(),
        args: vec![
            "-c".to_owned(),
            format!("cd '{}' && {{ {script}\n}}", dir.display()),
        ],
        env: Vec::new(),
    }
}

const ONE_TOOL: &str = r#"[{"name":"peek","inputSchema":{"type":"object"}}]"#;

fn capability(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run capability")
}

#[tokio::test(flavor = "current_thread")]
async fn a_cut_tail_of_a_proxy_trail_is_found_with_its_checkpoint_key() {
    let dir = scratch("trail-checkpoints", POLICY);
    let keygen = capability(&dir, &["keygen", "--out", "audit.key"]);
    assert!(keygen.status.success(), "{keygen:?}");
    let trail = dir.join("trail.jsonl");
    let key = dir.join("audit.key").display().to_string();
    let server = sh_server(ONE_TOOL, &dir.join("listed.log"), "");
    let args = proxy_args(
        &dir,
        "operator",
        "sh",
        &trail,
        &["--trust", "trusted", "--checkpoint-key", &key],
        &server,
    );
    let proxied = Proxied::start(&args).await;
    for _ in 0..3 {
        proxied.call("peek", json!({})).await.expect("runs");
    }
    assert!(proxied.close().await.success());
    let verify = |extra: &[&str]| {
        let mut args = vec!["audit", "verify", "trail.jsonl"];
        args.extend_from_slice(extra);
        capability(&dir, &args)
    };
    let intact = verify(&["--key", "audit.key.pub"]);
    assert_eq!(intact.status.code(), Some(0), "{intact:?}");
    assert!(
        String::from_utf8_lossy(&intact.stdout).contains("signed checkpoints verified"),
        "{intact:?}"
    );

    // Cut the last call (its intent and outcome) off, leaving the checkpoint lines.
    let text = std::fs::read_to_string(&trail).expect("read");
    let lines: Vec<&str> = text.lines().collect();
    let mut records = 0;
    let cut: Vec<&str> = lines
        .iter()
        .filter(|l| {
            let record =
                !l.starts_with("{\"checkpoint\"") && !l.starts_with("{\"tree_checkpoint\"");
            records += usize::from(record);
            !record || records <= 4
        })
        .copied()
        .collect();
    std::fs::write(&trail, cut.join("\n") + "\n").expect("write");
    let without_key = verify(&[]);
    assert_eq!(
        without_key.status.code(),
        Some(0),
        "the chain alone looks whole"
    );
    let with_key = verify(&["--key", "audit.key.pub"]);
    assert_eq!(with_key.status.code(), Some(1), "{with_key:?}");
    assert!(
        String::from_utf8_lossy(&with_key.stdout).contains("tail cut off"),
        "{with_key:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_second_proxy_on_one_trail_is_refused_naming_it() {
    let dir = scratch("trail-two-writers", POLICY);
    let trail = dir.join("trail.jsonl");
    let server = sh_server(ONE_TOOL, &dir.join("listed.log"), "");
    let args = proxy_args(
        &dir,
        "operator",
        "sh",
        &trail,
        &["--trust", "trusted"],
        &server,
    );
    let first = Proxied::start(&args).await;
    first.call("peek", json!({})).await.expect("runs");
    let second = tokio::process::Command::new(BIN)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run a second proxy");
    assert_eq!(
        second.status.code(),
        Some(2),
        "refused before anything starts"
    );
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(
        said.contains(&trail.display().to_string()) && said.contains("another writer"),
        "{said}"
    );
    first
        .call("peek", json!({}))
        .await
        .expect("the first goes on");
    assert!(first.close().await.success());
    assert_eq!(calls(&trail).len(), 2);
}

#[tokio::test(flavor = "current_thread")]
async fn a_tool_object_writing_a_key_twice_is_refused() {
    let dir = scratch("trail-duplicate-key", POLICY);
    let trail = dir.join("trail.jsonl");
    let twice = r#"[{"name":"wipe","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false,"readOnlyHint":true}}]"#;
    let server = sh_server(twice, &dir.join("listed.log"), "");
    let args = proxy_args(
        &dir,
        "operator",
        "sh",
        &trail,
        &["--trust", "trusted"],
        &server,
    );
    let out = tokio::process::Command::new(BIN)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("run the proxy");
    assert_eq!(
        out.status.code(),
        Some(1),
        "the server did not list its tools"
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("writes a key twice")
            && said.contains("$.result.tools[0].annotations.readOnlyHint"),
        "{said}"
    );
}

/// A client that counts the tool-list notifications it gets.
struct Counting(Arc<AtomicUsize>);

impl ClientHandler for Counting {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("counting-client", "1.0.0"),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_storm_of_list_changes_is_coalesced() {
    let dir = scratch("trail-storm", POLICY);
    let trail = dir.join("trail.jsonl");
    let listed = dir.join("listed.log");
    // The call adds a tool to the list, then announces 5,000 times that the list changed.
    let storm = r#"printf '%s' '[{"name":"peek","inputSchema":{"type":"object"}},{"name":"poke","inputSchema":{"type":"object"}}]' > tools.json; i=0; while [ $i -lt 5000 ]; do printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'; i=$((i+1)); done;"#;
    let server = sh_server(ONE_TOOL, &listed, storm);
    let args = proxy_args(
        &dir,
        "operator",
        "sh",
        &trail,
        &["--trust", "trusted"],
        &server,
    );
    let told = Arc::new(AtomicUsize::new(0));
    let (mut child, client) = Proxied::spawn_for(
        &args,
        Counting(told.clone()),
        ClientLifecycleMode::Initialize,
    )
    .await;
    client
        .peer()
        .call_tool(CallToolRequestParams::new("peek"))
        .await
        .expect("the storm's call");
    // Give the proxy time to work through the storm, then see what it made of it.
    let relists = || {
        std::fs::read_to_string(&listed)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while told.load(Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the client was never told"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Then until the relisting has stopped: the count of listings the same at five looks in a
    // row, 50 ms apart.
    let (mut seen, mut same) = (relists(), 0);
    while same < 5 {
        assert!(
            std::time::Instant::now() < deadline,
            "the relisting never stopped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let now = relists();
        (seen, same) = if now == seen {
            (now, same + 1)
        } else {
            (now, 0)
        };
    }
    let names: Vec<String> = client
        .peer()
        .list_all_tools()
        .await
        .expect("lists")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["peek", "poke"], "the new list is served");
    let _ = client.cancel().await;
    let _ = child.wait().await;
    // The first listing, then a relist in flight and one pending at most each time the
    // notifications came faster than a relist: far fewer than 5,000.
    let relists = relists();
    assert!(
        relists <= 20,
        "{relists} tools/list requests for 5,000 notifications"
    );
    assert_eq!(
        told.load(Ordering::SeqCst),
        1,
        "one notification to the client for the one change"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_call_the_client_cancels_is_cancelled_upstream_and_its_outcome_says_so() {
    let dir = scratch("trail-cancel", POLICY);
    let trail = dir.join("trail.jsonl");
    let listed = dir.join("listed.log");
    let seen = dir.join("seen.log");
    // The call is held: the server notes it, then reads the next line (the cancellation, if the
    // proxy sends one) before it answers.
    let hold = format!(
        r#"echo call >> '{seen}'; IFS= read -r next; printf '%s\n' "$next" >> '{seen}';"#,
        seen = seen.display()
    );
    let server = sh_server(ONE_TOOL, &listed, &hold);
    let args = proxy_args(
        &dir,
        "operator",
        "sh",
        &trail,
        &["--trust", "trusted"],
        &server,
    );
    let proxied = Proxied::start(&args).await;
    let handle = proxied
        .client
        .peer()
        .send_cancellable_request(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                CallToolRequestParams::new("peek"),
            )),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    let seen_lines = || std::fs::read_to_string(&seen).unwrap_or_default();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !seen_lines().starts_with("call\n") {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never reached the server"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    handle
        .cancel(Some("the user gave up".to_owned()))
        .await
        .expect("cancels");
    while seen_lines().lines().count() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the server was told nothing"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let told: serde_json::Value =
        serde_json::from_str(seen_lines().lines().nth(1).expect("a line")).expect("JSON");
    assert_eq!(told["method"], "notifications/cancelled", "{told}");
    // The trail says the call was cancelled; its intent came before.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let outcome = loop {
        if let Some(outcome) = calls(&trail).into_iter().find(|r| r["tool"] == "peek") {
            break outcome;
        }
        assert!(std::time::Instant::now() < deadline, "no outcome recorded");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(outcome["success"], false);
    assert!(
        outcome["error"]
            .as_str()
            .unwrap_or_default()
            .contains("cancelled"),
        "{outcome}"
    );
    proxied.close().await;
}

/// A client that notes the URIs it is told were updated.
struct Updates(Arc<Mutex<Vec<String>>>);

impl ClientHandler for Updates {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("updates-client", "1.0.0"),
        )
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().expect("updates").push(params.uri);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_resource_update_reaches_the_client_only_for_what_its_role_may_read() {
    let policy = format!(
        "{POLICY}resources = [\"sh/file:///srv/docs/*\"]\n\n[servers.sh]\nforward = [\"resources\"]\n"
    );
    let dir = scratch("trail-updated", &policy);
    let trail = dir.join("trail.jsonl");
    // The call announces two updates, then a third, readable one last: once the client has
    // that, it has been told all it will be.
    let update = |uri: &str| {
        format!(
            r#"printf '%s\n' '{{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"{uri}"}}}}';"#
        )
    };
    let on_call = format!(
        "{}{}{}",
        update("file:///etc/passwd"),
        update("file:///srv/docs/a.md"),
        update("file:///srv/docs/last.md")
    );
    let server = sh_server(ONE_TOOL, &dir.join("listed.log"), &on_call);
    let args = proxy_args(
        &dir,
        "operator",
        "sh",
        &trail,
        &["--trust", "trusted"],
        &server,
    );
    let told = Arc::new(Mutex::new(Vec::new()));
    let (mut child, client) = Proxied::spawn_for(
        &args,
        Updates(told.clone()),
        ClientLifecycleMode::Initialize,
    )
    .await;
    client
        .peer()
        .call_tool(CallToolRequestParams::new("peek"))
        .await
        .expect("the call");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while told.lock().expect("updates").len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "told {:?}",
            told.lock().expect("updates")
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let _ = client.cancel().await;
    let _ = child.wait().await;
    assert_eq!(
        *told.lock().expect("updates"),
        ["file:///srv/docs/a.md", "file:///srv/docs/last.md"],
        "not a word of the one it may not read"
    );
}
