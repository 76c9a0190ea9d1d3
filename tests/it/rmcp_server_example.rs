//! `examples/rmcp_server.rs`, run as a real process and driven by clients nobody here wrote:
//! rmcp's own client and the official TypeScript SDK client (`tests/mcp-servers/ts-client.mjs`),
//! each over stdio and over Streamable HTTP, each as `viewer` and as `operator`.
//!
//! For every combination: the viewer lists exactly the tools whose manifest (printed by the
//! example's `--manifests`) is read-only and the operator lists all of them; a viewer's call of
//! a read-only tool runs; its call of a hidden tool is refused with a JSON-RPC error carrying
//! the reasons and never reaches the tool (the example's `--journal` records every tool that
//! ran); every call, allowed or refused, is in the JSON Lines audit trail with its tool, role and
//! verdict. Over HTTP, a caller without a token or with an unknown one sees nothing.
//!
//! The example binary is built by `cargo build --example rmcp_server` (once per run, next to
//! this test's own target directory), so `cargo test --test it rmcp_server_example::` needs
//! nothing else. The TypeScript tests need Node.js (see `capability-testkit/src/servers/mod.rs`).

use crate::common;
use capability_testkit::require_servers;
use capability_testkit::servers as support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};
use support::TsTarget;

/// The JSON-RPC error code of a refused call (`capability_mcp::rmcp::REFUSED_CODE`).
const REFUSED_CODE: i64 = -32602;
/// The read-only tool every test calls, and the hidden (destructive) one.
const READ_ONLY_TOOL: &str = "get_pod_status";
const HIDDEN_TOOL: &str = "restart_pod";
/// The bearer-token table the HTTP tests give the example.
const OPERATOR_TOKEN: &str = "op-test-token";
const VIEWER_TOKEN: &str = "view-test-token";
/// A role with every tool by ceiling, but without the scope `k8s:write` (over `--token` only).
const ONCALL_TOKEN: &str = "oncall-test-token";
/// How long the example may take to say it listens.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// The example process

/// The example's binary, built once per test run with the profile and target directory of this
/// test binary (`<target>/<profile>/deps/<test>` → `<target>/<profile>/examples/rmcp_server`).
fn example() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| common::example_binary("rmcp_server"))
}

/// A scratch directory for one test: the audit trail and the journal.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(test: &str) -> Self {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("rmcp_server_example")
            .join(test);
        Scratch {
            dir: capability_testkit::fresh_dir(dir),
        }
    }

    fn audit(&self) -> PathBuf {
        self.dir.join("audit.jsonl")
    }

    fn journal(&self) -> PathBuf {
        self.dir.join("journal.jsonl")
    }

    /// The example's arguments for the audit trail and the journal.
    fn args(&self) -> Vec<String> {
        vec![
            "--audit".to_owned(),
            self.audit().display().to_string(),
            "--journal".to_owned(),
            self.journal().display().to_string(),
        ]
    }

    /// The tools that ran, from the journal.
    fn ran(&self) -> Vec<String> {
        lines(&self.journal())
            .iter()
            .map(|line| line["tool"].as_str().expect("a tool").to_owned())
            .collect()
    }

    /// `(tool, role, verdict)` of every audit record.
    /// One entry per call (the outcome of a call that ran, whose intent came first; the one
    /// record of a refused call), and no checkpoint line. Every intent has its outcome.
    fn audited(&self) -> Vec<(String, String, String)> {
        let lines = lines(&self.audit());
        let records: Vec<&Value> = lines
            .iter()
            .filter(|r| r.get("checkpoint").is_none() && r.get("tree_checkpoint").is_none())
            .collect();
        let intents = records.iter().filter(|r| r["phase"] == "intent").count();
        let outcomes = records.iter().filter(|r| r["phase"] == "outcome").count();
        assert_eq!(
            intents, outcomes,
            "an outcome for every intent: {records:?}"
        );
        records
            .iter()
            .filter(|r| r["phase"] != "intent")
            .map(|r| {
                let field = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
                (field("tool"), field("role"), field("verdict"))
            })
            .collect()
    }
}

/// The JSON lines of a file (none when it does not exist).
fn lines(path: &Path) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// The example serving Streamable HTTP on a free port; killed when dropped.
struct HttpExample {
    child: Child,
    url: String,
}

/// Where the example's bearer-token table comes from.
#[derive(Clone, Copy)]
enum Tokens {
    /// `--token <token>=<role>`, twice.
    Flags,
    /// `RMCP_SERVER_TOKENS=<token>=<role>,<token>=<role>`.
    Env,
}

impl HttpExample {
    fn start(scratch: &Scratch, tokens: Tokens) -> Self {
        let operator = format!("{OPERATOR_TOKEN}=operator");
        let viewer = format!("{VIEWER_TOKEN}=viewer");
        let mut command = Command::new(example());
        command
            .args(["--http", "127.0.0.1:0"])
            .env_remove("RMCP_SERVER_TOKENS");
        match tokens {
            Tokens::Flags => command.args([
                "--token",
                &operator,
                "--token",
                &viewer,
                "--token",
                &format!("{ONCALL_TOKEN}=oncall"),
            ]),
            Tokens::Env => command.env("RMCP_SERVER_TOKENS", format!(" {operator}, {viewer} ")),
        };
        let mut child = command
            .args(scratch.args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts the example");
        let stderr = child.stderr.take().expect("piped stderr");
        let (ready, listening) = mpsc::channel();
        // Reads the example's stderr until it ends (so the pipe never fills), passing it on,
        // and sends the URL of its "listening on" line.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[example] {line}");
                if let Some(url) = line.strip_prefix("rmcp_server: listening on ") {
                    let _ = ready.send(url.to_owned());
                }
            }
        });
        let url = match listening.recv_timeout(READY_TIMEOUT) {
            Ok(url) => url,
            Err(e) => {
                let _ = child.kill();
                panic!("the example did not say where it listens: {e}");
            }
        };
        HttpExample { child, url }
    }
}

impl Drop for HttpExample {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The example's tool manifests (`--manifests`): every tool, and the read-only ones.
fn manifests() -> (BTreeSet<String>, BTreeSet<String>) {
    let output = Command::new(example())
        .arg("--manifests")
        .output()
        .expect("runs the example");
    assert!(output.status.success(), "{output:?}");
    let (mut all, mut read_only) = (BTreeSet::new(), BTreeSet::new());
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let manifest: Value = serde_json::from_str(line).expect("a JSON line");
        let name = manifest["name"].as_str().expect("a name").to_owned();
        if manifest["read_only"] == true {
            read_only.insert(name.clone());
        }
        all.insert(name);
    }
    // The example has both kinds, or the tests below would prove nothing.
    assert!(read_only.contains(READ_ONLY_TOOL) && all.contains(HIDDEN_TOOL));
    assert!(!read_only.contains(HIDDEN_TOOL) && read_only.len() < all.len());
    (all, read_only)
}

/// What one session of a client saw and did: its list, and the outcome of a call of the
/// read-only tool and of the hidden one (`Ok(text)` or `Err((code, data))`).
struct Seen {
    listed: BTreeSet<String>,
    read_only_call: Result<String, (i64, Value)>,
    hidden_call: Result<String, (i64, Value)>,
}

/// The checks every client, transport and role must pass.
fn check_viewer_and_operator(viewer: &Seen, operator: &Seen, scratch: &Scratch) {
    let (all, read_only) = manifests();
    assert_eq!(
        viewer.listed, read_only,
        "the viewer lists the read-only tools"
    );
    assert_eq!(operator.listed, all, "the operator lists every tool");

    let text = viewer
        .read_only_call
        .as_ref()
        .expect("the viewer's read-only call runs");
    assert!(text.contains("web-1"), "{text}");
    let (code, data) = viewer
        .hidden_call
        .as_ref()
        .expect_err("the viewer's call of a hidden tool is refused");
    assert_eq!(*code, REFUSED_CODE, "{data}");
    assert_eq!(data["tool"], HIDDEN_TOOL, "{data}");
    assert_eq!(data["role"], "viewer", "{data}");
    let reasons = data["reasons"].as_array().expect("reasons");
    assert!(
        reasons.iter().any(|r| r["reason"] == "ceiling_exceeded"),
        "the read-only ceiling is the reason: {data}"
    );

    operator
        .read_only_call
        .as_ref()
        .expect("the operator reads");
    let restarted = operator
        .hidden_call
        .as_ref()
        .expect("the operator restarts");
    assert!(restarted.contains("restarted"), "{restarted}");

    // The refused call never ran: the journal has the viewer's read and the operator's two
    // calls, in order, and nothing else.
    assert_eq!(
        scratch.ran(),
        [READ_ONLY_TOOL, READ_ONLY_TOOL, HIDDEN_TOOL],
        "the tools that ran"
    );
    // Every call is in the audit trail: the refused one as denied.
    let audited = scratch.audited();
    for (tool, role, verdict) in [
        (READ_ONLY_TOOL, "viewer", "allowed"),
        (HIDDEN_TOOL, "viewer", "denied"),
        (READ_ONLY_TOOL, "operator", "allowed"),
        (HIDDEN_TOOL, "operator", "allowed"),
    ] {
        let record = (tool.to_owned(), role.to_owned(), verdict.to_owned());
        assert!(audited.contains(&record), "{record:?} not in {audited:?}");
    }
    assert_eq!(audited.len(), 4, "one record per call: {audited:?}");
}

// ---------------------------------------------------------------------------------------------
// rmcp's client

type RmcpClient = RunningService<RoleClient, ()>;

async fn rmcp_session(client: RmcpClient) -> Seen {
    let listed = client.list_all_tools().await.expect("lists");
    let listed = listed.iter().map(|t| t.name.to_string()).collect();
    let read_only_call = rmcp_call(&client, READ_ONLY_TOOL).await;
    let hidden_call = rmcp_call(&client, HIDDEN_TOOL).await;
    let _ = client.cancel().await;
    Seen {
        listed,
        read_only_call,
        hidden_call,
    }
}

async fn rmcp_call(client: &RmcpClient, tool: &str) -> Result<String, (i64, Value)> {
    let arguments = json!({"name": "web-1"}).as_object().cloned();
    let mut request = CallToolRequestParams::new(tool.to_owned());
    request.arguments = arguments;
    match client.call_tool(request).await {
        Ok(result) => {
            let result = serde_json::to_value(result).expect("serializes");
            assert_ne!(result["isError"], true, "{result}");
            Ok(result["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned())
        }
        Err(ServiceError::McpError(error)) => {
            Err((i64::from(error.code.0), error.data.unwrap_or_default()))
        }
        Err(other) => panic!("{tool}: {other}"),
    }
}

async fn rmcp_stdio(role: &str, scratch: &Scratch) -> Seen {
    let mut command = tokio::process::Command::new(example());
    command.args(["--role", role]).args(scratch.args());
    let transport = TokioChildProcess::new(command).expect("spawns the example");
    rmcp_session(().serve(transport).await.expect("connects")).await
}

async fn rmcp_http(url: &str, token: Option<&str>) -> RmcpClient {
    // The workspace's rmcp has reqwest without a default TLS provider (see the root
    // Cargo.toml); installing one twice is refused, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    ().serve(transport).await.expect("connects")
}

#[tokio::test(flavor = "multi_thread")]
async fn rmcp_client_over_stdio() {
    let scratch = Scratch::new("rmcp_stdio");
    let viewer = rmcp_stdio("viewer", &scratch).await;
    let operator = rmcp_stdio("operator", &scratch).await;
    check_viewer_and_operator(&viewer, &operator, &scratch);
}

#[tokio::test(flavor = "multi_thread")]
async fn rmcp_client_over_http() {
    let scratch = Scratch::new("rmcp_http");
    let server = HttpExample::start(&scratch, Tokens::Flags);
    let viewer = rmcp_session(rmcp_http(&server.url, Some(VIEWER_TOKEN)).await).await;
    let operator = rmcp_session(rmcp_http(&server.url, Some(OPERATOR_TOKEN)).await).await;
    check_viewer_and_operator(&viewer, &operator, &scratch);

    // No token, or one not in the table: a 401 before the governed server, no session, and
    // every call attempted on record.
    nobody_gets_401s(&server.url);
    let audited = scratch.audited();
    let denied_without_role = audited
        .iter()
        .filter(|(_, role, verdict)| role == "(none)" && verdict == "denied")
        .count();
    assert_eq!(denied_without_role, 4, "{audited:?}");
    assert_eq!(scratch.ran().len(), 3, "no call without a role ran");
}

/// The scopes an rmcp tool declares with `#[capability(scopes = ..)]` are published in its
/// `_meta` and enforced: a role without `k8s:write` does not see the tools that need it, and a
/// call of one is refused with the MCP step-up challenge naming every missing scope.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_scope_is_refused_with_the_step_up_challenge() {
    let scratch = Scratch::new("rmcp_scope");
    let server = HttpExample::start(&scratch, Tokens::Flags);
    let client = rmcp_http(&server.url, Some(ONCALL_TOKEN)).await;
    let listed: BTreeSet<String> = client
        .list_all_tools()
        .await
        .expect("lists")
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    let expected: BTreeSet<String> = ["get_pod_status", "list_deployments", "query_metrics"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(listed, expected, "the tools needing `k8s:write` are hidden");
    let (code, data) = rmcp_call(&client, HIDDEN_TOOL)
        .await
        .expect_err("refused for a missing scope");
    assert_eq!(code, REFUSED_CODE);
    assert_eq!(data["error"], "insufficient_scope", "{data}");
    assert_eq!(data["missingScopes"], json!(["k8s:write"]), "{data}");
    assert!(
        data["wwwAuthenticate"]
            .as_str()
            .is_some_and(|h| h.contains("insufficient_scope") && h.contains("k8s:write")),
        "{data}"
    );
    let _ = client.cancel().await;
    assert!(scratch.ran().is_empty(), "the refused call never ran");
    let audited = scratch.audited();
    assert!(
        audited
            .iter()
            .any(|(tool, role, verdict)| tool == HIDDEN_TOOL
                && role == "oncall"
                && verdict == "denied"),
        "{audited:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The official TypeScript SDK client

/// The TypeScript client's operations: list, call the read-only tool, call the hidden one.
fn ts_ops() -> Value {
    json!([
        {"op": "list"},
        {"op": "call", "name": READ_ONLY_TOOL, "arguments": {"name": "web-1"}},
        {"op": "call", "name": HIDDEN_TOOL, "arguments": {"name": "web-1"}},
    ])
}

/// What the TypeScript client printed for [`ts_ops`], and the raw list result.
fn ts_seen(servers: &support::Servers, target: TsTarget<'_>) -> (Seen, Value) {
    let output = servers
        .ts_client(&ts_ops(), target)
        .output()
        .expect("runs node");
    let lines = support::ts_client_lines(&output).expect("the TypeScript client ran");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0]["op"], "connect", "{lines:?}");
    let list = lines[1]["result"].clone();
    let listed = list["tools"]
        .as_array()
        .expect("a tool list")
        .iter()
        .map(|t| t["name"].as_str().expect("a name").to_owned())
        .collect();
    let call = |line: &Value| match line.get("error") {
        Some(error) => Err((error["code"].as_i64().unwrap_or(0), error["data"].clone())),
        None => {
            assert_ne!(line["result"]["isError"], true, "{line}");
            let text = line["result"]["content"][0]["text"].as_str();
            Ok(text.unwrap_or_default().to_owned())
        }
    };
    let seen = Seen {
        listed,
        read_only_call: call(&lines[2]),
        hidden_call: call(&lines[3]),
    };
    (seen, list)
}

/// The filtered list's `cacheScope: "private"`, as far as the TypeScript SDK passes it on.
fn check_cache_scope(viewer_list: &Value) {
    assert_eq!(
        viewer_list["cacheScope"], "private",
        "the SDK's list result: {viewer_list}"
    );
}

#[test]
fn typescript_client_over_stdio() {
    let servers = require_servers!("typescript_client_over_stdio");
    let scratch = Scratch::new("ts_stdio");
    let program = example();
    let run = |role: &str| {
        let mut args = vec!["--role".to_owned(), role.to_owned()];
        args.extend(scratch.args());
        ts_seen(
            &servers,
            TsTarget::Stdio {
                program,
                args: &args,
            },
        )
    };
    let (viewer, viewer_list) = run("viewer");
    let (operator, _) = run("operator");
    check_viewer_and_operator(&viewer, &operator, &scratch);
    check_cache_scope(&viewer_list);
}

#[test]
fn typescript_client_over_http() {
    let servers = require_servers!("typescript_client_over_http");
    let scratch = Scratch::new("ts_http");
    let server = HttpExample::start(&scratch, Tokens::Env);
    let run = |token| {
        let target = TsTarget::Http {
            url: &server.url,
            token,
        };
        ts_seen(&servers, target)
    };
    let (viewer, viewer_list) = run(Some(VIEWER_TOKEN));
    let (operator, _) = run(Some(OPERATOR_TOKEN));
    check_viewer_and_operator(&viewer, &operator, &scratch);
    check_cache_scope(&viewer_list);

    // The SDK's client without a token is refused at its first request.
    let nobody = servers
        .ts_client(
            &ts_ops(),
            TsTarget::Http {
                url: &server.url,
                token: None,
            },
        )
        .output()
        .expect("runs the TypeScript client");
    assert!(!nobody.status.success());
    let said = String::from_utf8_lossy(&nobody.stdout);
    assert!(said.contains(r#""code":401"#), "{said}");
    nobody_gets_401s(&server.url);
    assert_eq!(scratch.ran().len(), 3, "no call without a role ran");
    assert_eq!(scratch.audited().len(), 8, "every call is audited");
}

// ---------------------------------------------------------------------------------------------
// The command line

#[test]
fn bad_flags_exit_2_with_a_message() {
    for args in [
        &[][..],
        &["--bogus"],
        &["--role"],
        &["--role", "admin"],
        &["--role", "viewer", "--http", "127.0.0.1:0"],
        &["--http", "not-an-address"],
        &["--http", "127.0.0.1:0", "--token", "no-equals-sign"],
        &["--http", "127.0.0.1:0", "--token", "t=nosuchrole"],
        &["--role", "viewer", "--role", "operator"],
        &["--role", "viewer", "--token", "t=viewer"],
        &["--manifests", "--role", "viewer"],
    ] {
        let output = Command::new(example())
            .args(args)
            .env_remove("RMCP_SERVER_TOKENS")
            .stdin(Stdio::null())
            .output()
            .expect("runs the example");
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("usage: rmcp_server"), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
    // A bad table entry in the environment is refused too, without echoing it.
    let output = Command::new(example())
        .args(["--http", "127.0.0.1:0"])
        .env(
            "RMCP_SERVER_TOKENS",
            "viewer-token=viewer,secret-without-role",
        )
        .stdin(Stdio::null())
        .output()
        .expect("runs the example");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("RMCP_SERVER_TOKENS"), "{stderr}");
    assert!(!stderr.contains("secret-without-role"), "{stderr}");
}

/// Without `--audit`, each server writes a trail of its own (a JSON Lines trail has one
/// writer): a viewer and an operator served at once both start, and each call is in its
/// server's trail, `capability-rmcp-server-<role>-<pid>.jsonl` in the temporary directory.
#[tokio::test(flavor = "multi_thread")]
async fn two_servers_without_audit_run_at_once_each_on_a_trail_of_its_own() {
    let scratch = Scratch::new("default_trail");
    let spawn = |role: &str| {
        let mut command = tokio::process::Command::new(example());
        command.args(["--role", role]).env("TMPDIR", &scratch.dir);
        TokioChildProcess::new(command).expect("spawns the example")
    };
    let viewer = ().serve(spawn("viewer")).await.expect("the viewer's server");
    let operator = ().serve(spawn("operator")).await.expect("the operator's server, at once");
    assert!(rmcp_call(&viewer, READ_ONLY_TOOL).await.is_ok());
    assert!(rmcp_call(&operator, READ_ONLY_TOOL).await.is_ok());
    assert!(rmcp_call(&viewer, HIDDEN_TOOL).await.is_err());
    let _ = viewer.cancel().await;
    let _ = operator.cancel().await;
    let mut trails: Vec<(String, usize)> = std::fs::read_dir(&scratch.dir)
        .expect("the temporary directory")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .map(|path| {
            let name = path.file_name().expect("a name").to_string_lossy();
            let role = name
                .strip_prefix("capability-rmcp-server-")
                .and_then(|rest| rest.split('-').next())
                .unwrap_or_else(|| panic!("an unexpected trail {name}"))
                .to_owned();
            let report = capability::audit::verify_jsonl(&path).expect("verifies");
            assert!(report.is_intact(), "{name}: {report:?}");
            (role, report.records as usize)
        })
        .collect();
    trails.sort();
    // Each: a call that ran (its intent and its outcome); the viewer's also one refused.
    assert_eq!(
        trails,
        [("operator".to_owned(), 2), ("viewer".to_owned(), 3)]
    );
}

#[test]
fn stdio_ignores_the_token_table_of_the_environment() {
    let scratch = Scratch::new("stdio_env");
    let output = Command::new(example())
        .args(["--role", "viewer"])
        .args(scratch.args())
        .env("RMCP_SERVER_TOKENS", "not a table")
        .stdin(Stdio::null())
        .output()
        .expect("runs the example");
    // stdin is closed at once: the server starts, sees the end of its input and stops.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("serving stdio as role viewer"), "{stderr}");
    assert!(
        output.stdout.is_empty(),
        "stdout is the MCP channel: {output:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_checkpoint_key_a_cut_tail_is_found() {
    use capability::audit::{ChainProblem, verify_jsonl_with_key};
    use capability::gate::SecretKey;

    let scratch = Scratch::new("checkpoint_key");
    let key = SecretKey::generate().expect("a key");
    let key_file = scratch.dir.join("audit.key");
    std::fs::write(&key_file, key.to_text()).expect("writes the key");
    let mut child = tokio::process::Command::new(example())
        .args(["--role", "viewer", "--checkpoint-key"])
        .arg(&key_file)
        .args(scratch.args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawns the example");
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        panic!("piped");
    };
    let client = ().serve((stdout, stdin)).await.expect("connects");
    for _ in 0..3 {
        rmcp_call(&client, READ_ONLY_TOOL)
            .await
            .expect("the viewer's read runs");
    }
    let _ = client.cancel().await;
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the example stops when its input closes")
        .expect("an exit status");
    assert!(status.success(), "{status}");

    // Intact, and the final checkpoint vouches for the last record.
    let report = verify_jsonl_with_key(scratch.audit(), &key.public_key()).expect("verifies");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.records, 6, "an intent and an outcome per call");
    let last = report.checkpoints.last().expect("a checkpoint at shutdown");
    assert_eq!((last.seq, &last.head), (6, &report.last_hash), "{last:?}");

    // Cut the last call off the end, keeping the checkpoint line: found, with the key.
    let text = std::fs::read_to_string(scratch.audit()).expect("the trail");
    // (The tree checkpoint lines beside the chain's are left out: checked in tree_sinks.)
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("{\"tree_checkpoint\""))
        .collect();
    let (checkpoint, records) = lines.split_last().expect("lines");
    assert!(checkpoint.starts_with("{\"checkpoint\""), "{checkpoint}");
    let cut = format!(
        "{}\n{checkpoint}\n",
        records[..records.len() - 2].join("\n")
    );
    std::fs::write(scratch.audit(), cut).expect("cuts the tail");
    let report = verify_jsonl_with_key(scratch.audit(), &key.public_key()).expect("verifies");
    assert!(
        report
            .chain_problems
            .iter()
            .any(|p| matches!(p, ChainProblem::TailCut { .. })),
        "{report:?}"
    );

    // A key file that is not a key starts nothing.
    std::fs::write(&key_file, "not a key").expect("writes");
    let output = Command::new(example())
        .args(["--role", "viewer", "--checkpoint-key"])
        .arg(&key_file)
        .args(scratch.args())
        .stdin(Stdio::null())
        .output()
        .expect("runs the example");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a secret key"), "{stderr}");
}

/// Without a token, or with one not in the table: the handshake and both calls get a 401 with
/// the challenge, and no session; the two calls of each are recorded as refused.
fn nobody_gets_401s(url: &str) {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let call = |tool: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": tool, "arguments": {"name": "web-1"}}})
    };
    for token in [None, Some("Bearer guessed-token")] {
        let headers: Vec<(&str, &str)> = token.iter().map(|t| ("Authorization", *t)).collect();
        for body in [initialize.clone(), call(READ_ONLY_TOOL), call(HIDDEN_TOOL)] {
            let answer = support::raw_post(url, &headers, &body);
            assert_eq!(answer.status, 401, "{token:?}: {answer:?}");
            assert!(answer.header("www-authenticate").is_some(), "{answer:?}");
            assert!(answer.header("mcp-session-id").is_none());
        }
    }
}

/// The example behind the HTTP edge with OAuth access tokens of a real authorization server
/// (`oidc-provider`): the token's scopes give the role and narrow its scopes; a call whose tool
/// needs a scope the token lacks is answered `403 insufficient_scope` naming every scope it
/// needs, and never reaches the tool; with the scope, it runs; each call is recorded with the
/// principal.
#[tokio::test(flavor = "multi_thread")]
async fn oauth_tokens_give_the_role_and_a_missing_scope_is_a_403() {
    use support::auth::AuthServer;
    let Some(servers) =
        support::require_servers("oauth_tokens_give_the_role_and_a_missing_scope_is_a_403")
    else {
        return;
    };
    let scratch = Scratch::new("oauth");
    let auth = AuthServer::start(
        &servers,
        &scratch.dir,
        &json!({"port": 0, "clients": [
            {"client_id": "ops", "client_secret": "ops-secret", "scope": "mcp:admin k8s:read k8s:write", "alg": "EdDSA"},
        ]}),
    );
    let port = capability_testkit::free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let policy = scratch.dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "{}\n[auth]\nissuer = \"{}\"\naudience = \"{url}\"\n[auth.scope_roles]\n\"mcp:admin\" = \"operator\"\n",
            include_str!("../../examples/rmcp_server_policy.toml"),
            auth.issuer
        ),
    )
    .expect("policy");
    let mut child = Command::new(example())
        .args(["--http", &format!("127.0.0.1:{port}"), "--policy"])
        .arg(&policy)
        .args(scratch.args())
        .env_remove("RMCP_SERVER_TOKENS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts the example");
    let stderr = child.stderr.take().expect("piped");
    let (ready, listening) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[example] {line}");
            if line.contains("listening on") {
                let _ = ready.send(());
            }
        }
    });
    listening
        .recv_timeout(READY_TIMEOUT)
        .expect("the example listens");

    // A token without `k8s:write`: the operator's role, but not its write scope.
    let narrow = auth
        .token("ops", "ops-secret", "mcp:admin k8s:read", Some(&url))
        .expect("a token");
    let client = rmcp_http(&url, Some(&narrow)).await;
    let listed: Vec<String> = client
        .list_all_tools()
        .await
        .expect("lists")
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(
        !listed.contains(&HIDDEN_TOOL.to_owned()),
        "hidden without its scope: {listed:?}"
    );
    rmcp_call(&client, READ_ONLY_TOOL)
        .await
        .expect("the read runs");
    let _ = client.cancel().await;
    let answer = support::raw_post(
        &url,
        &[("Authorization", &format!("Bearer {narrow}"))],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": HIDDEN_TOOL, "arguments": {"name": "web-1"}}}),
    );
    assert_eq!(answer.status, 403, "{answer:?}");
    let challenge = answer.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.contains("scope=\"k8s:write\"")
            && challenge.contains("resource_metadata=\""),
        "{challenge}"
    );
    // With the scope: the restart runs.
    let wide = auth
        .token(
            "ops",
            "ops-secret",
            "mcp:admin k8s:read k8s:write",
            Some(&url),
        )
        .expect("a token");
    let client = rmcp_http(&url, Some(&wide)).await;
    rmcp_call(&client, HIDDEN_TOOL)
        .await
        .expect("runs with its scope");
    let _ = client.cancel().await;
    let _ = child.kill();
    let _ = child.wait();

    assert_eq!(
        scratch.ran(),
        [READ_ONLY_TOOL, HIDDEN_TOOL],
        "the refused call never ran"
    );
    let records = lines(&scratch.audit());
    let refused = records
        .iter()
        .find(|r| r["tool"] == HIDDEN_TOOL && r["verdict"] == "denied")
        .expect("the 403 is on record");
    assert_eq!(
        refused["reasons"][0]["reason"], "missing_scopes",
        "{refused}"
    );
    assert_eq!(refused["principal"]["sub"], "ops", "{refused}");
    assert!(
        records
            .iter()
            .filter(|r| r.get("checkpoint").is_none())
            .all(|r| r["principal"]["iss"] == auth.issuer.as_str())
    );
}
