//! What the tests of the audit commands share (`audit_proofs`, `audit_trees`, `audit_witness`,
//! `receipts`): a fresh folder per test, the command run in it, and a record to seal.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use capability::audit::{AuditRecord, AuditSink, CheckpointEvery, FlushPolicy, JsonlSink};
use capability::gate::SecretKey;
use serde_json::json;

/// An empty folder `<target tmp>/<area>/<name>`, made anew.
pub fn scratch(area: &str, name: &str) -> PathBuf {
    capability_testkit::fresh_dir(
        PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(area)
            .join(name),
    )
}

/// `capability <args>` run in `dir`: its exit code (-1 when killed by a signal) and what it
/// wrote to standard output, then to standard error.
pub fn capability(dir: &Path, args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_capability"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

/// A denied call of `tool`, not yet sealed into a chain.
pub fn record(tool: &str) -> AuditRecord {
    serde_json::from_value(json!({
        "seq": 0, "time": "2026-12-05T00:00:00.000Z", "agent": "a", "role": "r", "session": "s",
        "step": null, "provider": null, "tool": tool, "descriptor_hash": "",
        "policy_version": null, "verdict": "denied", "reasons": [], "input": null,
        "input_digest": "", "input_size": 0, "output_digest": null, "output_size": null,
        "latency_us": null, "success": null, "error": null, "prev": "", "hash": ""
    }))
    .expect("a record")
}

/// A checkpoint every five records (and when the sink closes).
pub const EVERY_5: CheckpointEvery = CheckpointEvery {
    records: 5,
    interval: Duration::from_secs(3600),
};

/// `replica-1`'s trail of 7 records at `path`, checkpoints every 5 signed by `key` and one when
/// it closed.
pub fn seven_records(path: &Path, key: Arc<SecretKey>) {
    let sink = JsonlSink::open(path, FlushPolicy::EveryRecord)
        .expect("open")
        .with_writer("replica-1")
        .expect("writer")
        .with_checkpoints(key, EVERY_5);
    for i in 0..7 {
        sink.append(record(&format!("t-{i}"))).expect("append");
    }
    sink.close().expect("close");
}

/// A `capability audit witness` process, killed (SIGKILL) when dropped.
pub struct WitnessProcess {
    child: Child,
    /// Where it listens.
    pub url: String,
}

impl Drop for WitnessProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The arguments of `capability audit witness` on a free loopback port, signing with `key`,
/// its state in `state`, witnessing `log` (`<origin>=<public key file>`).
pub fn witness_args<'a>(key: &'a str, state: &'a str, log: &'a str) -> [&'a str; 10] {
    [
        "audit",
        "witness",
        "--listen",
        "127.0.0.1:0",
        "--key",
        key,
        "--state",
        state,
        "--log",
        log,
    ]
}

/// Starts [`witness_args`] in `dir`, once it says where it listens.
pub fn start_witness(dir: &Path, key: &str, state: &str, log: &str) -> WitnessProcess {
    let mut child = Command::new(env!("CARGO_BIN_EXE_capability"))
        .current_dir(dir)
        .args(witness_args(key, state, log))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawns");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout).read_line(&mut line).expect("a line");
    let url = (line.trim().rsplit(' ').next())
        .filter(|u| u.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    WitnessProcess { child, url }
}
