//! The two tiers of `cargo test --workspace` (`.ci/interop-tests`, run by `.ci/tiers`): every
//! line of the list names a test module or a test function that exists, and no more, so a test
//! renamed or moved does not leave the interop tier unseen. (`.ci/run`'s `.ci/tiers check` also
//! takes the two tiers from one `cargo test -- --list`: each line selects a test, none a doc test.)

use std::path::{Path, PathBuf};

/// The test binaries whose tests the list names: `tests/it` of the CLI, of capability-mcp and of
/// the root.
const BINARIES: [&str; 3] = [
    "capability-cli/tests/it",
    "capability-mcp/tests/it",
    "tests/it",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of `.ci/interop-tests` that are filters (comments and blank lines left out).
fn filters() -> Vec<String> {
    let list = std::fs::read_to_string(root().join(".ci/interop-tests")).expect("the list");
    list.lines()
        .map(|line| line.split('#').next().unwrap_or_default().trim().to_owned())
        .filter(|line| !line.is_empty())
        .collect()
}

/// The file of test module `module` in one of [`BINARIES`], declared in its `main.rs`.
fn module_file(module: &str) -> Option<PathBuf> {
    BINARIES.iter().find_map(|binary| {
        let dir = root().join(binary);
        let main = std::fs::read_to_string(dir.join("main.rs")).ok()?;
        let declared = main.lines().any(|l| l.trim() == format!("mod {module};"));
        let file = dir.join(format!("{module}.rs"));
        (declared && file.is_file()).then_some(file)
    })
}

#[test]
fn every_line_of_the_interop_list_names_a_test_that_exists() {
    let filters = filters();
    assert!(filters.len() > 10, "{filters:?}");
    for filter in &filters {
        let (module, function) = filter
            .split_once("::")
            .unwrap_or_else(|| panic!("`{filter}`: neither `module::` nor `module::fn`"));
        let file = module_file(module)
            .unwrap_or_else(|| panic!("`{filter}`: no test module `{module}` in {BINARIES:?}"));
        if function.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("the module");
        let at = text
            .find(&format!("fn {function}("))
            .unwrap_or_else(|| panic!("`{filter}`: no `fn {function}` in {}", file.display()));
        let before = &text[..at];
        let attribute = before.rfind("#[").map(|i| &before[i..]).unwrap_or_default();
        assert!(
            attribute.starts_with("#[test]") || attribute.starts_with("#[tokio::test"),
            "`{filter}`: `fn {function}` is not a test"
        );
    }
}

#[test]
fn a_line_that_names_a_test_selects_no_other_of_its_module() {
    // A filter is a substring of the test's path: `module::fn` also selects `module::fn_more`.
    for filter in filters() {
        let Some((module, function)) = filter.split_once("::").filter(|(_, f)| !f.is_empty())
        else {
            continue;
        };
        let file = module_file(module).expect("checked above");
        let text = std::fs::read_to_string(&file).expect("the module");
        let longer = text
            .match_indices(&format!("fn {function}"))
            .filter(|(at, found)| {
                text[at + found.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
            })
            .count();
        assert_eq!(
            longer,
            0,
            "`{filter}` also selects a longer name in {}",
            file.display()
        );
    }
}

/// In the default tier (`CAPABILITY_TIER=default`, as `.ci/tiers default` runs it), what only
/// the interop tier provides refuses, naming the list: a test that needs Node.js and is not in
/// `.ci/interop-tests` fails there instead of running unseen. Run in a child process, the one
/// way to give a test an environment variable of its own.
#[test]
fn in_the_default_tier_the_test_kit_refuses_node_and_names_the_interop_list() {
    let child = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "tiers::child_asks_for_the_reference_servers",
            "--ignored",
            "--nocapture",
        ])
        .env(capability_testkit::tier::TIER_ENV, "default")
        .env("CAPABILITY_REQUIRE_MCP_SERVERS", "1")
        .output()
        .expect("the child test runs");
    let stderr = String::from_utf8_lossy(&child.stderr);
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(!child.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("needs Node.js and the npm packages, which only the interop tier provides")
            && stderr.contains("name it in .ci/interop-tests"),
        "{stdout}\n{stderr}"
    );
}

/// The child of the test above: asks for the reference servers as a test of the interop tier does.
#[test]
#[ignore = "run by in_the_default_tier_the_test_kit_refuses_node_and_names_the_interop_list"]
fn child_asks_for_the_reference_servers() {
    let _servers =
        capability_testkit::require_servers!("tiers::child_asks_for_the_reference_servers");
}

/// `cargo test` runs two tests a core (CONTRIBUTING): `.cargo/config.toml` names the runner
/// for Unix, and the runner sets `RUST_TEST_THREADS` to twice the cores when it is not set,
/// keeps one that is set, and runs the program with its arguments.
#[cfg(unix)]
#[test]
fn the_workspaces_runner_runs_two_tests_a_core_unless_told_otherwise() {
    let config = std::fs::read_to_string(root().join(".cargo/config.toml")).expect("config");
    let lines: Vec<&str> = config
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    assert_eq!(
        lines,
        [
            "[target.'cfg(unix)']",
            "runner = [\".cargo/two-tests-a-core\"]"
        ],
        "{config}"
    );
    let runner = root().join(".cargo/two-tests-a-core");
    let threads = |set: Option<&str>| {
        let mut command = std::process::Command::new(&runner);
        command.args(["sh", "-c", "printf '%s' \"$RUST_TEST_THREADS\""]);
        match set {
            Some(value) => command.env("RUST_TEST_THREADS", value),
            None => command.env_remove("RUST_TEST_THREADS"),
        };
        let out = command.output().expect("the runner runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    // The cores as the runner counts them (`nproc`: the ones this process may run on).
    let nproc = std::process::Command::new("nproc")
        .output()
        .expect("nproc runs");
    let cores: usize = String::from_utf8_lossy(&nproc.stdout)
        .trim()
        .parse()
        .expect("a number of cores");
    assert_eq!(threads(None), (cores * 2).to_string());
    assert_eq!(threads(Some("1")), "1");
}
