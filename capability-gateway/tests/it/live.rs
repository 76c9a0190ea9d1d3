//! `capability_gateway::live::list_server_tools` against real processes: commands found on any Linux
//! machine, and tiny MCP servers written in `sh` (one per protocol generation).

#![cfg(unix)]

use std::ffi::OsString;
use std::time::{Duration, Instant};

use capability_gateway::live::{LiveError, LiveTools, list_server_tools};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(10);

async fn run(program: &str, args: &[&str], timeout: Duration) -> Result<LiveTools, LiveError> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    list_server_tools(program.as_ref(), &args, &[], timeout).await
}

/// `sh -c <script>`, where the script answers JSON-RPC requests line by line: `body` holds the
/// `case` arms, in which `$id` is the request's id and `reply <id> <members>` writes a response.
async fn sh_server(body: &str, timeout: Duration) -> Result<LiveTools, LiveError> {
    sh_server_after("", body, timeout).await
}

/// [`sh_server`], running `prelude` first.
async fn sh_server_after(
    prelude: &str,
    body: &str,
    timeout: Duration,
) -> Result<LiveTools, LiveError> {
    let script = format!(
        r#"reply() {{ printf '{{"jsonrpc":"2.0","id":%s,%s}}\n' "$1" "$2"; }}
{prelude}
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^[^{{]*{{[^{{]*"id":\([0-9][0-9]*\|"[^"]*"\).*/\1/p')
  case "$line" in
{body}
  esac
done"#
    );
    run("sh", &["-c", &script], timeout).await
}

const TOOL_A: &str = r#"{"name":"read_file","title":"Read a file","description":"Read a file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}"#;
const TOOL_B: &str = r#"{"name":"write_file","description":"Write a file.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false,"destructiveHint":true}}"#;
const TOOL_C: &str = r#"{"name":"list_directory","inputSchema":{"type":"object"}}"#;

/// Pages: A and B, then C (cursor `2`).
fn tools_list_cases() -> String {
    format!(
        r#"    *'"method":"tools/list"'*'"cursor":"2"'*) reply "$id" '"result":{{"tools":[{TOOL_C}]}}' ;;
    *'"method":"tools/list"'*) reply "$id" '"result":{{"tools":[{TOOL_A},{TOOL_B}],"nextCursor":"2"}}' ;;"#
    )
}

#[tokio::test]
async fn a_server_of_the_initialize_generation_is_listed() {
    let body = format!(
        r#"    *'"method":"server/discover"'*) reply "$id" '"error":{{"code":-32601,"message":"Method not found"}}' ;;
    *'"method":"initialize"'*) reply "$id" '"result":{{"protocolVersion":"2025-06-18","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"sh-legacy","version":"1.0.0"}}}}' ;;
{}"#,
        tools_list_cases()
    );
    let live = sh_server(&body, TIMEOUT).await.expect("lists its tools");
    assert_eq!(live.server_name, "sh-legacy");
    assert_eq!(live.protocol_version, "2025-06-18");
    let sent: Vec<serde_json::Value> = [TOOL_A, TOOL_B, TOOL_C]
        .iter()
        .map(|t| serde_json::from_str(t).expect("valid JSON"))
        .collect();
    assert_eq!(live.tools, sent, "every page, each tool as sent");
}

#[tokio::test]
async fn a_server_of_the_discover_generation_is_listed() {
    let body = format!(
        r#"    *'"method":"server/discover"'*) reply "$id" '"result":{{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{{"tools":{{}}}},"ttlMs":0,"cacheScope":"private","_meta":{{"io.modelcontextprotocol/serverInfo":{{"name":"sh-modern","version":"2.0.0"}}}}}}' ;;
    *'"method":"initialize"'*) reply "$id" '"error":{{"code":-32601,"message":"Method not found"}}' ;;
{}"#,
        tools_list_cases()
    );
    let live = sh_server(&body, TIMEOUT).await.expect("lists its tools");
    assert_eq!(live.server_name, "sh-modern");
    assert_eq!(live.protocol_version, "2026-07-28");
    let names: Vec<&str> = live
        .tools
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["read_file", "write_file", "list_directory"]);
}

#[tokio::test]
async fn a_server_without_tools_is_not_asked_for_them() {
    // It would never answer `tools/list`: asking would time out.
    let body = r#"    *'"method":"server/discover"'*) reply "$id" '"error":{"code":-32601,"message":"Method not found"}' ;;
    *'"method":"initialize"'*) reply "$id" '"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"no-tools","version":"1"}}' ;;"#;
    let live = sh_server(body, TIMEOUT).await.expect("connects");
    assert_eq!(live.server_name, "no-tools");
    assert!(live.tools.is_empty());
}

#[tokio::test]
async fn a_tool_rmcp_cannot_read_is_named() {
    let body = r#"    *'"method":"server/discover"'*) reply "$id" '"error":{"code":-32601,"message":"Method not found"}' ;;
    *'"method":"initialize"'*) reply "$id" '"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"bad","version":"1"}}' ;;
    *'"method":"tools/list"'*) reply "$id" '"result":{"tools":[{"name":"fine","inputSchema":{"type":"object"}},{"name":"sneaky","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":"yes"}}]}' ;;"#;
    let error = sh_server(body, TIMEOUT).await.expect_err("malformed");
    let LiveError::MalformedTool {
        command,
        error: problem,
    } = &error
    else {
        panic!("expected a malformed tool, got {error}");
    };
    assert_eq!(command, "sh");
    assert_eq!(problem.tool(), "sneaky");
    assert_eq!(problem.problems()[0].field(), "annotations.readOnlyHint");
    assert_eq!(
        error.to_string(),
        "`sh` listed an invalid tool: invalid tool `sneaky`: `annotations.readOnlyHint`: \
         expected a boolean, found a string"
    );
}

#[tokio::test]
async fn a_rejected_handshake_says_so() {
    let body = r#"    *'"method":"server/discover"'*) reply "$id" '"error":{"code":-32601,"message":"Method not found"}' ;;
    *'"method":"initialize"'*) reply "$id" '"error":{"code":-32602,"message":"Unsupported protocol version"}' ;;"#;
    let error = sh_server(body, TIMEOUT).await.expect_err("rejected");
    assert!(matches!(error, LiveError::Protocol { .. }), "{error}");
    let text = error.to_string();
    assert!(text.starts_with("`sh`: the MCP handshake failed"), "{text}");
    assert!(
        text.contains("rejected: Unsupported protocol version (code -32602)"),
        "{text}"
    );
}

#[tokio::test]
async fn a_pagination_loop_is_an_error() {
    let body = format!(
        r#"    *'"method":"server/discover"'*) reply "$id" '"error":{{"code":-32601,"message":"Method not found"}}' ;;
    *'"method":"initialize"'*) reply "$id" '"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"loop","version":"1"}}}}' ;;
    *'"method":"tools/list"'*) reply "$id" '"result":{{"tools":[{TOOL_C}],"nextCursor":"again"}}' ;;"#
    );
    let error = sh_server(&body, TIMEOUT).await.expect_err("loops");
    assert!(matches!(error, LiveError::Protocol { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        "`sh`: `tools/list` failed: the server returned the cursor \"again\" twice (a pagination \
         loop)"
    );
}

#[tokio::test]
async fn a_missing_program_cannot_be_started() {
    let error = run("capability-test-no-such-program", &[], TIMEOUT)
        .await
        .expect_err("missing");
    assert!(matches!(error, LiveError::Spawn { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "cannot start `capability-test-no-such-program`: No such file or directory"
    );
}

#[tokio::test]
async fn a_program_that_exits_early_gives_its_status() {
    let started = Instant::now();
    let error = run("sh", &["-c", "exit 3"], TIMEOUT)
        .await
        .expect_err("exited");
    let LiveError::Exited { status, .. } = &error else {
        panic!("expected an early exit, got {error}");
    };
    assert_eq!(status.and_then(|s| s.code()), Some(3));
    assert_eq!(
        error.to_string(),
        "`sh` exited before answering (exit status: 3)"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "no waiting for the timeout"
    );
}

/// A timeout past what the clock can hold (`Duration::MAX`) is no bound: the program's early
/// exit is said as with any other; before, adding it to the clock panicked.
#[tokio::test]
async fn a_timeout_past_the_clock_is_no_bound_and_panics_nothing() {
    let error = run("sh", &["-c", "exit 3"], Duration::MAX)
        .await
        .expect_err("exited");
    assert_eq!(
        error.to_string(),
        "`sh` exited before answering (exit status: 3)"
    );
}

#[tokio::test]
async fn the_end_of_standard_error_comes_with_the_error() {
    let error = run(
        "sh",
        &[
            "-c",
            "echo starting >&2; echo 'Error: Cannot find module x' >&2; exit 1",
        ],
        TIMEOUT,
    )
    .await
    .expect_err("exited");
    let LiveError::Exited { stderr, .. } = &error else {
        panic!("expected an early exit, got {error}");
    };
    assert_eq!(stderr, "starting\nError: Cannot find module x");
    assert_eq!(
        error.to_string(),
        "`sh` exited before answering (exit status: 1)\nits standard error ended with:\n  \
         starting\n  Error: Cannot find module x"
    );
}

#[tokio::test]
async fn a_program_that_speaks_no_mcp_is_recognised() {
    // It writes something else and keeps running: recognised when the timeout ends.
    let started = Instant::now();
    let error = run("sh", &["-c", "echo hello; sleep 5"], Duration::from_secs(2))
        .await
        .expect_err("not MCP");
    assert!(
        matches!(&error, LiveError::NotMcp { stdout, .. } if stdout == "hello"),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "`sh` does not speak MCP over stdio: it wrote \"hello\" to its standard output instead \
         of JSON-RPC"
    );
    assert!(started.elapsed() < Duration::from_secs(4));

    // It writes something else and exits: recognised at once.
    let error = run("echo", &["Usage: server [options]"], TIMEOUT)
        .await
        .expect_err("not MCP");
    assert!(
        matches!(&error, LiveError::NotMcp { stdout, .. } if stdout == "Usage: server [options]"),
        "{error}"
    );
}

#[tokio::test]
async fn a_silent_program_times_out_and_is_killed() {
    let started = Instant::now();
    let error = run("sleep", &["30"], Duration::from_secs(1))
        .await
        .expect_err("silent");
    assert!(matches!(error, LiveError::Timeout { .. }), "{error}");
    assert_eq!(error.to_string(), "no answer from `sleep` within 1 s");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "killed at the timeout, not waited for"
    );
}

#[tokio::test]
async fn a_banner_before_the_answers_is_tolerated() {
    // Some servers print a line to stdout before speaking JSON-RPC; other clients ignore it.
    let body = format!(
        r#"    *'"method":"server/discover"'*) reply "$id" '"error":{{"code":-32601,"message":"Method not found"}}' ;;
    *'"method":"initialize"'*) reply "$id" '"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"chatty","version":"1"}}}}' ;;
{}"#,
        tools_list_cases()
    );
    let live = sh_server_after("echo 'Server running on stdio'", &body, TIMEOUT)
        .await
        .expect("lists its tools");
    assert_eq!(live.tools.len(), 3);
    assert_eq!(
        live.tools[2],
        json!({"name": "list_directory", "inputSchema": {"type": "object"}})
    );
}
