//! What the tests of `capability proxy` share: a scratch directory with a policy, the proxy's
//! command line, rmcp's client through a proxy, the TypeScript client through a proxy, and
//! reading the audit trail.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;

use std::time::Duration;

use capability::rmcp::connect_client;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceError};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{self, TsTarget};

pub const BIN: &str = env!("CARGO_BIN_EXE_capability");

/// The binary, through the kit's harness (Cargo names it only for this crate's tests).
pub fn binary() -> capability_testkit::Binary {
    capability_testkit::Binary::new(BIN)
}

/// A fresh directory for one test, with the policy in it.
pub fn scratch(name: &str, policy: &str) -> PathBuf {
    let dir = capability_testkit::fresh_dir(
        Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("proxy")
            .join(name),
    );
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    dir
}

/// `proxy --policy <dir>/policy.toml --role <role> --server <server> --audit <audit> <extra>
/// -- <server command>`.
pub fn proxy_args(
    dir: &Path,
    role: &str,
    server: &str,
    audit: &Path,
    extra: &[&str],
    upstream: &support::McpServer,
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "proxy".into(),
        "--policy".into(),
        dir.join("policy.toml").display().to_string(),
        "--role".into(),
        role.into(),
        "--server".into(),
        server.into(),
        "--audit".into(),
        audit.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.push("--".into());
    // The server's environment goes through `env`, since the proxy passes on its own.
    if !upstream.env.is_empty() {
        args.push("env".into());
        args.extend(upstream.env.iter().map(|(k, v)| format!("{k}={v}")));
    }
    args.push(upstream.program.display().to_string());
    args.extend(upstream.args.iter().cloned());
    args
}

/// rmcp's client, connected through a proxy it spawned.
pub struct Proxied {
    pub child: tokio::process::Child,
    pub client: RunningService<RoleClient, ClientConfig>,
}

impl Proxied {
    pub async fn start(args: &[String]) -> Proxied {
        Proxied::start_with(args, Stdio::inherit()).await
    }

    /// With the proxy's standard error going to `stderr`.
    pub async fn start_with(args: &[String], stderr: Stdio) -> Proxied {
        let mut child = tokio::process::Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the proxy");
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            panic!("piped stdio");
        };
        // A line of up to 64 MiB, as the proxy passes on (rmcp's own bound is 16 MiB; the
        // TypeScript SDK's client has none).
        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(stdout, stdin)
            .with_max_line_length(64 * 1024 * 1024);
        let client = connect_client(transport).await.expect("MCP handshake");
        Proxied { child, client }
    }

    /// The proxy spawned with `args`, its standard input and output the transport of a client
    /// with `handler` (of the protocol revision `lifecycle` speaks).
    pub async fn spawn_for<H: rmcp::ClientHandler>(
        args: &[String],
        handler: H,
        lifecycle: rmcp::service::ClientLifecycleMode,
    ) -> (tokio::process::Child, RunningService<RoleClient, H>) {
        use rmcp::service::ClientServiceExt;
        let mut child = tokio::process::Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the proxy");
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            panic!("piped stdio");
        };
        let client = handler
            .serve_with_lifecycle((stdout, stdin), lifecycle)
            .await
            .expect("MCP handshake");
        (child, client)
    }

    pub async fn names(&self) -> Vec<String> {
        let tools = self.client.peer().list_tools(None).await.expect("lists");
        tools.tools.iter().map(|t| t.name.to_string()).collect()
    }

    pub async fn call(&self, tool: &str, arguments: Value) -> Result<String, rmcp::ErrorData> {
        let mut request = CallToolRequestParams::new(tool.to_owned());
        request.arguments = arguments.as_object().cloned();
        match self.client.peer().call_tool(request).await {
            Ok(result) => Ok(serde_json::to_string(&result).expect("JSON")),
            Err(ServiceError::McpError(error)) => Err(error),
            Err(other) => panic!("`{tool}`: {other}"),
        }
    }

    /// Closes the client's side; the proxy stops the server and exits with its status.
    pub async fn close(mut self) -> std::process::ExitStatus {
        let _ = self.client.cancel().await;
        tokio::time::timeout(std::time::Duration::from_secs(10), self.child.wait())
            .await
            .expect("the proxy exits once the client is gone")
            .expect("exit status")
    }
}

/// The audit records of a JSON Lines trail (checkpoint lines left out).
pub fn records(trail: &Path) -> Vec<Value> {
    records_in(&std::fs::read_to_string(trail).expect("the trail exists"))
}

/// The audit records of a trail's text (checkpoint lines left out).
pub fn records_in(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .filter(|line| line.get("checkpoint").is_none())
        .collect()
}

/// One record per call, in the order the calls were made: the outcome of a call that ran, in
/// its intent's place (each outcome checked to follow its intent, which is left out; a lane
/// answers a call before it writes the outcome, so the next call's records may come between),
/// the one record of a call that did not run.
pub fn calls(trail: &Path) -> Vec<Value> {
    calls_in(&std::fs::read_to_string(trail).expect("the trail exists"))
}

/// [`calls`] of a trail's text.
pub fn calls_in(text: &str) -> Vec<Value> {
    let records = records_in(text);
    for (i, record) in records.iter().enumerate() {
        if record["phase"] == "outcome" {
            assert!(
                records[..i]
                    .iter()
                    .any(|r| r["phase"] == "intent" && r["call_id"] == record["call_id"]),
                "an outcome without its intent: {record}"
            );
        }
    }
    // Each call's place is its first record's; an intent's place takes its outcome.
    let mut places: Vec<Option<Value>> = Vec::new();
    let mut waiting = std::collections::HashMap::new();
    for record in records {
        match record["phase"].as_str() {
            Some("intent") => {
                waiting.insert(record["call_id"].to_string(), places.len());
                places.push(None);
            }
            Some("outcome") => match waiting.remove(&record["call_id"].to_string()) {
                Some(place) => places[place] = Some(record),
                None => places.push(Some(record)),
            },
            _ => places.push(Some(record)),
        }
    }
    places.into_iter().flatten().collect()
}

/// `(role, tool, verdict)` of each call (see [`calls`]).
pub fn summary(trail: &Path) -> Vec<(String, String, String)> {
    calls(trail)
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("role"), s("tool"), s("verdict"))
        })
        .collect()
}

pub fn triple(role: &str, tool: &str, verdict: &str) -> (String, String, String) {
    (role.to_owned(), tool.to_owned(), verdict.to_owned())
}

/// `capability audit verify <trail>` exits 0.
pub fn verifies(trail: &Path) {
    let out = std::process::Command::new(BIN)
        .args(["audit", "verify"])
        .arg(trail)
        .output()
        .expect("run capability audit verify");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs the TypeScript SDK client through a proxy started with `args`; its JSON lines.
pub fn ts_through_proxy(servers: &support::Servers, ops: &Value, args: &[String]) -> Vec<Value> {
    let output = servers
        .ts_client(
            ops,
            TsTarget::Stdio {
                program: Path::new(BIN),
                args,
            },
        )
        .output()
        .expect("run the TypeScript client");
    support::ts_client_lines(&output).expect("the client ran")
}

pub fn listed(line: &Value) -> Vec<String> {
    line["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {line}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The pids of the children of process `pid` (Linux: `/proc/<pid>/task/*/children`).
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// A proxy started with `--listen 127.0.0.1:0`, and the URL it printed.
pub struct Listening {
    pub child: tokio::process::Child,
    pub url: String,
    /// Every line it has written to standard error so far (each also goes to the test's).
    pub said: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Listening {
    pub async fn start(dir: &Path, trail: &Path, server: &support::McpServer) -> Listening {
        Listening::start_as(dir, trail, "memory", &[], server).await
    }

    pub async fn start_as(
        dir: &Path,
        trail: &Path,
        name: &str,
        extra: &[&str],
        server: &support::McpServer,
    ) -> Listening {
        Listening::start_at(dir, trail, name, extra, server, "127.0.0.1:0").await
    }

    /// Listening on `address` (`127.0.0.1:0` picks a free port).
    pub async fn start_at(
        dir: &Path,
        trail: &Path,
        name: &str,
        extra: &[&str],
        server: &support::McpServer,
        address: &str,
    ) -> Listening {
        let mut command = tokio::process::Command::new(BIN);
        command
            .arg("proxy")
            .arg("--policy")
            .arg(dir.join("policy.toml"))
            .args(["--server", name, "--listen", address, "--audit"])
            .arg(trail)
            .args(extra)
            .arg("--")
            .arg(&server.program)
            .args(&server.args)
            .envs(server.env.iter().map(|(k, v)| (k, v)));
        Listening::spawn(command).await
    }

    /// `capability` with `args` (a `proxy --listen ...` command line, without the program).
    pub async fn start_args(args: &[String]) -> Listening {
        let mut command = tokio::process::Command::new(BIN);
        command.args(args);
        Listening::spawn(command).await
    }

    async fn spawn(mut command: tokio::process::Command) -> Listening {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn the proxy");
        let stderr = child.stderr.take().expect("piped");
        let mut lines = BufReader::new(stderr).lines();
        let said = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = |line: &str| {
            eprintln!("{line}");
            said.lock().expect("said").push(line.to_owned());
        };
        let url = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(line)) = lines.next_line().await {
                keep(&line);
                if let Some((_, url)) = line.split_once("listening on http://") {
                    return format!("http://{}", url.trim());
                }
            }
            panic!("the proxy ended without listening");
        })
        .await
        .expect("the proxy listens within 30 s");
        // The rest of its messages go to the test's output, and are kept.
        let kept = said.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("{line}");
                kept.lock().expect("said").push(line);
            }
        });
        Listening { child, url, said }
    }

    /// SIGTERM: the proxy stops the server, closes the trail and exits 0.
    pub async fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running");
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("the proxy exits on SIGTERM")
            .expect("status")
    }
}

/// How many of the lines in `said` (a [`Listening::said`]) contain `text`.
pub fn lines_saying(said: &std::sync::Mutex<Vec<String>>, text: &str) -> usize {
    said.lock()
        .expect("said")
        .iter()
        .filter(|line| line.contains(text))
        .count()
}

/// rmcp's client over Streamable HTTP, with a bearer token if given.
pub async fn http_client(
    url: &str,
    token: Option<&str>,
) -> RunningService<RoleClient, ClientConfig> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    connect_client(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("MCP handshake over HTTP")
}

/// `capability gateway --policy <policy> --role <role> --audit <trail>` (and `extra`), as the
/// arguments after the program.
pub fn gateway_stdio(policy: &Path, role: &str, trail: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "gateway".into(),
        "--policy".into(),
        policy.display().to_string(),
        "--role".into(),
        role.into(),
        "--audit".into(),
        trail.display().to_string(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

/// `capability gateway --policy <policy> --listen <address> --audit <trail>`, as the arguments
/// after the program.
pub fn gateway_listen(policy: &Path, address: &str, trail: &Path) -> Vec<String> {
    vec![
        "gateway".into(),
        "--policy".into(),
        policy.display().to_string(),
        "--listen".into(),
        address.into(),
        "--audit".into(),
        trail.display().to_string(),
    ]
}

/// Sends `SIGHUP` to the process `pid`.
pub fn hangup(pid: &str) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", pid])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -HUP {pid}");
}

/// Whether a thread of process `pid` waits in the kernel's pipe write (`pipe_write`, or
/// `anon_pipe_write` on newer kernels), read from `/proc/<pid>/task/*/wchan`.
pub fn blocked_writing_a_pipe(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("wchan"))
            .is_ok_and(|wchan| wchan.contains("pipe_write"))
    })
}

/// Waits, for at most 60 s, until `still` has held at six looks 50 ms apart in a row while
/// the most memory `pid` has held (`VmHWM`) stayed the same: what it was waiting for has
/// stopped (a writer held back), not merely paused. Whether it did.
pub fn settled(pid: u32, mut still: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut run = 0;
    let mut peak = peak_kib(pid);
    while std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        let now = peak_kib(pid);
        run = if still() && now == peak { run + 1 } else { 0 };
        peak = now;
        if run == 6 {
            return true;
        }
    }
    false
}

/// The most memory `pid` has held at once, in KiB (`VmHWM`); `None` once it has exited.
pub fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Kills the child when dropped during a panic. A test whose thread writes to a child that has
/// stopped reading (inside `std::thread::scope`) would otherwise hang when it fails: the scope
/// waits for the writer, which waits for the child, so the assertion's message never appears.
/// Killed, the child's input closes, the writer's next write fails and the panic goes on.
pub struct KillOnPanic<'a>(pub &'a mut std::process::Child);

impl Drop for KillOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The lines a client read from the gateway (`lines`, one JSON message each), up to and
/// including the one answering `id`, as written; within 20 s, else the test fails naming what
/// it saw.
pub fn until_answer(lines: &std::sync::mpsc::Receiver<String>, id: &Value) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        let Ok(line) = lines.recv_timeout(left) else {
            break;
        };
        let value: Value = serde_json::from_str(&line).expect("the gateway writes JSON");
        seen.push(line);
        if value.get("method").is_none() && &value["id"] == id {
            return seen;
        }
    }
    panic!("no answer to {id}; seen: {seen:?}")
}
