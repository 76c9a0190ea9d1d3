//! What the tests of the audit commands share (`audit_proofs`, `audit_trees`, `audit_witness`,
//! `receipts`): a fresh folder per test, the command run in it, and a record to seal.

use std::path::{Path, PathBuf};
use std::process::Command;

use capability::audit::AuditRecord;
use serde_json::json;

/// An empty folder `<target tmp>/<area>/<name>`, made anew.
pub fn scratch(area: &str, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(area)
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
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
