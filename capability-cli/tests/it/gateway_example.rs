//! `examples/gateway/policy.toml`, ADR-105's four agents over five servers (the reference
//! servers `server-everything`, `server-filesystem`, `server-memory`, and the Python servers of
//! the package index `mcp-server-git` and `mcp-server-time`), each installed by the tests, served
//! by `capability gateway` to the official TypeScript and Python SDK clients: each role sees its
//! matrix and nothing else, and the writes of the roles that may only read are refused on record
//! and never reach a server (the repository and the directory are unchanged).

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use proxy_common::{BIN, calls, listed, scratch};
use support::auth::{python_bin, python_stdio_client};
use support::{TsTarget, toml_words, ts_client_lines};

fn run(command: &str, args: &[&str], dir: &Path) {
    let status = Command::new(command)
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .status()
        .expect("runs");
    assert!(status.success(), "{command} {args:?}");
}

/// The example's roles, with its servers installed here (the same names and prefixes).
fn policy(dir: &Path, servers: &support::Servers, python: &Path) -> String {
    let example = include_str!("../../../examples/gateway/policy.toml");
    let roles = &example[..example.find("# --- servers").expect("the servers part")];
    let memory = servers.memory(&dir.join("memory.jsonl"));
    let filesystem = servers.filesystem(&dir.join("docs"));
    let git = python.join("mcp-server-git").display().to_string();
    let time = python.join("mcp-server-time").display().to_string();
    format!(
        r#"{roles}
[servers.everything]
command = {everything}
trust = "trusted"

[servers.filesystem]
command = {filesystem}
trust = "trusted"
prefix = "fs_"

[servers.memory]
command = {memory}
env = {memory_env}
trust = "trusted"
prefix = "mem_"

[servers.git]
command = {git}
trust = "trusted"
prefix = ""

[servers.time]
command = {time}
trust = "trusted"
"#,
        everything = servers.everything().toml_command(),
        filesystem = filesystem.toml_command(),
        memory = memory.toml_command(),
        memory_env = memory.toml_env(),
        git = toml_words(
            &git,
            &[
                "--repository".to_owned(),
                dir.join("repo").display().to_string()
            ]
        ),
        time = toml_words(&time, &[]),
    )
}

fn gateway_args(dir: &Path, role: &str) -> Vec<String> {
    let trail = dir.join(format!("{role}.jsonl"));
    proxy_common::gateway_stdio(&dir.join("policy.toml"), role, &trail, &[])
}

fn ts(servers: &support::Servers, dir: &Path, role: &str, ops: &Value) -> Vec<Value> {
    let args = gateway_args(dir, role);
    let output = servers
        .ts_client(
            ops,
            TsTarget::Stdio {
                program: Path::new(BIN),
                args: &args,
            },
        )
        .output()
        .expect("runs the TypeScript client");
    ts_client_lines(&output).expect("the client ran")
}

fn py(dir: &Path, role: &str, ops: &Value) -> Vec<Value> {
    let mut command = vec![BIN.to_owned()];
    command.extend(gateway_args(dir, role));
    let output = python_stdio_client(dir, ops, &command)
        .expect("the Python SDK")
        .output()
        .expect("runs the Python client");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn has(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

#[test]
fn each_agent_sees_its_matrix_and_the_readers_writes_never_reach_a_server() {
    let Some(servers) = support::require_servers("gateway_example") else {
        return;
    };
    let python = match python_bin() {
        Ok(python) => python,
        Err(why) if std::env::var("CAPABILITY_REQUIRE_MCP_SERVERS").as_deref() != Ok("1") => {
            println!("SKIPPED: gateway_example: the Python servers: {why}");
            return;
        }
        Err(why) => panic!("the Python servers are required: {why}"),
    };
    let dir = scratch("gateway-example", "");
    std::fs::create_dir_all(dir.join("docs")).expect("docs");
    std::fs::write(dir.join("docs/runbook.md"), "restart the pod\n").expect("doc");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).expect("repo");
    std::fs::write(repo.join("README"), "fleet\n").expect("file");
    run("git", &["init", "-q"], &repo);
    run(
        "git",
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example",
            "add",
            "README",
        ],
        &repo,
    );
    run(
        "git",
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example",
            "commit",
            "-q",
            "-m",
            "first",
        ],
        &repo,
    );
    std::fs::write(dir.join("policy.toml"), policy(&dir, &servers, &python)).expect("policy");

    // NemoTron (TypeScript SDK): everything, time and the repository's read tools.
    let lines = ts(
        &servers,
        &dir,
        "nemotron",
        &json!([
            {"op": "list"},
            {"op": "call", "name": "git_status", "arguments": {"repo_path": repo.display().to_string()}},
            {"op": "call", "name": "git_commit", "arguments": {"repo_path": repo.display().to_string(), "message": "x"}},
            {"op": "call", "name": "fs_write_file", "arguments": {"path": dir.join("docs/x.md").display().to_string(), "content": "x"}},
        ]),
    );
    let nemotron = listed(&lines[1]);
    for name in [
        "everything_echo",
        "time_get_current_time",
        "git_status",
        "git_log",
        "git_diff",
        "git_show",
    ] {
        assert!(has(&nemotron, name), "nemotron sees {name}: {nemotron:?}");
    }
    for name in [
        "git_commit",
        "git_add",
        "git_reset",
        "git_checkout",
        "fs_read_text_file",
        "mem_read_graph",
    ] {
        assert!(
            !has(&nemotron, name),
            "nemotron does not see {name}: {nemotron:?}"
        );
    }
    assert!(
        nemotron.iter().all(|n| n.starts_with("everything_")
            || n.starts_with("time_")
            || n.starts_with("git_")),
        "{nemotron:?}"
    );
    assert!(
        lines[2].get("result").is_some(),
        "git_status runs: {}",
        lines[2]
    );
    for refused in [&lines[3], &lines[4]] {
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("refused by capability-gateway"),
            "{refused}"
        );
    }

    // Hermes (Python SDK): memory, files and everything, read-only; no git, no time.
    let lines = py(
        &dir,
        "hermes",
        &json!([
            {"op": "list"},
            {"op": "call", "name": "fs_read_text_file", "arguments": {"path": dir.join("docs/runbook.md").display().to_string()}},
            {"op": "call", "name": "mem_create_entities", "arguments": {"entities": [{"name": "x", "entityType": "t", "observations": []}]}},
        ]),
    );
    let hermes: Vec<String> = lines[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    assert!(
        has(&hermes, "fs_read_text_file")
            && has(&hermes, "mem_read_graph")
            && has(&hermes, "everything_echo"),
        "{hermes:?}"
    );
    assert!(
        !hermes
            .iter()
            .any(|n| n.starts_with("git_") || n.starts_with("time_")),
        "{hermes:?}"
    );
    assert!(
        !has(&hermes, "fs_write_file") && !has(&hermes, "mem_create_entities"),
        "{hermes:?}"
    );
    assert!(
        lines[1]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("restart the pod"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("refused"),
        "{}",
        lines[2]
    );

    // ElephantAlpha (TypeScript SDK): every server's read tools, no write.
    let lines = ts(
        &servers,
        &dir,
        "elephantalpha",
        &json!([
            {"op": "list"},
            {"op": "call", "name": "git_add", "arguments": {"repo_path": repo.display().to_string(), "files": ["README"]}},
        ]),
    );
    let elephant = listed(&lines[1]);
    for name in [
        "git_status",
        "time_get_current_time",
        "fs_read_text_file",
        "mem_read_graph",
        "everything_echo",
    ] {
        assert!(
            has(&elephant, name),
            "elephantalpha sees {name}: {elephant:?}"
        );
    }
    for name in [
        "git_commit",
        "git_add",
        "fs_write_file",
        "mem_create_entities",
        "mem_delete_entities",
    ] {
        assert!(
            !has(&elephant, name),
            "elephantalpha does not see {name}: {elephant:?}"
        );
    }
    assert!(
        lines[2]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("refused by capability-gateway"),
        "{}",
        lines[2]
    );

    // OpenClaw (Python SDK): everything, writes included.
    let lines = py(&dir, "openclaw", &json!([{"op": "list"}]));
    let openclaw: Vec<String> = lines[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    for name in [
        "git_commit",
        "fs_write_file",
        "mem_create_entities",
        "everything_echo",
        "time_convert_time",
    ] {
        assert!(has(&openclaw, name), "openclaw sees {name}: {openclaw:?}");
    }

    // The readers' writes never ran: the repository has its one commit and nothing staged, the
    // directory its one file, the graph no entity; each refusal is on record with its server.
    let log = Command::new("git")
        .args(["log", "--oneline"])
        .current_dir(&repo)
        .output()
        .expect("git log");
    assert_eq!(String::from_utf8_lossy(&log.stdout).lines().count(), 1);
    let status = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&repo)
        .output()
        .expect("git status");
    assert!(
        String::from_utf8_lossy(&status.stdout).trim().is_empty(),
        "nothing staged"
    );
    assert!(!dir.join("docs/x.md").exists());
    assert!(
        !std::fs::read_to_string(dir.join("memory.jsonl"))
            .unwrap_or_default()
            .contains("\"x\"")
    );
    let refused = |role: &str| -> Vec<(String, String)> {
        calls(&dir.join(format!("{role}.jsonl")))
            .iter()
            .filter(|r| r["verdict"] == "denied")
            .map(|r| {
                (
                    r["provider"].as_str().unwrap_or("-").to_owned(),
                    r["tool"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        refused("nemotron"),
        [
            ("git".to_owned(), "git_commit".to_owned()),
            ("filesystem".to_owned(), "write_file".to_owned())
        ]
    );
    assert_eq!(
        refused("hermes"),
        [("memory".to_owned(), "create_entities".to_owned())]
    );
    assert_eq!(
        refused("elephantalpha"),
        [("git".to_owned(), "git_add".to_owned())]
    );
}
