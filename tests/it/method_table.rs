//! The table of MCP methods (`capability::mcp::METHODS`) against what it claims:
//!
//! - every method of each revision's official schema (`tests/fixtures/mcp/schema-<revision>.json`)
//!   has a row naming that revision, and a row names only revisions whose schema has it, so no
//!   method reaches a server by being forgotten;
//! - no front handles a method outside the table: every method of an rmcp `ServerHandler` or
//!   `ClientHandler` that a library of the workspace implements is a row's (a client's method
//!   the table lets through, a server's it does not refuse), and a custom method is handled
//!   only by the table's own door;
//! - the test each row names exists, in exactly one test file of the workspace;
//! - the table of docs/mcp.md is the code's, row for row (run with `--nocapture` to see the expected
//!   table when it is not).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use capability::mcp::{Destination, Direction, Handling, METHODS, McpMethod, REVISIONS};
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The methods the official schema of `revision` defines.
fn schema_methods(revision: &str) -> BTreeSet<String> {
    let path = root().join(format!("tests/fixtures/mcp/schema-{revision}.json"));
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("JSON");
    // `$defs` (2020-12) from 2025-11-25 on, `definitions` (draft-07) before.
    let defs = schema["$defs"]
        .as_object()
        .or_else(|| schema["definitions"].as_object())
        .expect("the schema's definitions");
    defs.values()
        .filter_map(|def| def["properties"]["method"]["const"].as_str())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_method_of_each_revision_has_a_row_naming_it_and_no_row_claims_more() {
    for revision in REVISIONS {
        let in_schema = schema_methods(revision);
        assert!(in_schema.len() > 15, "{revision}: {in_schema:?}");
        let missing: Vec<&String> = in_schema
            .iter()
            .filter(|name| {
                capability::mcp::method(name).is_none_or(|row| !row.revisions.contains(revision))
            })
            .collect();
        assert!(
            missing.is_empty(),
            "{revision}: no row names these methods of its schema: {missing:?}"
        );
        let claimed: Vec<&str> = METHODS
            .iter()
            .filter(|row| row.revisions.contains(revision) && !in_schema.contains(row.name))
            .map(|row| row.name)
            .collect();
        assert!(
            claimed.is_empty(),
            "{revision}: rows name it, its schema does not have them: {claimed:?}"
        );
    }
}

/// The MCP method each `ServerHandler` method answers.
const SERVER_HANDLER: &[(&str, &str)] = &[
    ("ping", "ping"),
    ("initialize", "initialize"),
    ("discover", "server/discover"),
    ("complete", "completion/complete"),
    ("set_level", "logging/setLevel"),
    ("get_prompt", "prompts/get"),
    ("list_prompts", "prompts/list"),
    ("list_resources", "resources/list"),
    ("list_resource_templates", "resources/templates/list"),
    ("read_resource", "resources/read"),
    ("listen", "subscriptions/listen"),
    ("subscribe", "resources/subscribe"),
    ("unsubscribe", "resources/unsubscribe"),
    ("call_tool", "tools/call"),
    ("list_tools", "tools/list"),
    ("get_task", "tasks/get"),
    ("update_task", "tasks/update"),
    ("cancel_task", "tasks/cancel"),
    ("list_skills", "skills/list"),
    ("get_skill", "skills/get"),
    ("read_resource_directory", "resources/directory/read"),
    ("on_cancelled", "notifications/cancelled"),
    ("on_progress", "notifications/progress"),
    ("on_initialized", "notifications/initialized"),
    ("on_roots_list_changed", "notifications/roots/list_changed"),
];

/// The MCP method each `ClientHandler` method hears from a server.
const CLIENT_HANDLER: &[(&str, &str)] = &[
    ("create_message", "sampling/createMessage"),
    ("create_elicitation", "elicitation/create"),
    ("list_roots", "roots/list"),
    ("on_logging_message", "notifications/message"),
    ("on_tool_list_changed", "notifications/tools/list_changed"),
    (
        "on_resource_list_changed",
        "notifications/resources/list_changed",
    ),
    (
        "on_prompt_list_changed",
        "notifications/prompts/list_changed",
    ),
    ("on_resource_updated", "notifications/resources/updated"),
    ("on_progress", "notifications/progress"),
    ("on_cancelled", "notifications/cancelled"),
];

/// Methods of the handler traits that answer no MCP method of their own.
const NOT_METHODS: &[&str] = &[
    "get_info",
    "get_tool",
    "supported_protocol_versions",
    "negotiate_initialize",
    "accepted_subscription_filter",
];

/// Every `impl ... <Trait> for ...` block of the library crates' sources: (file, the methods
/// it defines with their bodies).
fn handler_impls(trait_name: &str) -> Vec<(PathBuf, Vec<(String, String)>)> {
    let mut found = Vec::new();
    let mut stack = vec![root().to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                // Library sources only: not the tests, examples, benches or build output.
                if !matches!(
                    name.as_str(),
                    "target" | "tests" | "examples" | "benches" | "node_modules" | ".git"
                ) {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") && path.components().any(|c| c.as_os_str() == "src") {
                let text = std::fs::read_to_string(&path).expect("a source file");
                for block in impl_blocks(&text, &format!("{trait_name} for ")) {
                    found.push((path.clone(), block));
                }
            }
        }
    }
    found
}

/// The `fn`s (name, body up to the next `fn`) of each `impl` block naming `marker`, the block
/// ending at the first line that is `}`.
fn impl_blocks(text: &str, marker: &str) -> Vec<Vec<(String, String)>> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !(line.starts_with("impl") && line.contains(marker)) {
            continue;
        }
        let mut fns: Vec<(String, String)> = Vec::new();
        for line in lines.by_ref() {
            if line == "}" {
                break;
            }
            let trimmed = line.trim_start();
            let after = trimmed
                .strip_prefix("async fn ")
                .or_else(|| trimmed.strip_prefix("fn "));
            match after {
                Some(after) => {
                    let name: String = after
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    fns.push((name, String::new()));
                }
                None => {
                    if let Some((_, body)) = fns.last_mut() {
                        body.push_str(line);
                        body.push('\n');
                    }
                }
            }
        }
        blocks.push(fns);
    }
    blocks
}

#[test]
fn no_front_handles_a_method_outside_the_table() {
    let mut problems = Vec::new();
    let mut seen = 0;
    for (trait_name, map, from_client) in [
        ("ServerHandler", SERVER_HANDLER, true),
        ("ClientHandler", CLIENT_HANDLER, false),
    ] {
        for (file, fns) in handler_impls(trait_name) {
            seen += 1;
            let shown = file
                .strip_prefix(root())
                .unwrap_or(&file)
                .display()
                .to_string();
            for (name, body) in fns {
                if NOT_METHODS.contains(&name.as_str()) {
                    continue;
                }
                if name.starts_with("on_custom_") {
                    // Only the table's door answers a method rmcp has no type for.
                    if !(body.contains("admit") || body.contains("not_found(")) {
                        problems.push(format!(
                            "{shown}: `{name}` handles custom methods outside the table"
                        ));
                    }
                    continue;
                }
                let Some((_, method)) = map.iter().find(|(f, _)| *f == name) else {
                    problems.push(format!(
                        "{shown}: `{trait_name}::{name}` is not in this test's map: add the MCP \
                         method it answers"
                    ));
                    continue;
                };
                let row = capability::mcp::method(method);
                let allowed = row.is_some_and(|row| {
                    if from_client {
                        row.admitted_from_client()
                    } else {
                        matches!(
                            row.direction,
                            Direction::ServerRequest
                                | Direction::ServerNotification
                                | Direction::Notification
                        ) && row.handling != Handling::Refused
                    }
                });
                if !allowed {
                    problems.push(format!(
                        "{shown}: `{name}` handles `{method}`, which the table does not let \
                         through ({row:?})"
                    ));
                }
            }
        }
    }
    assert!(seen >= 4, "the handlers were not found ({seen})");
    // The forwarding lanes take messages before rmcp does: only methods with rows.
    for dir in [
        "capability-gateway/src/lane",
        "capability-gateway/src/front/stdio",
    ] {
        for entry in std::fs::read_dir(root().join(dir)).expect("the lane's sources") {
            let path = entry.expect("an entry").path();
            let text = std::fs::read_to_string(&path).expect("a source file");
            for quoted in text.split('"').skip(1).step_by(2) {
                let method_like = quoted.contains('/')
                    && !quoted.contains("application/")
                    && quoted.split('/').all(|part| {
                        !part.is_empty()
                            && part.chars().all(|c| c.is_ascii_alphabetic() || c == '_')
                    });
                if method_like && capability::mcp::method(quoted).is_none() {
                    problems.push(format!("{}: `{quoted}` has no row", path.display()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
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
            for path in entries.map(|e| e.expect("an entry").path()) {
                // A crate's one test binary (`tests/it/main.rs`): a file per area.
                if path.join("main.rs").is_file() {
                    let inner = std::fs::read_dir(&path).expect("the binary's modules");
                    files.extend(inner.map(|e| e.expect("an entry").path()));
                }
                files.push(path);
            }
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
        Direction::Notification => "notification (either side)",
    }
}

fn destination(destination: Destination) -> &'static str {
    match destination {
        Destination::Answered => "answered",
        Destination::Owner => "its server",
        Destination::Every => "every server",
        Destination::Caller => "the caller",
        Destination::Sessions => "the sessions",
        Destination::Nowhere => "nowhere",
    }
}

fn revisions(revisions: &[&str]) -> String {
    match revisions {
        [] => "extension".to_owned(),
        all if all.len() == REVISIONS.len() => "all".to_owned(),
        some => some.join(", "),
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
        "| `{}` | {} | {} | {} | {} | {} | {} | `{}` |",
        m.name,
        revisions(m.revisions),
        direction(m.direction),
        handling(m.handling),
        destination(m.route),
        m.governed_server,
        m.gateway,
        m.test
    )
}

#[test]
fn the_readme_table_is_the_codes() {
    let readme = std::fs::read_to_string(root().join("docs/mcp.md")).expect("docs/mcp.md");
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
        "docs/mcp.md's method table (expected printed above)"
    );
}
