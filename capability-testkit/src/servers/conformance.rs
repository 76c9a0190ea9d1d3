//! The official MCP conformance suite (`tests/conformance/`: the runner
//! `@modelcontextprotocol/conformance` and its reference server `everything-server.ts`, pinned),
//! installed with `npm ci` into `<target>/conformance` and driven through `run.mjs`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The scripts copied next to the installed `node_modules`.
const SCRIPTS: [&str; 5] = [
    "preload.mjs",
    "run.mjs",
    "start-everything.mjs",
    "everything-server.ts",
    "sdk-scenarios.mjs",
];

/// The installed suite: its folder (`node_modules` and the scripts), or why it is not there.
pub fn installed() -> Result<PathBuf, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let source = super::workspace_root().join("tests").join("conformance");
        let dir = super::install_dir("conformance");
        super::npm_install(&source, &dir, &SCRIPTS).map(|_| dir)
    })
    .clone()
}

/// The suite, or `None` after saying the test is skipped (a failure when
/// `CAPABILITY_REQUIRE_MCP_SERVERS=1`, as for the reference servers).
pub fn require(test: &str) -> Option<PathBuf> {
    match installed() {
        Ok(dir) => Some(dir),
        Err(reason) if super::required() => {
            panic!("{test}: the conformance suite is required: {reason}")
        }
        Err(reason) => {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {reason}");
            None
        }
    }
}

/// The conformance project's reference server, on a free port of 127.0.0.1. Stopped when
/// dropped.
pub struct Reference {
    child: Child,
    /// Its MCP endpoint.
    pub url: String,
    /// Its port.
    pub port: u16,
}

impl Reference {
    pub fn start(dir: &Path) -> Reference {
        let mut child = Command::new("node")
            .arg(dir.join("start-everything.mjs"))
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node starts the reference server");
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent && let Some((_, url)) = line.split_once("listening on ") {
                    let _ = tx.send(url.trim().to_owned());
                    sent = true;
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the reference server listens within 60 s");
        let port = url
            .trim_end_matches("/mcp")
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port");
        Reference { child, url, port }
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the server scenarios `revision` requires against `url` (with `bearer`, the token the
/// runner presents): `run.mjs`'s summary (per-scenario `passed` / `failed` / `error`, the
/// scored `passed` and `total`, each failure's checks).
pub fn run(dir: &Path, url: &str, revision: &str, bearer: Option<&str>, out: &Path) -> Summary {
    run_only(dir, url, revision, bearer, out, &[])
}

/// [`run`] for only `scenarios` of the revision's set (each in a run of the runner of its own),
/// or every one when `scenarios` is empty: the summary counts the scenarios run.
pub fn run_only(
    dir: &Path,
    url: &str,
    revision: &str,
    bearer: Option<&str>,
    out: &Path,
    scenarios: &[&str],
) -> Summary {
    let mut command = Command::new("node");
    command
        .arg(dir.join("run.mjs"))
        .args(["--url", url, "--requirements", revision, "--out"])
        .arg(out)
        .current_dir(dir)
        .stdin(Stdio::null());
    if !scenarios.is_empty() {
        command.arg("--scenarios").arg(scenarios.join(","));
    }
    match bearer {
        Some(token) => command.env("CONFORMANCE_BEARER", token),
        None => command.env_remove("CONFORMANCE_BEARER"),
    };
    let status = command.output().expect("node runs run.mjs");
    assert!(
        status.status.success(),
        "run.mjs: {}{}",
        String::from_utf8_lossy(&status.stdout),
        String::from_utf8_lossy(&status.stderr)
    );
    let text = std::fs::read_to_string(out).expect("the summary");
    Summary(serde_json::from_str(&text).expect("the summary is JSON"))
}

/// What `run.mjs` wrote.
pub struct Summary(pub serde_json::Value);

impl Summary {
    /// The scored scenarios that passed, and how many were scored.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.0["passed"].as_u64().unwrap_or(0),
            self.0["total"].as_u64().unwrap_or(0),
        )
    }

    /// Every scenario that passed (scored or not).
    pub fn passed(&self) -> Vec<String> {
        self.0["scenarios"]
            .as_object()
            .map(|all| {
                all.iter()
                    .filter(|(_, status)| *status == "passed")
                    .map(|(name, _)| name.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether `scenario` passed.
    pub fn did_pass(&self, scenario: &str) -> bool {
        self.0["scenarios"][scenario] == "passed"
    }

    /// The ids of the failing checks of `scenario`.
    pub fn failing_checks(&self, scenario: &str) -> Vec<String> {
        self.0["failures"][scenario]
            .as_array()
            .map(|checks| {
                checks
                    .iter()
                    .filter_map(|c| c["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The failing checks of `scenario`, as `id: message` lines.
    pub fn failures(&self, scenario: &str) -> String {
        self.0["failures"][scenario]
            .as_array()
            .map(|checks| {
                checks
                    .iter()
                    .map(|c| format!("{}: {}", c["id"], c["message"]))
                    .collect::<Vec<_>>()
                    .join("\n      ")
            })
            .unwrap_or_else(|| format!("{}", self.0["scenarios"][scenario]))
    }
}

/// The lines of `sdk-scenarios.mjs` run with `target` (`--http <url>`, or `--stdio <command>
/// ...`): each scenario's name and what the SDK's client got.
pub fn sdk_scenarios(dir: &Path, target: &[&str]) -> Vec<(String, serde_json::Value)> {
    let output = Command::new("node")
        .arg(dir.join("sdk-scenarios.mjs"))
        .args(target)
        .current_dir(dir)
        .stderr(Stdio::inherit())
        .output()
        .expect("node runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .map(|line| {
            let name = line["scenario"].as_str().unwrap_or_default().to_owned();
            (name, line)
        })
        .collect()
}
