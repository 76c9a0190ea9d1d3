//! The advisor gate holds in release builds too: nothing in the check depends on
//! `debug_assertions`. This builds a small crate with `cargo check --release`, once with a
//! read-only tool (it must build: the setup works) and once with a mutating one (it must not).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MANIFEST: &str = r#"[package]
name = "release-gate"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
capability = { path = "FACADE" }

[workspace]
"#;

const PROGRAM: &str = r#"use capability::{advisor_agent, Capability};

/// Restart a pod.
#[derive(Capability)]
#[capability(FLAGS)]
struct RestartPod;

#[advisor_agent(tools(RestartPod), target = "analysis")]
struct Analyst;

fn main() {}
"#;

fn check_release(dir: &Path, flags: &str) -> Output {
    let facade = env!("CARGO_MANIFEST_DIR");
    std::fs::create_dir_all(dir.join("src")).expect("create the fixture crate");
    std::fs::write(dir.join("Cargo.toml"), MANIFEST.replace("FACADE", facade))
        .expect("write Cargo.toml");
    std::fs::write(dir.join("src/main.rs"), PROGRAM.replace("FLAGS", flags))
        .expect("write main.rs");
    // The workspace's lock file pins the same versions, so the check runs offline.
    std::fs::copy(Path::new(facade).join("Cargo.lock"), dir.join("Cargo.lock"))
        .expect("copy Cargo.lock");
    Command::new(env!("CARGO"))
        .args(["check", "--release", "--offline", "--color", "never"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .output()
        .expect("run cargo")
}

#[test]
#[cfg_attr(miri, ignore)]
fn advisor_gate_holds_in_release_builds() {
    let dir: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("release-gate");

    let ok = check_release(&dir, "read_only");
    assert!(
        ok.status.success(),
        "the read-only control case must build in release:\n{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    let refused = check_release(&dir, "destructive");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "a mutating tool was accepted in release"
    );
    assert!(
        stderr.contains(
            "advisor agent `Analyst` cannot bind `RestartPod`, because `RestartPod` is not a read-only tool"
        ),
        "unexpected error:\n{stderr}"
    );
}
