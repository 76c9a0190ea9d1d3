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

/// The duration a line's `sleep(Duration::from_secs(N))` or `sleep(...from_millis(N))` waits, in
/// milliseconds, when it is written as a number (not in a string: a line with a `"` before the
/// call). A call that rustfmt broke after `sleep(` is read on with the `next` line.
fn slept_ms(line: &str, next: Option<&str>) -> Option<u64> {
    let at = line.find("sleep(")?;
    if line[..at].contains('"') {
        return None;
    }
    let joined;
    let rest = match next {
        Some(next) if line.trim_end().ends_with("sleep(") => {
            joined = format!("{}{}", &line[at..], next.trim_start());
            joined.as_str()
        }
        _ => &line[at..],
    };
    let (unit, start) = [("from_secs(", 1000), ("from_millis(", 1)]
        .into_iter()
        .find_map(|(call, unit)| rest.find(call).map(|i| (unit, i + call.len())))?;
    let digits: String = rest[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '_')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse::<u64>().ok().map(|n| n * unit)
}

/// The name of the function a line at `index` of `lines` is in: the nearest `fn` above it.
fn enclosing_fn(lines: &[&str], index: usize) -> Option<String> {
    lines[..=index].iter().rev().find_map(|line| {
        let (_, after) = line.split_once("fn ")?;
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        (!name.is_empty() && after[name.len()..].starts_with(['(', '<'])).then_some(name)
    })
}

/// Issue 46: no fixed sleep over 200 ms in the default tier (a clock is injected where a test
/// waits out an expiry, and a test waits for what it started with `capability_testkit::
/// wait_for`). A longer sleep stands only in a test of the interop and soak tier
/// (`.ci/interop-tests`), or in a process the test kills (a comment just above says so).
#[test]
fn no_test_of_the_default_tier_sleeps_more_than_200_ms() {
    let listed = std::fs::read_to_string(root().join(".ci/interop-tests")).expect("the list");
    let interop: Vec<&str> = listed
        .lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .collect();
    let mut files = Vec::new();
    rust_files(root(), &mut files);
    let mut long = Vec::new();
    let mut offenders = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(root()).unwrap_or(file);
        let parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let Some(tests) = parts.iter().position(|part| part == "tests") else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        // The test's path in its binary: the modules below `tests/it/` (or `tests/`), then the
        // function.
        let modules: Vec<&str> = parts[tests + 1..]
            .iter()
            .map(|part| part.trim_end_matches(".rs"))
            .filter(|part| !matches!(*part, "it" | "main" | "mod"))
            .collect();
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            if slept_ms(line, lines.get(index + 1).copied()).is_none_or(|ms| ms <= 200) {
                continue;
            }
            long.push(format!("{}:{}", relative.display(), index + 1));
            let test = format!(
                "{}::{}",
                modules.join("::"),
                enclosing_fn(&lines, index).unwrap_or_default()
            );
            let in_interop = interop.iter().any(|filter| test.contains(filter));
            let killed = lines[index.saturating_sub(2)..index]
                .iter()
                .any(|above| above.trim_start().starts_with("//") && above.contains("killed"));
            if !in_interop && !killed {
                offenders.push(format!("{}:{} in {test}", relative.display(), index + 1));
            }
        }
    }
    // The check reads what it should: the long sleep of a child process a test kills is found.
    assert!(
        long.iter()
            .any(|at| at.starts_with("capability-audit/tests/it/audit_intent.rs:")),
        "the sleeps over 200 ms found: {long:?}"
    );
    assert!(
        offenders.is_empty(),
        "fixed sleeps over 200 ms in the default tier (wait for the event with \
         capability_testkit::wait_for, inject a clock, or move the test to .ci/interop-tests):\n  \
         {}",
        offenders.join("\n  ")
    );
}

/// The `[profile.dev...]` sections of a manifest of this repository, as their lines.
fn dev_profile(manifest: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(manifest))
        .unwrap_or_else(|e| panic!("{manifest}: {e}"));
    capability_testkit::fixtures::dev_profile(&text)
}

/// `.ci/run` builds the Cedar comparison (a workspace of its own) into this workspace's target
/// directory so that the dependencies the two share are compiled once (CONTRIBUTING): a build is
/// shared only under the same profile, so the two dev profiles are the same, line for line.
#[test]
fn the_cedar_workspace_builds_with_this_workspaces_dev_profile() {
    let ours = dev_profile("Cargo.toml");
    assert!(
        ours.iter().any(|l| l.starts_with("debug")),
        "no [profile.dev] read from Cargo.toml: {ours:?}"
    );
    assert_eq!(
        dev_profile("benches/cedar/Cargo.toml"),
        ours,
        "benches/cedar/Cargo.toml's [profile.dev...] sections are Cargo.toml's"
    );
}

#[test]
fn a_sleep_is_read_with_its_unit() {
    assert_eq!(
        slept_ms("std::thread::sleep(Duration::from_secs(5));", None),
        Some(5000)
    );
    assert_eq!(
        slept_ms(
            "tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;",
            None
        ),
        Some(1500)
    );
    assert_eq!(
        slept_ms(
            "    tokio::time::sleep(",
            Some("        std::time::Duration::from_secs(2),")
        ),
        Some(2000)
    );
    assert_eq!(
        slept_ms("sleep(POLL)", Some("Duration::from_secs(9)")),
        None
    );
    assert_eq!(
        slept_ms(r#"let s = "sleep(Duration::from_secs(5))";"#, None),
        None
    );
    assert_eq!(slept_ms("let d = Duration::from_secs(9);", None), None);
    let lines = ["async fn waits() {", "    let x = 1;", "    sleep(..);"];
    assert_eq!(enclosing_fn(&lines, 2).as_deref(), Some("waits"));
}
