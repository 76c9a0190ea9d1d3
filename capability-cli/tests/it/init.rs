//! An operator's first hour, scripted: from the `mcpServers` JSON a client already has to a
//! governed client whose read-only role sees the read-only tools, in the commands the README
//! gives (`capability init`, `capability gateway --check`, the client entry it prints), against
//! the reference servers `server-memory` and `server-filesystem`. And what a mistake gets: a
//! server that does not start is left commented out and named, files already there are kept,
//! a `command` written as one string is answered with the list it should be, and `--check`
//! says, for a tool hidden because its server is not believed, the lines that would show it.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use proxy_common::{BIN, scratch};
use support::{McpServer, TsTarget, ts_client_lines};

fn capability(args: &[&str]) -> Output {
    // The servers' log of `--check` goes to a new file in the temporary directory: ours.
    Command::new(BIN)
        .args(args)
        .env("TMPDIR", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("runs")
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn entry(server: &McpServer) -> Value {
    json!({
        "command": server.program,
        "args": server.args,
        "env": server.env.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
    })
}

#[test]
fn from_mcp_servers_json_to_a_reader_that_sees_the_read_only_tools() {
    let servers = require_servers!("init_first_hour");
    let dir = scratch("init-first-hour", "");
    let files = dir.join("files");
    std::fs::create_dir_all(&files).expect("a folder");
    std::fs::write(files.join("hello.txt"), "hello").expect("a file");
    let memory = servers.memory(&dir.join("memory.json"));
    let filesystem = servers.filesystem(&files);
    let claude = json!({"mcpServers": {
        "memory": entry(&memory),
        "filesystem": entry(&filesystem),
        "legacy": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
    }});
    let config = dir.join("claude_desktop_config.json");
    std::fs::write(&config, claude.to_string()).expect("config");
    let gov = dir.join("gov");

    // 1. capability init
    let init = capability(&[
        "init",
        "--from",
        &config.display().to_string(),
        "--dir",
        &gov.display().to_string(),
    ]);
    let (out, err) = text(&init);
    assert_eq!(init.status.code(), Some(0), "{out}\n{err}");
    for says in [
        "memory: 9 tools; what the server claims of each:",
        "read_graph",
        "read_only=true",
        "skipped legacy: it speaks the old HTTP+SSE transport",
        "role reader sees",
        "\"--role\",",
    ] {
        assert!(out.contains(says), "{says}:\n{out}");
    }
    assert!(
        !out.contains("running on stdio") && !err.contains("running on stdio"),
        "the servers' own standard error is not in the answer:\n{out}\n{err}"
    );
    let log = std::fs::read_to_string(gov.join("servers.log")).expect("the servers' log");
    assert!(
        log.contains("Knowledge Graph MCP Server running on stdio"),
        "{log}"
    );
    let policy = gov.join("policy.toml");
    let lock = std::fs::read_to_string(gov.join("capability.lock")).expect("the lockfile");
    assert!(
        lock.contains("[memory.read_graph]") || lock.contains("read_graph"),
        "{lock}"
    );

    // 2. capability gateway --check: the reader sees the read-only tools, and only them.
    let check = capability(&[
        "gateway",
        "--policy",
        &policy.display().to_string(),
        "--check",
        "--role",
        "reader",
    ]);
    let (out, err) = text(&check);
    assert_eq!(check.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("shown   memory_read_graph"), "{out}");
    assert!(out.contains("shown   filesystem_read_text_file"), "{out}");
    assert!(out.contains("hidden  memory_create_entities"), "{out}");
    assert!(out.contains("hidden  filesystem_write_file"), "{out}");
    assert!(!out.contains("running on stdio"), "{out}");

    // 3. The client entry init printed: the gateway for the reader, the client's own SDK.
    let trail = gov.join("reader.jsonl");
    let args = proxy_common::gateway_stdio(&policy, "reader", &trail, &[]);
    let ops = json!([
        {"op": "list"},
        {"op": "call", "name": "filesystem_read_text_file",
         "arguments": {"path": files.join("hello.txt")}},
        {"op": "call", "name": "memory_create_entities",
         "arguments": {"entities": [{"name": "x", "entityType": "t", "observations": []}]}},
    ]);
    let output = servers
        .ts_client(
            &ops,
            TsTarget::Stdio {
                program: Path::new(BIN),
                args: &args,
            },
        )
        .output()
        .expect("runs the client");
    let lines = ts_client_lines(&output).expect("the client ran");
    let listed = proxy_common::listed(&lines[1]);
    for read in [
        "memory_read_graph",
        "memory_search_nodes",
        "filesystem_list_directory",
    ] {
        assert!(listed.iter().any(|n| n == read), "{read}: {listed:?}");
    }
    for write in [
        "memory_create_entities",
        "filesystem_write_file",
        "filesystem_move_file",
    ] {
        assert!(!listed.iter().any(|n| n == write), "{write}: {listed:?}");
    }
    assert_eq!(
        lines[2]["result"]["content"][0]["text"], "hello",
        "{}",
        lines[2]
    );
    assert!(lines[3].get("error").is_some(), "{}", lines[3]);
}

#[test]
fn a_server_that_does_not_start_is_left_commented_out_and_files_there_are_kept() {
    let servers = require_servers!("init_mistakes");
    let dir = scratch("init-mistakes", "");
    let memory = servers.memory(&dir.join("memory.json"));
    let config = dir.join("mcp.json");
    std::fs::write(
        &config,
        json!({"servers": {
            "memory": entry(&memory),
            "broken": {"command": dir.join("no-such-server").display().to_string()},
        }})
        .to_string(),
    )
    .expect("config");
    let gov = dir.join("gov");
    let args = [
        "init",
        "--from",
        &config.display().to_string(),
        "--dir",
        &gov.display().to_string(),
        "--timeout",
        "20",
    ];
    let init = capability(&args);
    let (out, err) = text(&init);
    assert_eq!(init.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("broken: not started, left commented out"),
        "{out}"
    );
    let policy = std::fs::read_to_string(gov.join("policy.toml")).expect("policy");
    assert!(policy.contains("# [servers.\"broken\"]"), "{policy}");
    let check = capability(&[
        "gateway",
        "--policy",
        &gov.join("policy.toml").display().to_string(),
        "--check",
    ]);
    assert_eq!(check.status.code(), Some(0), "{:?}", text(&check));

    let missing = capability(&[
        "init",
        "--from",
        &dir.join("no-such.json").display().to_string(),
        "--dir",
        &dir.join("elsewhere").display().to_string(),
    ]);
    assert_eq!(missing.status.code(), Some(2), "{:?}", text(&missing));
    assert!(
        text(&missing).1.contains("cannot read"),
        "{:?}",
        text(&missing)
    );
    assert!(!dir.join("elsewhere").exists(), "nothing left behind");

    let again = capability(&args);
    let (out, err) = text(&again);
    assert_eq!(again.status.code(), Some(2), "{out}\n{err}");
    assert!(
        err.contains("policy.toml exists: give another folder, or --force to write over it"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(gov.join("policy.toml")).expect("policy"),
        policy,
        "kept"
    );
}

#[test]
fn check_names_the_lines_that_would_show_a_tool_its_untrusted_server_claims_read_only() {
    let servers = require_servers!("check_fix");
    let dir = scratch("check-fix", "");
    let memory = servers.memory(&dir.join("memory.json"));
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            "[roles.reader]\nceiling = \"read-only\"\nallow = [\"*\"]\n\n[servers.memory]\n\
             command = {}\nenv = {}\n",
            memory.toml_command(),
            memory.toml_env()
        ),
    )
    .expect("policy");
    let check = capability(&[
        "gateway",
        "--policy",
        &dir.join("policy.toml").display().to_string(),
        "--check",
    ]);
    let (out, err) = text(&check);
    assert_eq!(check.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("role reader: 0 of 9 tools"), "{out}");
    for says in [
        "to show it: the server claims read_only = true",
        "`[assertions.\"memory/read_graph\"]` with `read_only = true` and `destructive = \
         false`);",
        "add `lock = \"capability.lock\"` to [servers.memory], then `capability pin --server \
         memory --lock capability.lock -- node ",
        "`trust = \"trusted\"` in [servers.memory]",
        "the servers' standard error: ",
    ] {
        assert!(out.contains(says), "{says}:\n{out}");
    }
    let fixes = out.matches("to show it:").count();
    assert_eq!(fixes, 3, "only the three tools it claims read-only:\n{out}");
    assert!(
        !out.contains("running on stdio") && !err.contains("running on stdio"),
        "{err}"
    );

    // A command written as one string is answered with the list it should be.
    std::fs::write(
        dir.join("string.toml"),
        "[servers.memory]\ncommand = \"npx -y @modelcontextprotocol/server-memory\"\n",
    )
    .expect("policy");
    let refused = capability(&[
        "gateway",
        "--policy",
        &dir.join("string.toml").display().to_string(),
        "--check",
    ]);
    let (_, err) = text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "write `command = [\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"]`"
        ),
        "{err}"
    );
}

/// The README's operator quickstart, as written: the commands of its block after the install
/// line run in a shell whose `HOME` holds a Claude Desktop configuration of the reference
/// servers and whose `PATH` finds this build's `capability`; the client entry it shows is the
/// one `init` prints.
#[test]
fn the_readmes_operator_quickstart_runs_as_written() {
    let servers = require_servers!("readme_operator_quickstart");
    let home = scratch("readme-quickstart", "");
    let memory = servers.memory(&home.join("memory.json"));
    let config = home.join(".config/Claude/claude_desktop_config.json");
    std::fs::create_dir_all(config.parent().expect("a folder")).expect("folders");
    std::fs::write(
        &config,
        json!({"mcpServers": {"memory": entry(&memory)}}).to_string(),
    )
    .expect("config");
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README");
    let section = readme
        .split("## Install, and govern the MCP servers you already run")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the README's operator quickstart");
    let blocks: Vec<&str> = section.split("```").skip(1).step_by(2).collect();
    let [install, commands, client] = blocks[..] else {
        panic!("an install block, a commands block and a client entry: {blocks:?}")
    };
    assert!(
        install.contains("cargo install --locked --path capability-cli"),
        "{install}"
    );
    let bin = Path::new(BIN).parent().expect("the binary's folder");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut outputs = Vec::new();
    for line in commands.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let ran = Command::new("sh")
            .arg("-c")
            .arg(line)
            .env("HOME", &home)
            .env("PATH", &path)
            .env("TMPDIR", env!("CARGO_TARGET_TMPDIR"))
            .output()
            .expect("sh");
        let (out, err) = text(&ran);
        assert_eq!(ran.status.code(), Some(0), "{line}:\n{out}\n{err}");
        outputs.push(out);
    }
    assert_eq!(outputs.len(), 2, "init, then --check");
    assert!(
        outputs[1].contains("shown   memory_read_graph"),
        "{}",
        outputs[1]
    );
    assert!(
        !outputs[1].contains("shown   memory_create_entities"),
        "{}",
        outputs[1]
    );
    let shown: Value = serde_json::from_str(client.trim_start_matches("json").trim())
        .expect("the README's client entry is JSON");
    let printed = &outputs[0][outputs[0].find("{\n").expect("the printed entry")..];
    let printed: Value = serde_json::Deserializer::from_str(printed)
        .into_iter::<Value>()
        .next()
        .expect("an entry")
        .expect("JSON");
    let home = home.display().to_string();
    let args = |entry: &Value| -> Vec<String> {
        entry["mcpServers"]["governed"]["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().unwrap_or_default().replace("/home/you", &home))
            .collect()
    };
    assert_eq!(args(&shown), args(&printed), "{printed}");
    assert_eq!(shown["mcpServers"]["governed"]["command"], "capability");
}
