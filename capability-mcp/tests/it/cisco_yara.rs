//! The scan checked against a scanner nobody here wrote (issue 48, item 4): the corpus of
//! `tests/fixtures/scan/poisoned` and the reference servers' real tool lists
//! (`tests/fixtures/mcp`) through Cisco's `cisco-ai-mcp-scanner` static YARA mode, offline, and
//! every tool it flags must be flagged by ours too (a hard finding), or be named below with why.
//!
//! The scanner is installed by this test into a virtual environment under `target/` from the
//! hash-pinned `tests/python/mcp-scanner-requirements.txt` (CPython 3.11). Only its YARA rules
//! and yara-python are used (`tests/python/mcp_scanner_yara.py` says why and how it follows the
//! scanner's own `_analyze_tool`). Without Python or PyPI the test says so and passes, unless
//! `CAPABILITY_REQUIRE_MCP_SERVERS=1`, where it fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use capability::mcp::scan::{Severity, scan_fleet};
use serde_json::Value;

/// Tools Cisco's rules flag that ours do not, with why. Empty: none today.
const KNOWN_MISSES: &[(&str, &str, &str)] = &[];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn required() -> bool {
    std::env::var("CAPABILITY_REQUIRE_MCP_SERVERS").is_ok_and(|v| v == "1")
}

/// The virtual environment's python, installed once per requirements file.
fn install() -> Result<PathBuf, String> {
    capability_testkit::tier::interop_only("the scanner's Python environment")?;
    let requirements = root().join("tests/python/mcp-scanner-requirements.txt");
    let wanted =
        std::fs::read(&requirements).map_err(|e| format!("{}: {e}", requirements.display()))?;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-mcp-scanner");
    let python = dir.join("bin/python");
    let stamp = dir.join(".installed");
    if python.is_file() && std::fs::read(&stamp).is_ok_and(|s| s == wanted) {
        return Ok(python);
    }
    let run = |command: &mut Command, what: &str| -> Result<(), String> {
        let output = command
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{what}: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} {}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    };
    // The wheel of yara-python pinned is CPython 3.11's.
    let interpreter = ["python3.11", "python3"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .args(["-c", "import sys; assert sys.version_info[:2] == (3, 11)"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .ok_or("no CPython 3.11 (`python3.11` or `python3`)")?;
    run(
        Command::new(interpreter)
            .args(["-m", "venv", "--clear"])
            .arg(&dir),
        "python3 -m venv",
    )?;
    run(
        Command::new(dir.join("bin/pip"))
            .args(["install", "--quiet", "--require-hashes", "--no-deps", "-r"])
            .arg(&requirements)
            .env_remove("PIP_FIND_LINKS")
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
        "pip install --require-hashes",
    )?;
    std::fs::write(&stamp, &wanted).map_err(|e| e.to_string())?;
    Ok(python)
}

fn corpus() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["tests/fixtures/scan/poisoned", "tests/fixtures/mcp"] {
        let dir = root().join(dir);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let listed = dir.ends_with("poisoned") || name.ends_with(".tools.json");
            if listed && name.ends_with(".json") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// `(server, tools)` of a corpus file or a tool list, as the script reads them.
fn servers(path: &Path) -> Vec<(String, Vec<Value>)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let data: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let tools = |v: &Value| v["tools"].as_array().cloned().unwrap_or_default();
    match data["servers"].as_array() {
        Some(servers) => servers
            .iter()
            .map(|s| (s["name"].as_str().unwrap_or_default().to_owned(), tools(s)))
            .collect(),
        None => vec![(
            data["server"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            tools(&data),
        )],
    }
}

#[test]
fn every_tool_ciscos_yara_rules_flag_is_flagged_by_ours() {
    let python = match install() {
        Ok(python) => python,
        Err(why) if !required() => {
            eprintln!("skipped: Cisco's MCP scanner could not be installed: {why}");
            return;
        }
        Err(why) => panic!("Cisco's MCP scanner could not be installed: {why}"),
    };
    let files = corpus();
    let output = Command::new(&python)
        .arg(root().join("tests/python/mcp_scanner_yara.py"))
        .args(&files)
        .stdin(Stdio::null())
        .output()
        .expect("run the scanner");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // (file, server, tool) -> Cisco's rules that matched.
    let mut theirs: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    let mut seen = 0;
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        seen += 1;
        let rules: Vec<String> = row["matches"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["rule"].as_str().map(str::to_owned))
            .collect();
        if !rules.is_empty() {
            let key = |k: &str| row[k].as_str().unwrap_or_default().to_owned();
            theirs.insert((key("file"), key("server"), key("tool")), rules);
        }
    }
    let total: usize = files
        .iter()
        .map(|f| servers(f).iter().map(|(_, t)| t.len()).sum::<usize>())
        .sum();
    assert_eq!(seen, total, "the script read every tool");
    // The rules ran: the published direct poisoning is one they know.
    assert!(
        theirs
            .keys()
            .any(|(file, _, tool)| file.ends_with("direct-poisoning.json") && tool == "add"),
        "{theirs:?}"
    );

    let mut missed = Vec::new();
    for ((file, server, tool), rules) in &theirs {
        let fleet = servers(Path::new(file));
        let ours = scan_fleet(fleet.iter().map(|(s, t)| (s.as_str(), &t[..])));
        let hard = ours.iter().any(|f| {
            &f.server == server && &f.tool == tool && f.finding.severity == Severity::Hard
        });
        let known = KNOWN_MISSES
            .iter()
            .any(|(f, s, t)| file.ends_with(f) && s == server && t == tool);
        if !hard && !known {
            missed.push(format!("{file}: {server}/{tool} ({})", rules.join(", ")));
        }
    }
    assert!(
        missed.is_empty(),
        "flagged by Cisco's YARA rules, not by ours: {missed:#?}"
    );
    eprintln!(
        "Cisco's YARA rules flag {} of {total} tools; ours flag each of them hard",
        theirs.len()
    );
}
