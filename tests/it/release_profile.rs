//! The advisor gate holds in release builds too: nothing in the check depends on
//! `debug_assertions` (or on overflow checks). This builds a small crate with every crate of
//! this workspace it compiles, and itself, without debug assertions and overflow checks, as the
//! release profile compiles them: once with a read-only tool (it must build: the setup works)
//! and once with a mutating one (it must not).
//!
//! The crate is built in the dev profile otherwise, into the tests' target directory
//! ([`common::cargo_for_a_new_crate`]): the libraries outside this workspace are the ones the
//! tests built (a `cargo check --release` in a target of its own checked them all again; with
//! the Quickstart's crate, which shares them too, the facade's tests went from 31 s to 25 s on
//! a fresh clone), and optimisation is not what the check is about. Only what a release build
//! compiles differently, the `cfg(debug_assertions)` and overflow checks of the gate's crates
//! and of the code its macros expand to, is compiled as it would be.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::common;

const PROGRAM: &str = r#"use capability::{advisor_agent, Capability};

// The profile's overrides are what make this a release build's check.
#[cfg(debug_assertions)]
compile_error!("the fixture is built with debug assertions");

/// Restart a pod.
#[derive(Capability)]
#[capability(FLAGS)]
struct RestartPod;

#[advisor_agent(tools(RestartPod), target = "analysis")]
struct Analyst;

fn main() {}
"#;

/// The fixture's manifest: the facade by path, the workspace's dev profile, and `overrides`.
fn manifest(overrides: &str) -> String {
    let facade = env!("CARGO_MANIFEST_DIR").replace('\\', "/");
    format!(
        "[package]\nname = \"release-gate\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
         publish = false\n\n[dependencies]\ncapability = {{ path = {facade:?} }}\n\n\
         [workspace]\n\n{}\n{overrides}",
        common::workspace_dev_profile()
    )
}

/// A release build's settings for `package`: no debug assertions, no overflow checks.
fn as_in_release(package: &str) -> String {
    format!("[profile.dev.package.{package}]\ndebug-assertions = false\noverflow-checks = false\n")
}

/// The packages of this workspace the fixture builds (`cargo tree`: the facade and the crates
/// it depends on with its default features), and the fixture itself.
fn workspace_packages(dir: &Path) -> Vec<String> {
    let tree = common::cargo_for_a_new_crate()
        .args([
            "tree",
            "--offline",
            "--prefix",
            "none",
            "-e",
            "normal,build",
        ])
        .args(["--format", "{p}"])
        .current_dir(dir)
        .output()
        .expect("run cargo tree");
    assert!(
        tree.status.success(),
        "cargo tree failed:\n{}",
        String::from_utf8_lossy(&tree.stderr)
    );
    // `name v0.1.0 (/path)`: the facade at the root, the others in its folders.
    let root = env!("CARGO_MANIFEST_DIR");
    let (at_root, under_root) = (format!("({root})"), format!("({root}/"));
    let mut packages: Vec<String> = String::from_utf8_lossy(&tree.stdout)
        .lines()
        .filter(|line| {
            line.contains(&at_root)
                || line.contains(&under_root)
                || line.starts_with("release-gate ")
        })
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect();
    packages.sort();
    packages.dedup();
    packages
}

fn build(dir: &Path, flags: &str) -> Output {
    std::fs::write(dir.join("src/main.rs"), PROGRAM.replace("FLAGS", flags))
        .expect("write main.rs");
    common::cargo_for_a_new_crate()
        .args(["build", "--offline", "--color", "never"])
        .current_dir(dir)
        .output()
        .expect("run cargo")
}

#[test]
#[cfg_attr(miri, ignore)]
fn advisor_gate_holds_in_release_builds() {
    let dir: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("release-gate");
    std::fs::create_dir_all(dir.join("src")).expect("create the fixture crate");
    std::fs::write(
        dir.join("src/main.rs"),
        PROGRAM.replace("FLAGS", "read_only"),
    )
    .expect("write main.rs");
    // The workspace's lock file pins the same versions, so the build runs offline.
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"),
        dir.join("Cargo.lock"),
    )
    .expect("copy Cargo.lock");
    std::fs::write(dir.join("Cargo.toml"), manifest("")).expect("write Cargo.toml");
    let packages = workspace_packages(&dir);
    for package in [
        "capability",
        "capability-core",
        "capability-derive",
        "release-gate",
    ] {
        assert!(
            packages.iter().any(|p| p == package),
            "{package} is not among the fixture's packages: {packages:?}"
        );
    }
    let overrides: String = packages.iter().map(|p| as_in_release(p)).collect();
    std::fs::write(dir.join("Cargo.toml"), manifest(&overrides)).expect("write Cargo.toml");

    let ok = build(&dir, "read_only");
    assert!(
        ok.status.success(),
        "the read-only control case must build without debug assertions:\n{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    let refused = build(&dir, "destructive");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "a mutating tool was accepted without debug assertions"
    );
    assert!(
        stderr.contains(
            "advisor agent `Analyst` cannot bind `RestartPod`, because `RestartPod` is not a read-only tool"
        ),
        "unexpected error:\n{stderr}"
    );
}
