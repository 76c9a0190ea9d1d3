//! The compile-time contract: every misuse of the macros fails with the message and at the token
//! recorded in `ui-tests/**/*.stderr`, and every accepted form in `ui-tests/pass/` builds and
//! runs. The accepted forms are this package's binaries (`pass-<file>`), built with the tests:
//! trybuild then only checks its cases, which takes no code generation.
//!
//! A package of its own (`capability-ui-tests`) because trybuild builds every dev-dependency of
//! the package it tests: from the facade's, the whole workspace (stores, PostgreSQL, the HTTP
//! edge, rmcp's clients), 454 libraries compiled again in trybuild's own target on a fresh clone;
//! here, only what the cases use.
//!
//! Compiler diagnostics change between compiler releases, so the snapshots are only compared on
//! the compiler they were taken with (`ui-tests/RUSTC_VERSION`). On another compiler this test
//! says so and passes without comparing; set `CAPABILITY_UI_ANY_RUSTC=1` to compare anyway.

use std::process::Command;

fn rustc_version() -> Option<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(rustc).arg("--version").output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    // "rustc 1.95.0 (59807616e 2026-04-14)" -> "1.95.0"
    text.split_whitespace().nth(1).map(str::to_owned)
}

#[test]
#[cfg_attr(miri, ignore)]
fn ui() {
    let pinned = include_str!("RUSTC_VERSION").trim();
    let current = rustc_version().unwrap_or_else(|| "unknown".to_owned());
    let forced = std::env::var_os("CAPABILITY_UI_ANY_RUSTC").is_some();
    if current != pinned && !forced {
        eprintln!(
            "skipping the UI snapshots: they were taken with rustc {pinned}, this is rustc \
             {current}; set CAPABILITY_UI_ANY_RUSTC=1 to compare anyway, or bless them with \
             TRYBUILD=overwrite and update ui-tests/RUSTC_VERSION"
        );
        return;
    }
    if std::env::var_os(ONE_CHECK).is_none() {
        return check_in_a_child_with_trybuilds_flags();
    }
    let t = trybuild::TestCases::new();
    t.compile_fail("capability/*.rs");
    t.compile_fail("advisor/*.rs");
    t.compile_fail("agent/*.rs");
    t.compile_fail("gate/*.rs");
    t.compile_fail("router/*.rs");
}

/// Set in the child that runs the cases (`check_in_a_child_with_trybuilds_flags`).
const ONE_CHECK: &str = "CAPABILITY_UI_ONE_CHECK";

/// The trybuild these flags were read from (its `src/rustflags.rs` and `cargo.rs`).
const TRYBUILD_VERSION: &str = "1.0.122";

/// The flags trybuild gives the compiler when it checks the cases (`build_all_tests`: its
/// `rustflags::toml` and `--diagnostic-width=140`).
const TRYBUILD_FLAGS: [&str; 6] = [
    "--cfg",
    "trybuild",
    "--verbose",
    "-A",
    "dead_code",
    "--diagnostic-width=140",
];

/// trybuild checks the cases' dependencies twice on a fresh target directory: first alone,
/// with its flags, then with the cases, with `--diagnostic-width=140` added, and changed flags
/// are a new build of every dependency (rmcp, tokio, serde, ...): this test took 44 s on a
/// fresh clone, on 2 cores, and takes 30 s checking them once. Cargo takes
/// `CARGO_ENCODED_RUSTFLAGS` before the `--config build.rustflags` trybuild passes, so a child
/// of this test, run with the second set of flags in it, checks the dependencies once and the
/// cases with the flags trybuild gives them. The child's output is this test's (shown when it
/// fails).
fn check_in_a_child_with_trybuilds_flags() {
    let lock = include_str!("../Cargo.lock");
    let pinned = format!("name = \"trybuild\"\nversion = \"{TRYBUILD_VERSION}\"\n");
    assert!(
        lock.contains(&pinned),
        "Cargo.lock's trybuild is not {TRYBUILD_VERSION}, the one TRYBUILD_FLAGS were read \
         from: read its src/rustflags.rs and src/cargo.rs (build_all_tests) and set \
         TRYBUILD_FLAGS and TRYBUILD_VERSION in ui-tests/ui.rs to what it passes"
    );
    let mut flags = TRYBUILD_FLAGS.to_vec();
    // As trybuild does: a coverage build (cargo-llvm-cov) keeps its instrumentation.
    if std::env::var("RUSTFLAGS").is_ok_and(|f| f.contains("-C instrument-coverage")) {
        flags.extend(["-C", "instrument-coverage"]);
    }
    let me = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(&me)
        .args(["--exact", "ui", "--test-threads", "1"])
        .env(ONE_CHECK, "1")
        .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\u{1f}"))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", me.display()));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    print!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the UI cases ({}): see above",
        out.status
    );
}

/// The accepted forms, each a binary of this package, by its file under `pass/`.
const PASS: [(&str, &str); 4] = [
    ("agent-forms.rs", env!("CARGO_BIN_EXE_pass-agent-forms")),
    (
        "renamed-facade.rs",
        env!("CARGO_BIN_EXE_pass-renamed-facade"),
    ),
    ("rmcp-router.rs", env!("CARGO_BIN_EXE_pass-rmcp-router")),
    ("tool-forms.rs", env!("CARGO_BIN_EXE_pass-tool-forms")),
];

/// Every accepted form builds (cargo built it for this test) and runs to the end of its `main`,
/// whose assertions read what the macros generated; on any compiler. A file added to `pass/`
/// without its binary fails here.
#[test]
#[cfg_attr(miri, ignore)]
fn every_accepted_form_builds_and_runs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pass");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".rs"))
        .collect();
    files.sort();
    let known: Vec<&str> = PASS.iter().map(|(file, _)| *file).collect();
    assert_eq!(
        files, known,
        "each file of ui-tests/pass/ is a [[bin]] `pass-<name>` in ui-tests/Cargo.toml and a line \
         of PASS"
    );
    for (file, binary) in PASS {
        let out = Command::new(binary)
            .output()
            .unwrap_or_else(|e| panic!("{binary}: {e}"));
        assert!(
            out.status.success(),
            "pass/{file} ran and failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
