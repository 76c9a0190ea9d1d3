//! The README's Quickstart, pasted into a new crate: its `[dependencies]` block (with
//! `capability` pointed at this checkout instead of the registry) and its Rust block as
//! `src/main.rs`, built and run with cargo, offline, without warnings. A Quickstart that names
//! something only the workspace has (a test crate, a dev-dependency) fails here, where the
//! README's doc test would still pass.
//!
//! The crate is built into the tests' target directory with this workspace's `Cargo.lock` and
//! dev profile ([`common::cargo_for_a_new_crate`]), so the libraries it shares with the tests'
//! build are not compiled again, and a second run rebuilds only the pasted code.

use std::path::{Path, PathBuf};

use super::common;

/// The workspace root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The first fenced block of `lang` (its info string's first word) after the heading `heading`
/// and before the next heading of its level.
fn block(readme: &str, heading: &str, lang: &str) -> String {
    let start = readme
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no `{heading}` in README.md"));
    let section = &readme[start + heading.len() + 2..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        if info.split([',', ' ']).next() == Some(lang) {
            return body.join("\n") + "\n";
        }
    }
    panic!("no ```{lang} block under `{heading}` in README.md")
}

fn cargo(dir: &Path, args: &[&str]) -> std::process::Output {
    common::cargo_for_a_new_crate()
        .args(args)
        .args(["--offline", "--quiet"])
        .current_dir(dir)
        .output()
        .expect("runs cargo")
}

#[test]
fn the_quickstart_builds_and_runs_as_a_new_crate() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let dependencies = block(&readme, "## Quickstart", "toml");
    let main = block(&readme, "## Quickstart", "rust");
    let line = "capability = \"0.1\"";
    assert!(
        dependencies.lines().any(|l| l.trim() == line),
        "the Quickstart's dependencies name `{line}`:\n{dependencies}"
    );
    let path = root().display().to_string().replace('\\', "/");
    let dependencies = dependencies.replace(line, &format!("capability = {{ path = {path:?} }}"));

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("quickstart");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).expect("the crate's directory");
    // Warnings are errors (for the pasted code: a Quickstart that warns when pasted is not one
    // to paste), and its own workspace, not this one's.
    let manifest = format!(
        "[package]\nname = \"quickstart\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\
         publish = false\n\n{dependencies}\n[lints.rust]\nwarnings = \"deny\"\n\n\
         [workspace]\n\n{}",
        common::workspace_dev_profile()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).expect("Cargo.toml");
    std::fs::write(dir.join("src/main.rs"), &main).expect("src/main.rs");
    // This workspace's versions, so that nothing needs the network.
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).expect("Cargo.lock");

    let built = cargo(&dir, &["build"]);
    assert!(
        built.status.success(),
        "the Quickstart does not build as a new crate:\n{}\n--- src/main.rs ---\n{main}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = cargo(&dir, &["run"]);
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success(),
        "the Quickstart's program fails:\n{stdout}\n{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    // Its registry holds the three tools it declares, the one of its module too.
    for tool in ["list_users", "prom_query", "restart_pod"] {
        assert!(stdout.contains(tool), "`{tool}` not printed:\n{stdout}");
    }
}
