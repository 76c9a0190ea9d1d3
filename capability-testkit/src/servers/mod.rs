//! The official MCP reference servers, for the integration tests.
//!
//! `use capability_testkit::servers;` (and `use capability_testkit::require_servers;` for the
//! macro). The servers are pinned in
//! `tests/mcp-servers/` at the workspace root (`package.json` and `package-lock.json`); on first use
//! they are installed with `npm ci` into `<target dir>/mcp-servers`, once per lock file, and every
//! test binary shares that install. A test that needs them starts with
//! `let servers = require_servers!("my_test");`, which skips the test loudly when Node.js or npm is
//! missing or the install fails, or panics instead when `CAPABILITY_REQUIRE_MCP_SERVERS=1` (CI).
//!
//! std and serde_json only.

// Each test binary uses only part of this module.
#![allow(dead_code)]

pub mod auth;
pub mod browser;
pub mod conformance;
pub mod fake;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

/// The environment variable that turns a skip into a failure (CI sets it to `1`).
pub const REQUIRE_ENV: &str = "CAPABILITY_REQUIRE_MCP_SERVERS";

/// The oldest Node.js major version the pinned servers' dependencies accept
/// (`@hono/node-server` and `glob` declare `>=20`).
const MIN_NODE_MAJOR: u32 = 20;

/// How long one test binary waits for another one's install to finish.
const LOCK_WAIT: Duration = Duration::from_secs(5 * 60);
/// How long `npm ci` may run before it is killed.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// A lock file older than this was left by an install that died (it cannot still be running,
/// since an install is killed after [`INSTALL_TIMEOUT`]), and is removed.
const STALE_LOCK: Duration = Duration::from_secs(10 * 60);
const POLL: Duration = Duration::from_millis(200);

/// The files of `tests/mcp-servers/` that are copied into the install directory.
const PACKAGE_JSON: &str = "package.json";
const PACKAGE_LOCK: &str = "package-lock.json";
/// In the install directory: a copy of what the last successful `npm ci` installed.
const STAMP: &str = ".installed";
/// The TypeScript SDK client script, copied next to `node_modules` (ES modules resolve packages
/// from the importing file's directory).
const TS_CLIENT: &str = "ts-client.mjs";
/// The drift test server (`tests/mcp-servers/drift-server.mjs`, the SDK's server API), copied
/// next to `node_modules` like the client script.
const DRIFT_SERVER: &str = "drift-server.mjs";
/// In the install directory: held while one process installs.
const LOCK: &str = ".install.lock";
/// In the install directory: the output of the last `npm ci`.
const LOG: &str = "npm-ci.log";

const SCOPE: &str = "@modelcontextprotocol";
const FILESYSTEM: &str = "server-filesystem";
const MEMORY: &str = "server-memory";
const EVERYTHING: &str = "server-everything";
/// The official TypeScript SDK (`@modelcontextprotocol/sdk`), for its client.
const SDK: &str = "sdk";
/// The entry point of each server, from its package's `"bin"` field.
const ENTRY: &str = "dist/index.js";
/// A file every install of the SDK has, checked after `npm ci`.
const SDK_CLIENT: &str = "dist/esm/client/index.js";

/// A reference server, ready to spawn: `program args...` with `env` added to the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The npm package name without its scope, e.g. `server-memory`.
    pub name: &'static str,
    /// The program to run: `node`.
    pub program: PathBuf,
    /// Its arguments, the entry point's absolute path first.
    pub args: Vec<String>,
    /// Variables to add to the inherited environment.
    pub env: Vec<(String, String)>,
}

impl McpServer {
    /// A [`Command`] for the server over stdio: stdin and stdout piped (the JSON-RPC channel),
    /// stderr inherited (the servers log there), so the test output shows it.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        command
    }

    /// The command as a TOML array (`["node", "/…/dist/index.js"]`), for a policy's `[servers]`.
    pub fn toml_command(&self) -> String {
        toml_words(&self.program.display().to_string(), &self.args)
    }

    /// Its added variables as a TOML inline table, for a policy's `env`.
    pub fn toml_env(&self) -> String {
        let pairs: Vec<String> = self
            .env
            .iter()
            .map(|(k, v)| format!("{k} = {v:?}"))
            .collect();
        format!("{{ {} }}", pairs.join(", "))
    }

    /// The command line, for messages: `node /…/dist/index.js /root`.
    pub fn command_line(&self) -> String {
        let mut line: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        line.push(self.program.display().to_string());
        line.extend(self.args.iter().cloned());
        line.join(" ")
    }
}

/// `program` and `args` as a TOML array of strings.
pub fn toml_words(program: &str, args: &[String]) -> String {
    let words: Vec<String> = std::iter::once(program.to_owned())
        .chain(args.iter().cloned())
        .map(|w| format!("{w:?}"))
        .collect();
    format!("[{}]", words.join(", "))
}

/// Where the TypeScript SDK client connects.
#[derive(Debug, Clone, Copy)]
pub enum TsTarget<'a> {
    /// Streamable HTTP at `url`, with `Authorization: Bearer <token>` when given.
    Http {
        /// The MCP endpoint, e.g. `http://127.0.0.1:8090/mcp`.
        url: &'a str,
        /// The bearer token.
        token: Option<&'a str>,
    },
    /// A server it spawns over stdio.
    Stdio {
        /// The program.
        program: &'a Path,
        /// Its arguments.
        args: &'a [String],
    },
}

/// The JSON lines a [`Servers::ts_client`] run printed, parsed; `Err` with its output when the
/// client failed or printed something that is not JSON.
pub fn ts_client_lines(output: &std::process::Output) -> Result<Vec<serde_json::Value>, String> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!("ts-client exited with {}: {stdout}", output.status));
    }
    stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).map_err(|e| format!("ts-client printed {line:?}: {e}"))
        })
        .collect()
}

/// The TypeScript client's operations for server-everything's long call: 4 steps in 0.4 s,
/// with the SDK's `onprogress`.
pub fn long_call_with_progress(name: &str) -> serde_json::Value {
    serde_json::json!([
        {"op": "call", "name": name,
         "arguments": {"duration": 0.4, "steps": 4}, "progress": true},
    ])
}

/// Asserts that the long call of [`long_call_with_progress`] (`call`, its line) completed and
/// its `onprogress` heard the server's steps in order. The server writes its last progress
/// just before its answer; the SDK handles a notification a microtask after an answer read
/// with it, so when the two arrive in one read the last progress is dropped there
/// (typescript-sdk#2580): the first three must be heard, the fourth may be.
pub fn assert_heard_the_long_calls_progress(call: &serde_json::Value) {
    use serde_json::json;
    assert!(
        call["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Long running operation completed"),
        "{call}"
    );
    let heard: Vec<(serde_json::Value, serde_json::Value)> = call["progress"]
        .as_array()
        .map(|each| {
            each.iter()
                .map(|p| (p["progress"].clone(), p["total"].clone()))
                .collect()
        })
        .unwrap_or_default();
    let sent: Vec<(serde_json::Value, serde_json::Value)> =
        (1..=4).map(|i| (json!(i), json!(4))).collect();
    assert!(
        heard == sent || heard == sent[..3],
        "heard {heard:?} of {sent:?}: {call}"
    );
}

/// The read-only tools of `server-everything` as recorded in
/// `tests/fixtures/mcp/server-everything.tools.json` (those whose `readOnlyHint` is true).
pub fn recorded_read_only_tools_of_everything() -> Vec<String> {
    let path = workspace_root()
        .join("tests")
        .join("fixtures")
        .join("mcp")
        .join("server-everything.tools.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let list: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    list["tools"]
        .as_array()
        .expect("a tools array")
        .iter()
        .filter(|t| t["annotations"]["readOnlyHint"] == true)
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// The installed reference servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Servers {
    /// `<install dir>/node_modules`.
    node_modules: PathBuf,
}

impl Servers {
    /// The install's `node_modules` directory.
    pub fn node_modules(&self) -> &Path {
        &self.node_modules
    }

    fn entry(&self, package: &str) -> String {
        let entry = if package == SDK { SDK_CLIENT } else { ENTRY };
        self.node_modules
            .join(SCOPE)
            .join(package)
            .join(entry)
            .display()
            .to_string()
    }

    /// The official TypeScript SDK client (`tests/mcp-servers/ts-client.mjs` over the pinned
    /// `@modelcontextprotocol/sdk`), connecting to `target` and running `ops` (a JSON array, see
    /// the script's header). Run it with [`Command::output`]: stdout has one JSON line per
    /// operation, the first for the connection.
    pub fn ts_client(&self, ops: &serde_json::Value, target: TsTarget<'_>) -> Command {
        let script = self
            .node_modules
            .parent()
            .unwrap_or(&self.node_modules)
            .join(TS_CLIENT);
        let mut command = Command::new("node");
        command
            .arg(script)
            .arg("--ops")
            .arg(ops.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        match target {
            TsTarget::Http { url, token } => {
                command.arg("--http").arg(url);
                if let Some(token) = token {
                    command.arg("--token").arg(token);
                }
            }
            TsTarget::Stdio { program, args } => {
                command.arg("--stdio").arg(program).args(args);
            }
        }
        command
    }

    /// `@modelcontextprotocol/server-filesystem`, allowed to reach `root` (and what is under it):
    /// `node <install>/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js <root>`.
    pub fn filesystem(&self, root: &Path) -> McpServer {
        McpServer {
            name: FILESYSTEM,
            program: PathBuf::from("node"),
            args: vec![self.entry(FILESYSTEM), absolute(root).display().to_string()],
            env: Vec::new(),
        }
    }

    /// `@modelcontextprotocol/server-memory`, keeping its knowledge graph in `memory_file`
    /// (passed as `MEMORY_FILE_PATH`, made absolute: the server reads a relative one against its own
    /// `dist` directory). The file need not exist.
    pub fn memory(&self, memory_file: &Path) -> McpServer {
        McpServer {
            name: MEMORY,
            program: PathBuf::from("node"),
            args: vec![self.entry(MEMORY)],
            env: vec![(
                "MEMORY_FILE_PATH".to_owned(),
                absolute(memory_file).display().to_string(),
            )],
        }
    }

    /// `tests/mcp-servers/drift-server.mjs` over stdio: a server of the SDK's server API whose
    /// tool `shifty` changes its description when `drift` is called (see the script's header).
    pub fn drift(&self) -> McpServer {
        let script = self
            .node_modules
            .parent()
            .unwrap_or(&self.node_modules)
            .join(DRIFT_SERVER);
        McpServer {
            name: "drift-server",
            program: PathBuf::from("node"),
            args: vec![script.display().to_string()],
            env: Vec::new(),
        }
    }

    /// `@modelcontextprotocol/server-everything` over stdio (its first argument picks the transport:
    /// `stdio`, `sse` or `streamableHttp`; stdio is the default, passed explicitly here).
    pub fn everything(&self) -> McpServer {
        McpServer {
            name: EVERYTHING,
            program: PathBuf::from("node"),
            args: vec![self.entry(EVERYTHING), "stdio".to_owned()],
            env: Vec::new(),
        }
    }
}

/// The servers, installed with `npm ci` into `<target>/mcp-servers` on first use (once per process,
/// and again only when the pinned lock file changes); `Err` with the reason when Node.js or npm is
/// missing or the install fails.
pub fn servers() -> Result<Servers, String> {
    static SERVERS: OnceLock<Result<Servers, String>> = OnceLock::new();
    SERVERS.get_or_init(install).clone()
}

/// What `require_servers!` does: the servers, or `None` after printing `SKIPPED: <test>: <reason>`
/// to stderr; panics instead of skipping when `CAPABILITY_REQUIRE_MCP_SERVERS=1`.
pub fn require_servers(test: &str) -> Option<Servers> {
    match servers() {
        Ok(servers) => Some(servers),
        Err(reason) if required() => {
            panic!("{test}: the MCP reference servers are required ({REQUIRE_ENV}=1): {reason}")
        }
        Err(reason) => {
            // Straight to the process's stderr, not through `eprintln!`, which the test harness
            // captures and shows only for failing tests: a skip must be seen.
            let _ = writeln!(
                io::stderr(),
                "SKIPPED: {test}: {reason}\n(set {REQUIRE_ENV}=1 to make this a failure)"
            );
            None
        }
    }
}

fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v.trim() == "1")
}

/// The servers, or return from the test after printing `SKIPPED: <test name>: <reason>` to stderr.
/// Panics instead when `CAPABILITY_REQUIRE_MCP_SERVERS=1`.
///
/// `require_servers!("test name")` returns `()`; in a test returning something else, give the value
/// to return: `require_servers!("test name", Ok(()))`.
#[macro_export]
macro_rules! require_servers {
    ($name:expr) => {
        $crate::require_servers!($name, ())
    };
    ($name:expr, $skipped:expr) => {
        match $crate::servers::require_servers($name) {
            ::std::option::Option::Some(servers) => servers,
            ::std::option::Option::None => return $skipped,
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Install

fn install() -> Result<Servers, String> {
    let source = source_dir();
    let node_modules = npm_install(
        &source,
        &install_dir("mcp-servers"),
        &[
            TS_CLIENT,
            DRIFT_SERVER,
            auth::AUTH_SERVER,
            auth::MINT_JWT,
            auth::TS_OAUTH_CLIENT,
            auth::TS_LATENCY,
        ],
    )?;
    let servers = Servers { node_modules };
    for package in [FILESYSTEM, MEMORY, EVERYTHING, SDK] {
        let entry = PathBuf::from(servers.entry(package));
        if !entry.is_file() {
            return Err(format!(
                "{} is missing after `npm ci`: is {SCOPE}/{package} in {}?",
                entry.display(),
                source.join(PACKAGE_JSON).display()
            ));
        }
    }
    Ok(servers)
}

/// `npm ci` of the `package.json` and `package-lock.json` of `source` into `dir` (again only
/// when either changed, one process at a time), then `scripts` of `source` copied next to
/// `node_modules` (ES modules resolve packages from the importing file's folder): the
/// `node_modules` folder.
pub fn npm_install(source: &Path, dir: &Path, scripts: &[&str]) -> Result<PathBuf, String> {
    crate::tier::interop_only("Node.js and the npm packages")?;
    check_tools()?;
    let package_json = read(&source.join(PACKAGE_JSON))?;
    let package_lock = read(&source.join(PACKAGE_LOCK))?;
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;

    let _lock = InstallLock::acquire(dir)?;
    // What the stamp holds: both files, so a change to either reinstalls.
    let mut wanted = package_lock.clone();
    wanted.extend_from_slice(b"\n\0\n");
    wanted.extend_from_slice(&package_json);

    let node_modules = dir.join("node_modules");
    let up_to_date =
        node_modules.is_dir() && fs::read(dir.join(STAMP)).is_ok_and(|stamp| stamp == wanted);
    if !up_to_date {
        // No stamp while the install is incomplete, so a failed one is retried next time.
        remove_if_present(&dir.join(STAMP))?;
        write(&dir.join(PACKAGE_JSON), &package_json)?;
        write(&dir.join(PACKAGE_LOCK), &package_lock)?;
        npm_ci(dir)?;
        write(&dir.join(STAMP), &wanted)?;
    }
    // Copied on every install check, not stamped: the scripts are not part of what npm installs.
    for script in scripts {
        write(&dir.join(script), &read(&source.join(script))?)?;
    }
    Ok(node_modules)
}

/// `node` (new enough) and `npm` answer `--version`.
fn check_tools() -> Result<(), String> {
    let need = format!("the MCP integration tests need Node.js {MIN_NODE_MAJOR}+ and npm");
    let node = version("node").map_err(|e| format!("node not found: {need} ({e})"))?;
    let major = node
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(major) if major >= MIN_NODE_MAJOR => {}
        _ => return Err(format!("node {node} is too old or unknown: {need}")),
    }
    version(npm()).map_err(|e| format!("npm not found: {need} ({e})"))?;
    Ok(())
}

/// `<program> --version`, trimmed.
fn version(program: &str) -> Result<String, String> {
    let output = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`{program} --version`: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`{program} --version` {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn npm() -> &'static str {
    if cfg!(windows) { "npm.cmd" } else { "npm" }
}

/// `npm ci --no-audit --no-fund --ignore-scripts` in `dir`, output to `dir/npm-ci.log`, killed
/// after [`INSTALL_TIMEOUT`].
fn npm_ci(dir: &Path) -> Result<(), String> {
    let log_path = dir.join(LOG);
    let log = File::create(&log_path)
        .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let log_err = log
        .try_clone()
        .map_err(|e| format!("cannot reopen {}: {e}", log_path.display()))?;
    let what = format!(
        "`npm ci --no-audit --no-fund --ignore-scripts` in {}",
        dir.display()
    );
    let mut child = Command::new(npm())
        .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > INSTALL_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{what}: still running after {}s, killed{}",
                    INSTALL_TIMEOUT.as_secs(),
                    log_tail(&log_path)
                ));
            }
            Ok(None) => std::thread::sleep(POLL),
            Err(e) => {
                let _ = child.kill();
                return Err(format!("{what}: cannot wait for it: {e}"));
            }
        }
    };
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({status}); does this machine reach the npm registry?{}",
            log_tail(&log_path)
        ))
    }
}

/// The last lines of the npm log, for an error message.
fn log_tail(log: &Path) -> String {
    let Ok(text) = fs::read_to_string(log) else {
        return String::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(30)..];
    format!(
        "\n--- last lines of {} ---\n{}",
        log.display(),
        tail.join("\n")
    )
}

/// A lock file in the install directory, made with `create_new` so that one process installs at a
/// time; removed on drop, also when the install fails or panics.
struct InstallLock {
    path: PathBuf,
}

impl InstallLock {
    fn acquire(dir: &Path) -> Result<Self, String> {
        let path = dir.join(LOCK);
        let start = Instant::now();
        loop {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    // Who holds it, for a person looking at a stuck lock.
                    let _ = writeln!(file, "pid {}", std::process::id());
                    return Ok(Self { path });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if is_stale(&path) {
                        // Left by an install that died: take it over (a concurrent taker loses the
                        // `create_new` race and waits).
                        remove_if_present(&path)?;
                        continue;
                    }
                    if start.elapsed() > LOCK_WAIT {
                        return Err(format!(
                            "waited {}s for another test binary's MCP server install to finish \
                             ({} still exists; remove it if no install is running)",
                            LOCK_WAIT.as_secs(),
                            path.display()
                        ));
                    }
                    std::thread::sleep(POLL);
                }
                Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
            }
        }
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

fn is_stale(lock: &Path) -> bool {
    fs::metadata(lock)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .is_some_and(|age| age > STALE_LOCK)
}

// ---------------------------------------------------------------------------------------------
// Paths

/// The workspace root: the nearest directory at or above this crate's that holds
/// `tests/mcp-servers/package.json` (this crate's parent).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .find(|dir| {
            dir.join("tests")
                .join("mcp-servers")
                .join(PACKAGE_JSON)
                .is_file()
        })
        .unwrap_or(manifest_dir)
        .to_path_buf()
}

/// `tests/mcp-servers/` at the workspace root: the pinned `package.json` and `package-lock.json`.
fn source_dir() -> PathBuf {
    workspace_root().join("tests").join("mcp-servers")
}

/// `<target dir>/<name>`. The target directory is the parent of `CARGO_TARGET_TMPDIR`
/// (`<target>/tmp`, set by Cargo when it builds an integration test), else `CARGO_TARGET_DIR`,
/// else `<workspace>/target`.
pub fn install_dir(name: &str) -> PathBuf {
    let target = option_env!("CARGO_TARGET_TMPDIR")
        .and_then(|tmp| Path::new(tmp).parent().map(Path::to_path_buf))
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(|dir| absolute(Path::new(&dir))))
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join(name)
}

/// `path` made absolute against the current directory (left as it is if that is unknown).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn write(path: &Path, contents: &[u8]) -> Result<(), String> {
    fs::write(path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn remove_if_present(path: &Path) -> Result<(), String> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
    }
}

/// An HTTP answer read by [`raw_post`]: the status, the headers (names in lowercase) and the
/// body.
#[derive(Debug)]
pub struct Raw {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Raw {
    /// The value of header `name` (lowercase), if the answer has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request written byte by byte (no client library between the test and the
/// server): `method` on `url` with `headers` and `body`, `Connection: close`.
pub fn raw_request(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> Raw {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let mut stream = std::net::TcpStream::connect(authority).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("writes");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Raw {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// A JSON-RPC request posted the way a Streamable HTTP client posts one.
pub fn raw_post(url: &str, headers: &[(&str, &str)], body: &serde_json::Value) -> Raw {
    let mut all = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    all.extend_from_slice(headers);
    raw_request("POST", url, &all, &body.to_string())
}

// ---------------------------------------------------------------------------------------------
// An OTLP/HTTP receiver

/// What one POST to an [`OtlpReceiver`] brought: its path, its content type, its body.
pub struct Post {
    pub path: String,
    pub content_type: String,
    pub body: Vec<u8>,
}

/// An OTLP/HTTP receiver on loopback: answers every POST `200` with an empty (valid) export
/// response and keeps what it was sent (`capability-cli/tests/it/otlp.rs` decodes it).
pub struct OtlpReceiver {
    /// `http://127.0.0.1:<port>`, for `--otlp`.
    pub url: String,
    pub posts: std::sync::Arc<std::sync::Mutex<Vec<Post>>>,
}

impl OtlpReceiver {
    pub fn start() -> OtlpReceiver {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let posts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = posts.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let kept = kept.clone();
                std::thread::spawn(move || serve_otlp(stream, &kept));
            }
        });
        OtlpReceiver { url, posts }
    }
}

/// One HTTP/1.1 request as a test's raw server reads it: its request line, headers and body
/// (`Content-Length` bytes).
pub struct Request {
    /// `POST /mcp HTTP/1.1`, without its line end.
    pub line: String,
    /// Each header's name and value, trimmed, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The method: `POST`, `GET`, ...
    pub fn method(&self) -> &str {
        self.line.split_whitespace().next().unwrap_or_default()
    }

    /// The value of header `name` (any case), if the request has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads the next request from `reader`; `None` when the connection ends or is not HTTP.
pub fn read_request(reader: &mut impl std::io::BufRead) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let mut request = Request {
        line: line.trim_end().to_owned(),
        headers,
        body: Vec::new(),
    };
    let length = request
        .header("content-length")
        .map_or(Some(0), |l| l.parse().ok())?;
    request.body = vec![0; length];
    reader.read_exact(&mut request.body).ok()?;
    Some(request)
}

fn serve_otlp(stream: std::net::TcpStream, kept: &std::sync::Mutex<Vec<Post>>) {
    use std::io::Write;
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = std::io::BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        kept.lock().expect("posts").push(Post {
            path: (request.line.split_whitespace().nth(1))
                .unwrap_or_default()
                .to_owned(),
            content_type: request
                .header("content-type")
                .unwrap_or_default()
                .to_owned(),
            body: request.body,
        });
        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n\
                      content-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// A Python server of `tests/python/` (`script`) on a port the system chooses (it is given
/// port 0, so no other test can take the port between its choice and the bind), once it says
/// it listens: the process and its port.
pub async fn python_server(script: &str) -> (tokio::process::Child, u16) {
    use tokio::io::AsyncBufReadExt as _;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/python")
        .join(script);
    let mut server = tokio::process::Command::new("python3")
        .arg(path)
        .arg("0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python server");
    let mut lines = tokio::io::BufReader::new(server.stdout.take().expect("piped")).lines();
    let said = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .expect("the server listens within 30 s")
        .ok()
        .flatten()
        .unwrap_or_default();
    let port = said
        .strip_prefix("listening on port ")
        .and_then(|port| port.trim().parse().ok())
        .unwrap_or_else(|| panic!("the server did not start: {said:?}"));
    (server, port)
}

/// server-everything serving Streamable HTTP on `port`, once it says it listens.
pub async fn everything_over_http(everything: &McpServer, port: u16) -> tokio::process::Child {
    use tokio::io::AsyncBufReadExt as _;
    let mut upstream = tokio::process::Command::new(&everything.program)
        .arg(&everything.args[0])
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start server-everything");
    let mut lines = tokio::io::BufReader::new(upstream.stderr.take().expect("piped")).lines();
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}");
            if line.contains("listening on port") {
                return;
            }
        }
        panic!("server-everything ended without listening");
    })
    .await
    .expect("server-everything listens within 30 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    upstream
}
