//! The tests' layout (issue 46): one integration-test binary per crate, a few more only where
//! tests cannot share a process (`tests/README.md`, "Where each test file moved"), and no
//! `#[path]` include in tests or benches. Cargo itself says which test targets there are.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The most integration-test binaries the workspace may have.
const MAX_TEST_BINARIES: usize = 15;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every test target of the workspace's packages, as `package: target`, from `cargo metadata`.
fn test_targets() -> Vec<String> {
    let metadata = capability_testkit::workspace::metadata();
    let mut targets = Vec::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().unwrap_or("?");
        for target in package["targets"].as_array().into_iter().flatten() {
            let kinds = target["kind"].as_array().into_iter().flatten();
            if kinds.filter_map(Value::as_str).any(|kind| kind == "test") {
                targets.push(format!(
                    "{name}: {}",
                    target["name"].as_str().unwrap_or("?")
                ));
            }
        }
    }
    targets.sort();
    targets
}

#[test]
fn the_workspace_has_at_most_15_integration_test_binaries() {
    let targets = test_targets();
    // The count is of something: the root's own two binaries are among them.
    for expected in ["capability: it", "capability: registry"] {
        assert!(
            targets.iter().any(|t| t == expected),
            "{expected} missing from {targets:#?}"
        );
    }
    assert!(
        targets.len() <= MAX_TEST_BINARIES,
        "{} integration-test binaries, at most {MAX_TEST_BINARIES}: each links an executable of \
         its own; add a module to the crate's tests/it instead:\n{targets:#?}",
        targets.len()
    );
}

/// Every `.rs` file under `dir`, but build output and installed packages.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(name.as_ref(), "target" | "node_modules" | ".git") {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_test_or_bench_includes_a_file_by_path() {
    let mut files = Vec::new();
    rust_files(root(), &mut files);
    let attribute = concat!("#", "[path");
    let offenders: Vec<String> = files
        .iter()
        .filter(|file| {
            let parts: Vec<_> = file.components().map(|c| c.as_os_str()).collect();
            parts
                .iter()
                .any(|part| *part == "tests" || *part == "benches")
        })
        .filter(|file| {
            std::fs::read_to_string(file).is_ok_and(|text| {
                text.lines()
                    .any(|line| line.trim_start().starts_with(attribute))
            })
        })
        .map(|file| {
            file.strip_prefix(root())
                .unwrap_or(file)
                .display()
                .to_string()
        })
        .collect();
    assert!(
        files.len() > 50,
        "the walk found the sources: {}",
        files.len()
    );
    assert!(
        offenders.is_empty(),
        "`#[path]` includes in tests or benches (use capability-testkit instead): {offenders:?}"
    );
}
