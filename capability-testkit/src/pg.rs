//! A throwaway PostgreSQL server for the tests and the benchmark.
//!
//! [`schema_url`] gives each test a schema of its own on a server shared by the tests of one
//! binary: the server named by `CAPABILITY_TEST_POSTGRES_URL`, or else one started here from the
//! installed PostgreSQL (`/usr/lib/postgresql/*/bin`): `initdb` into a temporary directory (as
//! the `postgres` user when run as root), listening only on a unix socket in that directory,
//! with password authentication (SCRAM) and `fsync` on.
//!
//! The server runs under a small watchdog shell whose standard input is a pipe held by this
//! process: when the process ends in any way (tests done, a panic, SIGKILL), the pipe closes and
//! the watchdog stops the server and removes its directory. No `Drop` of a static is needed.
//!
//! Without PostgreSQL, a test prints `SKIPPED: ...` and passes, unless
//! `CAPABILITY_REQUIRE_POSTGRES=1`, which makes the skip a failure.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The environment variable naming an existing server (a URL of a database the tests may
/// create schemas in).
pub const URL_VAR: &str = "CAPABILITY_TEST_POSTGRES_URL";
/// Set to `1` to fail instead of skipping when no PostgreSQL can be had.
pub const REQUIRE_VAR: &str = "CAPABILITY_REQUIRE_POSTGRES";

/// A PostgreSQL server started by this process, stopped when it is dropped or the process ends.
pub struct Server {
    dir: PathBuf,
    url: String,
    password: String,
    watchdog: Mutex<(Child, Option<ChildStdin>, BufReader<ChildStdout>)>,
}

impl Server {
    /// Starts a new server in a temporary directory; `extra` are `-c name=value` settings.
    pub fn start(extra: &[&str]) -> Result<Server, String> {
        let bin = bin_dir().ok_or("no PostgreSQL installed (/usr/lib/postgresql/*/bin/initdb)")?;
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "capability-pg-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let password = format!("pw{:x}{:x}", std::process::id(), nanos());
        std::fs::write(dir.join("pwfile"), &password).map_err(|e| e.to_string())?;
        let root = is_root();
        if root {
            run(Command::new("chown").arg("-R").arg("postgres:").arg(&dir))?;
        }
        let data = dir.join("data");
        run(as_postgres(root, &bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=scram-sha-256", "-E", "UTF8"])
            .args(["--locale=C", "--no-sync"])
            .arg(format!("--pwfile={}", dir.join("pwfile").display())))?;
        let mut settings = String::new();
        for setting in ["max_connections=300", "fsync=on"].iter().chain(extra) {
            settings.push_str(&format!(" -c {setting}"));
        }
        let script = format!(
            r#"bin="$0"; dir="$1"
start() {{ "$bin" -D "$dir/data" -k "$dir" -h '' {settings} >>"$dir/log" 2>&1 & pid=$!; }}
start
while read -r cmd; do
  case "$cmd" in
    stop) kill -INT "$pid"; wait "$pid"; echo stopped ;;
    start) start; echo started ;;
  esac
done
kill -INT "$pid" 2>/dev/null; wait "$pid"; rm -rf "$dir""#
        );
        let mut child = as_postgres(root, Path::new("sh"))
            .arg("-c")
            .arg(script)
            .arg(bin.join("postgres"))
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the server: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("no pipes to the watchdog".into());
        };
        let encoded = dir.display().to_string().replace('/', "%2F");
        let server = Server {
            url: format!("postgres://postgres:{password}@{encoded}/postgres"),
            dir,
            password,
            watchdog: Mutex::new((child, Some(stdin), BufReader::new(stdout))),
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// The URL of its `postgres` database, password included.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The password in [`url`](Self::url).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// Stops the server (fast shutdown); [`restart`](Self::restart) starts it again.
    pub fn stop(&self) {
        self.command("stop");
    }

    /// Starts the stopped server again, and waits until it accepts connections.
    pub fn restart(&self) -> Result<(), String> {
        self.command("start");
        self.wait_ready()
    }

    fn command(&self, cmd: &str) {
        let mut watchdog = self.watchdog.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stdin) = watchdog.1.as_mut() {
            let _ = writeln!(stdin, "{cmd}");
            let _ = stdin.flush();
        }
        let mut line = String::new();
        let _ = watchdog.2.read_line(&mut line);
    }

    fn wait_ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match postgres::Client::connect(&self.url, postgres::NoTls) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
                    return Err(format!("the server did not start: {e}\n{log}"));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let mut watchdog = self.watchdog.lock().unwrap_or_else(|e| e.into_inner());
        // Closing its standard input makes the watchdog stop the server and clean up.
        drop(watchdog.1.take());
        let _ = watchdog.0.wait();
    }
}

/// The URL of a fresh schema named after `test` on the shared test server, or `None` after
/// printing `SKIPPED` (and panicking instead when `CAPABILITY_REQUIRE_POSTGRES=1`).
pub fn schema_url(test: &str) -> Option<String> {
    let base = match shared_url() {
        Ok(url) => url,
        Err(why) => {
            if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") {
                panic!("PostgreSQL is required ({REQUIRE_VAR}=1) but unavailable: {why}");
            }
            println!("SKIPPED: {test}: no PostgreSQL: {why}");
            eprintln!("SKIPPED: {test}: no PostgreSQL: {why}");
            return None;
        }
    };
    let schema = format!(
        "t_{}_{}",
        test.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
        std::process::id()
    );
    let mut client = postgres::Client::connect(&base, postgres::NoTls)
        .unwrap_or_else(|e| panic!("connect to the test server: {e}"));
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .unwrap_or_else(|e| panic!("create schema {schema}: {e}"));
    Some(with_schema(&base, &schema))
}

/// `url` with its connections' `search_path` set to `schema`.
pub fn with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-c%20search_path%3D{schema}")
}

/// The shared server's URL: `CAPABILITY_TEST_POSTGRES_URL`, or a server started once.
pub fn shared_url() -> Result<String, String> {
    if let Ok(url) = std::env::var(URL_VAR) {
        return Ok(url);
    }
    static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
    SERVER
        .get_or_init(|| Server::start(&[]))
        .as_ref()
        .map(|s| s.url().to_owned())
        .map_err(Clone::clone)
}

/// The newest installed PostgreSQL's `bin` directory.
pub fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn as_postgres(root: bool, program: &Path) -> Command {
    if root {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The password in a URL made by this harness (empty when it has none).
pub fn password(url: &str) -> &str {
    let Some(rest) = url.split_once("://").map(|(_, rest)| rest) else {
        return "";
    };
    let credentials = rest.rsplit_once('@').map_or("", |(c, _)| c);
    credentials.split_once(':').map_or("", |(_, p)| p)
}

/// A server of the test's own (to stop and restart), or `None` after printing `SKIPPED` (and
/// panicking instead when `CAPABILITY_REQUIRE_POSTGRES=1`).
pub fn own_server(test: &str) -> Option<Server> {
    match Server::start(&[]) {
        Ok(server) => Some(server),
        Err(why) => {
            if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") {
                panic!("PostgreSQL is required ({REQUIRE_VAR}=1) but unavailable: {why}");
            }
            println!("SKIPPED: {test}: no PostgreSQL server of its own: {why}");
            None
        }
    }
}

/// For a benchmark: a fresh schema `schema` on the server of [`URL_VAR`], or on a throwaway
/// server started here (kept alive by the returned [`Server`]); `None` after printing why, when
/// there is no PostgreSQL.
pub fn bench_schema(bench: &str, schema: &str) -> (Option<Server>, Option<String>) {
    let (server, base) = match std::env::var(URL_VAR) {
        Ok(url) => (None, url),
        Err(_) => match Server::start(&[]) {
            Ok(server) => {
                let url = server.url().to_owned();
                (Some(server), url)
            }
            Err(why) => {
                println!("{bench}: PostgreSQL skipped: {why}");
                return (None, None);
            }
        },
    };
    let mut client = postgres::Client::connect(&base, postgres::NoTls)
        .unwrap_or_else(|e| panic!("connect to the benchmark's server: {e}"));
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .unwrap_or_else(|e| panic!("create schema {schema}: {e}"));
    (server, Some(with_schema(&base, schema)))
}
