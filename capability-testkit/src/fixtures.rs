//! Fixtures built with the facade (feature `facade`): manifests, grants, trail checks, examples.

use capability::CapabilityManifest;
use capability::authz::{Ceiling, ToolContext};

pub use crate::Rng;

/// `k8s/list_pods`: read-only, scope `k8s:read`.
pub fn list_pods() -> CapabilityManifest {
    CapabilityManifest::builder("list_pods")
        .provider("k8s")
        .read_only(true)
        .scope("k8s:read")
        .build()
        .expect("valid")
}

/// `k8s/restart_pod`: mutating (the defaults), scope `k8s:write`.
pub fn restart_pod() -> CapabilityManifest {
    CapabilityManifest::builder("restart_pod")
        .provider("k8s")
        .scope("k8s:write")
        .build()
        .expect("valid")
}

/// A read-only grant holding `k8s:read`, for role `monitor`.
pub fn monitor(session: &str) -> ToolContext {
    ToolContext::new("monitor", session, Ceiling::ReadOnly).with_scopes(["k8s:read"])
}

/// A tool built at run time: read-only, or mutating and destructive or not, with scopes.
pub fn tool(
    provider: &str,
    name: &str,
    read_only: bool,
    destructive: bool,
    scopes: &[&str],
) -> CapabilityManifest {
    let builder = CapabilityManifest::builder(name)
        .provider(provider)
        .scopes(scopes.iter().copied());
    let builder = if read_only {
        builder.read_only(true)
    } else {
        builder.destructive(destructive)
    };
    builder.build().expect("valid tool")
}

/// One record per call: the outcome of a call that ran (its intent left out), or the one
/// record of a call that did not; in trail order.
#[allow(dead_code)]
pub fn calls(records: Vec<capability::audit::AuditRecord>) -> Vec<capability::audit::AuditRecord> {
    records
        .into_iter()
        .filter(|r| r.phase != Some(capability::audit::Phase::Intent))
        .collect()
}

/// Checks that each outcome follows its intent (same call id, same call), and that every
/// intent has its outcome.
#[allow(dead_code)]
pub fn intents_have_outcomes(records: &[capability::audit::AuditRecord]) {
    use capability::audit::Phase;
    for (i, record) in records.iter().enumerate() {
        match record.phase {
            Some(Phase::Intent) => {
                let outcome = records[i + 1..]
                    .iter()
                    .find(|r| r.call_id == record.call_id && r.writer == record.writer)
                    .unwrap_or_else(|| panic!("intent {} has no outcome", record.seq));
                assert_eq!(outcome.phase, Some(Phase::Outcome), "{outcome:?}");
                assert_eq!(
                    (&outcome.tool, &outcome.session, &outcome.input_digest),
                    (&record.tool, &record.session, &record.input_digest)
                );
                assert_eq!((record.success, record.latency_us), (None, None));
            }
            Some(Phase::Outcome) => {
                assert!(
                    records[..i]
                        .iter()
                        .any(|r| r.call_id == record.call_id && r.phase == Some(Phase::Intent)),
                    "outcome {} has no intent before it",
                    record.seq
                );
            }
            None => assert!(record.call_id.is_some() || record.seq > 0),
        }
    }
}

/// The binary of the facade's example `name`, built with the profile and target directory of
/// the running test binary (`<target>/<profile>/deps/<test>` → `<target>/<profile>/examples/`).
///
/// Built with `--workspace`, so with the features `cargo test --workspace` unifies: the build
/// reuses every library the tests built. Built for the facade alone, 37 of them (serde_json,
/// tracing, rustls, rmcp, every crate of the workspace) got other features, and were compiled a
/// second time on a fresh clone.
///
/// Built without the variables Cargo sets for the running test (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_*`, ...): `ring`'s build script reruns when `CARGO_MANIFEST_DIR` changes, so a
/// build that inherited it rebuilt `ring` and all above it (rustls, reqwest, rmcp, the
/// workspace), about 18 s, and so did the next `cargo test`, which has it unset.
pub fn example_binary(name: &str) -> std::path::PathBuf {
    let (target, profile_dir, profile) = tests_target();
    let status = cargo_into(&target)
        .args([
            "build",
            "--quiet",
            "--workspace",
            "--example",
            name,
            "--profile",
        ])
        .arg(&profile)
        .arg("--manifest-path")
        .arg(crate::servers::workspace_root().join("Cargo.toml"))
        .status()
        .expect("runs cargo");
    assert!(status.success(), "`cargo build --example {name}` failed");
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(binary.is_file(), "{} is missing", binary.display());
    binary
}

/// `cargo`, to build a crate written by a test (a workspace of its own, given by `current_dir`
/// or `--manifest-path`) into the running test binary's target directory. With the workspace's
/// dev profile in its manifest ([`workspace_dev_profile`]), every library it shares with the
/// tests' build, with the same features, is not compiled again. Flags go in its manifest
/// (`[lints.rust] warnings = "deny"`), not in `RUSTFLAGS`, which would change every library's
/// fingerprint and make the next `cargo test` rebuild them all.
pub fn cargo_for_a_new_crate() -> std::process::Command {
    let (target, _, _) = tests_target();
    cargo_into(&target)
}

/// The workspace's `[profile.dev]` sections (with their `[profile.dev.package.*]` overrides),
/// as the root `Cargo.toml` writes them ([`dev_profile`]): for the manifest of a crate
/// [`cargo_for_a_new_crate`] builds, so its libraries are the workspace's.
pub fn workspace_dev_profile() -> String {
    let manifest = std::fs::read_to_string(crate::servers::workspace_root().join("Cargo.toml"))
        .expect("the workspace's Cargo.toml");
    let profile = dev_profile(&manifest);
    assert!(
        profile.first().is_some_and(|l| l == "[profile.dev]"),
        "the workspace's Cargo.toml has no [profile.dev]"
    );
    profile.iter().map(|line| format!("{line}\n")).collect()
}

/// The `[profile.dev]` and `[profile.dev.*]` sections of the manifest `text`: their lines,
/// trimmed, without comments or blank lines.
pub fn dev_profile(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[profile.dev]" || line.starts_with("[profile.dev.");
        }
        if inside && !line.is_empty() && !line.starts_with('#') {
            lines.push(line.to_owned());
        }
    }
    lines
}

/// The running test binary's target directory, its profile's directory and the profile's name
/// (`<target>/<profile>/deps/<test>`).
fn tests_target() -> (std::path::PathBuf, std::path::PathBuf, String) {
    use std::path::Path;
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary is in <target>/<profile>/deps");
    let target = profile_dir.parent().expect("<target>");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".to_owned(),
        Some(other) => other.to_owned(),
    };
    (target.to_owned(), profile_dir.to_owned(), profile)
}

/// `cargo`, building into `target`, without the variables Cargo set for the running test.
fn cargo_into(target: &std::path::Path) -> std::process::Command {
    let mut cargo = std::process::Command::new(env!("CARGO"));
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(set_for_the_test) {
            cargo.env_remove(key);
        }
    }
    cargo.env("CARGO_TARGET_DIR", target);
    cargo
}

/// Whether Cargo sets the variable `key` for a test it runs (not for the `cargo` it was run by).
fn set_for_the_test(key: &str) -> bool {
    const SET: [&str; 7] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "OUT_DIR",
    ];
    SET.contains(&key) || key.starts_with("CARGO_PKG_") || key.starts_with("CARGO_BIN_")
}
