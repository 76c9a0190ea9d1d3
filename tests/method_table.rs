//! The table of MCP methods (`capability::mcp::METHODS`) against what it claims:
//!
//! - every method of the official schema (`tests/fixtures/mcp/schema-2026-07-28.json`) is in
//!   it, so no method reaches a server by being forgotten;
//! - the test each row names exists, in exactly one test file of the workspace;
//! - the README's table is the code's, row for row (run with `--nocapture` to see the expected
//!   table when it is not).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use capability::mcp::{Direction, Handling, METHODS, McpMethod};
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_method_of_the_schema_is_in_the_table() {
    let path = root().join("tests/fixtures/mcp/schema-2026-07-28.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the schema")).expect("JSON");
    let in_schema: BTreeSet<&str> = schema["$defs"]
        .as_object()
        .expect("$defs")
        .values()
        .filter_map(|def| def["properties"]["method"]["const"].as_str())
        .collect();
    assert!(in_schema.len() > 15, "{in_schema:?}");
    let missing: Vec<&&str> = in_schema
        .iter()
        .filter(|name| capability::mcp::method(name).is_none())
        .collect();
    assert!(missing.is_empty(), "not in METHODS: {missing:?}");
}

#[test]
fn each_rows_test_exists_once() {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in std::fs::read_dir(root()).expect("the workspace") {
        let dir = dir.expect("an entry").path();
        let tests = if dir.file_name().is_some_and(|n| n == "tests") {
            dir
        } else {
            dir.join("tests")
        };
        if let Ok(entries) = std::fs::read_dir(&tests) {
            files.extend(entries.map(|e| e.expect("an entry").path()));
        }
    }
    for method in METHODS {
        let (file, function) = method.test.split_once("::").expect("file::function");
        let found: Vec<&PathBuf> = files
            .iter()
            .filter(|p| p.file_name().is_some_and(|n| n == file))
            .collect();
        assert_eq!(found.len(), 1, "{}: {file} in {found:?}", method.name);
        let text = std::fs::read_to_string(found[0]).expect("the test file");
        assert!(
            text.contains(&format!("async fn {function}()"))
                || text.contains(&format!("\nfn {function}()")),
            "{}: no test `{function}` in {}",
            method.name,
            found[0].display()
        );
    }
}

fn direction(direction: Direction) -> &'static str {
    match direction {
        Direction::ClientRequest => "client request",
        Direction::ClientNotification => "client notification",
        Direction::ServerRequest => "server request",
        Direction::ServerNotification => "server notification",
    }
}

fn handling(handling: Handling) -> &'static str {
    match handling {
        Handling::Lifecycle => "lifecycle",
        Handling::Listed => "listed",
        Handling::Decided => "decided",
        Handling::Owned => "owned",
        Handling::RoleOnly => "role only",
        Handling::ServerRequest => "server request",
        Handling::Refused => "refused",
    }
}

fn row(m: &McpMethod) -> String {
    format!(
        "| `{}` | {} | {} | {} | {} | `{}` |",
        m.name,
        direction(m.direction),
        handling(m.handling),
        m.governed_server,
        m.proxy,
        m.test
    )
}

#[test]
fn the_readme_table_is_the_codes() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let begin = readme
        .find("<!-- methods:begin -->")
        .expect("the table's start marker");
    let end = readme
        .find("<!-- methods:end -->")
        .expect("the table's end marker");
    let written: Vec<&str> = readme[begin..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .collect();
    let expected: Vec<String> = METHODS.iter().map(row).collect();
    if written != expected {
        println!("{}", expected.join("\n"));
    }
    assert_eq!(
        written, expected,
        "README's method table (expected printed above)"
    );
}
