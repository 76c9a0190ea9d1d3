//! The workspace as Cargo describes it, for tests that check its shape.

use serde_json::Value;

/// `cargo metadata --no-deps --format-version 1 --offline` of the workspace (its packages and
/// their targets, as Cargo reads the manifests); panics (the test fails) with Cargo's error
/// when it cannot be had.
pub fn metadata() -> Value {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(crate::servers::workspace_root())
        .output()
        .expect("runs cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON")
}
