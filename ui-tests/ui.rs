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
    let t = trybuild::TestCases::new();
    t.compile_fail("capability/*.rs");
    t.compile_fail("advisor/*.rs");
    t.compile_fail("agent/*.rs");
    t.compile_fail("gate/*.rs");
    t.compile_fail("router/*.rs");
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
