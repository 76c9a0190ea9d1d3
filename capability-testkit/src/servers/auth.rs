//! A real OAuth 2.1 authorization server for the tests (`tests/mcp-servers/auth-server.mjs`, on
//! the pinned `oidc-provider`), the OAuth clients of the official SDKs (TypeScript:
//! `ts-oauth-client.mjs`; Python: `tests/python/oauth_client.py` in a virtual environment
//! installed from the hash-pinned `tests/python/requirements.txt`), and a token endpoint client
//! for tests that need a token in hand.
//!
//! std and serde_json only.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::{Servers, raw_request};

/// The authorization server script, copied next to `node_modules`.
pub(super) const AUTH_SERVER: &str = "auth-server.mjs";
/// The script that signs a JWT with an authorization server's private keys (its `keys` file).
pub(super) const MINT_JWT: &str = "mint-jwt.mjs";
/// The TypeScript SDK's OAuth client script, copied next to `node_modules`.
pub(super) const TS_OAUTH_CLIENT: &str = "ts-oauth-client.mjs";
/// The TypeScript SDK client that times calls, for the HTTP benchmark.
pub(super) const TS_LATENCY: &str = "ts-latency.mjs";

/// A running `auth-server.mjs`: its issuer `http://127.0.0.1:<port>`. Stopped when dropped.
pub struct AuthServer {
    child: Child,
    /// The issuer identifier (also its base URL).
    pub issuer: String,
    /// Its port.
    pub port: u16,
}

impl AuthServer {
    /// Starts the server with `config` (see the script's header: `port`, `clients`, `keys`),
    /// written to `dir/auth-config.json`, and waits for its one line on standard output.
    pub fn start(servers: &Servers, dir: &Path, config: &serde_json::Value) -> AuthServer {
        let config_path = dir.join("auth-config.json");
        fs::write(&config_path, config.to_string()).expect("writes the config");
        let script = servers
            .node_modules()
            .parent()
            .expect("the install directory")
            .join(AUTH_SERVER);
        let mut child = Command::new("node")
            .arg(script)
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starts node");
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the authorization server starts within 60 s");
        let issuer = line
            .trim()
            .strip_prefix("auth-server listening on ")
            .unwrap_or_else(|| panic!("the authorization server said {line:?}"))
            .to_owned();
        let port = issuer
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port");
        AuthServer {
            child,
            issuer,
            port,
        }
    }

    /// A token from the token endpoint (client credentials, `client_secret_post`) for
    /// `resource` (RFC 8707), or the endpoint's error.
    pub fn token(
        &self,
        client_id: &str,
        secret: &str,
        scope: &str,
        resource: Option<&str>,
    ) -> Result<String, String> {
        let mut form = format!(
            "grant_type=client_credentials&client_id={}&client_secret={}&scope={}",
            encode(client_id),
            encode(secret),
            encode(scope)
        );
        if let Some(resource) = resource {
            form.push_str(&format!("&resource={}", encode(resource)));
        }
        let answer = raw_request(
            "POST",
            &format!("{}/token", self.issuer),
            &[("Content-Type", "application/x-www-form-urlencoded")],
            &form,
        );
        let body: serde_json::Value =
            serde_json::from_str(&answer.body).map_err(|e| format!("{e}: {}", answer.body))?;
        match body["access_token"].as_str() {
            Some(token) if answer.status == 200 => Ok(token.to_owned()),
            _ => Err(format!("{}: {}", answer.status, answer.body)),
        }
    }

    /// A JWT signed with the issuer's own private key for `header.alg` (from its `keys` file,
    /// which the server was started with), with `header` and `claims` as given: what else an
    /// issuer signs than access tokens (ID tokens), for the resource server's refusals.
    pub fn mint(
        servers: &Servers,
        keys: &Path,
        header: &serde_json::Value,
        claims: &serde_json::Value,
    ) -> String {
        let script = servers
            .node_modules()
            .parent()
            .expect("the install directory")
            .join(MINT_JWT);
        let out = Command::new("node")
            .arg(script)
            .arg(keys)
            .arg(header.to_string())
            .arg(claims.to_string())
            .output()
            .expect("node runs");
        assert!(
            out.status.success(),
            "mint-jwt: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Stops the server (SIGTERM, then waits).
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.terminate();
        }
    }
}

/// Percent-encoding for a form value: everything but unreserved characters.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Servers {
    /// `ts-latency.mjs --interleaved`: one client per command (or per Streamable HTTP endpoint:
    /// a URL, then its bearer token if any), the calls taken in turns (each turn visits every
    /// command once, in a shuffled order), `calls` turns after 50 of warm-up.
    pub fn ts_latency_interleaved(&self, calls: usize, commands: &[&[String]]) -> Command {
        let script = self
            .node_modules()
            .parent()
            .expect("the install directory")
            .join(TS_LATENCY);
        let mut command_line = Command::new("node");
        command_line
            .arg(script)
            .arg("--interleaved")
            .arg(calls.to_string());
        for command in commands {
            command_line.arg("--").args(*command);
        }
        command_line
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        command_line
    }

    /// The TypeScript SDK's OAuth client (`ts-oauth-client.mjs`): connects to `url` and runs
    /// `ops` (its `client_id`, `client_secret`, `scope`, `issuer` and `ops`), written to `dir`.
    pub fn ts_oauth_client(&self, dir: &Path, url: &str, ops: &serde_json::Value) -> Command {
        let ops_path = dir.join(format!("ts-ops-{}.json", unique()));
        fs::write(&ops_path, ops.to_string()).expect("writes the ops");
        let script = self
            .node_modules()
            .parent()
            .expect("the install directory")
            .join(TS_OAUTH_CLIENT);
        let mut command = Command::new("node");
        command
            .arg(script)
            .arg(url)
            .arg(ops_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        command
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The Python SDK's OAuth client (`tests/python/oauth_client.py`) in its virtual environment,
/// installed on first use into `<target>/python-mcp` from the hash-pinned requirements (once per
/// requirements file); `Err` when Python 3 or the install is missing.
pub fn python_oauth_client(
    dir: &Path,
    url: &str,
    ops: &serde_json::Value,
) -> Result<Command, String> {
    let python = python_env()?;
    let ops_path = dir.join(format!("py-ops-{}.json", unique()));
    fs::write(&ops_path, ops.to_string()).map_err(|e| e.to_string())?;
    let mut command = Command::new(python);
    command
        .arg(workspace().join("tests/python/oauth_client.py"))
        .arg(url)
        .arg(ops_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    Ok(command)
}

/// The `bin` directory of the tests' Python environment: the Python SDK, `mcp-server-git` and
/// `mcp-server-time` (installed on first use, as for [`python_oauth_client`]).
pub fn python_bin() -> Result<PathBuf, String> {
    let python = python_env()?;
    python
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "the environment has no bin directory".to_owned())
}

/// The Python SDK's stdio client (`tests/python/stdio_client.py`) spawning `command` and running
/// `ops` (written to `dir`).
pub fn python_stdio_client(
    dir: &Path,
    ops: &serde_json::Value,
    command: &[String],
) -> Result<Command, String> {
    let python = python_env()?;
    let ops_path = dir.join(format!("py-stdio-ops-{}.json", unique()));
    fs::write(&ops_path, ops.to_string()).map_err(|e| e.to_string())?;
    let mut line = Command::new(python);
    line.arg(workspace().join("tests/python/stdio_client.py"))
        .arg(ops_path)
        .args(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    Ok(line)
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("tests/python/requirements.txt").is_file())
        .expect("the workspace root")
        .to_path_buf()
}

/// The virtual environment's `python`, installed once per requirements file.
fn python_env() -> Result<PathBuf, String> {
    static ENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ENV.get_or_init(install_python).clone()
}

fn install_python() -> Result<PathBuf, String> {
    crate::tier::interop_only("the Python SDK's environment")?;
    let requirements = workspace().join("tests/python/requirements.txt");
    let wanted = fs::read(&requirements).map_err(|e| format!("{}: {e}", requirements.display()))?;
    let dir = super::install_dir("python-mcp");
    let python = dir.join("bin/python");
    let stamp = dir.join(".installed");
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let _lock = super::InstallLock::acquire(&dir)?;
    if python.is_file() && fs::read(&stamp).is_ok_and(|s| s == wanted) {
        return Ok(python);
    }
    let _ = fs::remove_file(&stamp);
    let run = |command: &mut Command, what: &str| -> Result<(), String> {
        let output = command
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{what}: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} {}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    };
    run(
        Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&dir),
        "python3 -m venv",
    )?;
    run(
        Command::new(dir.join("bin/pip"))
            .args(["install", "--quiet", "--require-hashes", "--no-deps", "-r"])
            .arg(&requirements)
            // PyPI only, as the requirements were resolved.
            .env_remove("PIP_FIND_LINKS")
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
        "pip install --require-hashes",
    )?;
    fs::write(&stamp, &wanted).map_err(|e| e.to_string())?;
    Ok(python)
}
