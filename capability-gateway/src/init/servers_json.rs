//! The `mcpServers` JSON an operator already has, read: Claude Desktop's and Cursor's
//! (`{"mcpServers": {...}}`, Claude Code's `.mcp.json` too), VS Code's `mcp.json`
//! (`{"servers": {...}}`) and its settings (`{"mcp": {"servers": {...}}}`). Each entry becomes
//! a server of the fleet (its command and arguments as one list of words, its `env`, or its
//! URL), or is skipped with the reason; what the gateway cannot take from an entry (headers,
//! a working directory, variables it does not expand) is said, never dropped in silence.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::GatewayError;

/// How a server of the imported file is reached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reach {
    /// Spawned: the program, then its arguments.
    Command(Vec<String>),
    /// Streamable HTTP at this URL.
    Url(String),
}

/// One server of the imported file.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct ImportedServer {
    /// The name it gets in the policy (a provider name made of its key).
    pub name: String,
    /// Its key in the file, as written.
    pub key: String,
    /// How it is reached.
    pub reach: Reach,
    /// The variables its command gets.
    pub env: BTreeMap<String, String>,
    /// What of its entry the policy does not carry, and what to do instead.
    pub notes: Vec<String>,
}

/// An entry of the imported file that is not a server of the fleet, and why.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct Skipped {
    /// Its key in the file, as written.
    pub key: String,
    /// Why it is not imported.
    pub why: String,
}

/// What an `mcpServers` file holds.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct Imported {
    /// Its servers, in the order of their keys (sorted).
    pub servers: Vec<ImportedServer>,
    /// The entries skipped.
    pub skipped: Vec<Skipped>,
}

/// A word the operator typed made into a provider name: characters outside `A-Z a-z 0-9 _ - .`
/// become `-`, at most 64 of them; `server` when none is left.
pub fn provider_name(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_matches('-');
    let mut out: String = trimmed.chars().take(64).collect();
    if out.is_empty() {
        out.push_str("server");
    }
    out
}

/// The servers of `text`, the `mcpServers` JSON read from `origin`.
///
/// # Errors
///
/// [`GatewayError::Config`] for text that is not JSON, or holds no table of servers where
/// any of the three shapes has one.
pub fn read_mcp_servers(text: &str, origin: &str) -> Result<Imported, GatewayError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| GatewayError::Config(format!("{origin} is not JSON: {e}")))?;
    let table = value
        .get("mcpServers")
        .or_else(|| value.get("servers"))
        .or_else(|| value.get("mcp").and_then(|mcp| mcp.get("servers")))
        .and_then(Value::as_object)
        .ok_or_else(|| {
            GatewayError::Config(format!(
                "{origin} has no table of servers: `mcpServers` (Claude Desktop, Cursor, Claude \
                 Code), `servers` (VS Code's mcp.json) or `mcp.servers` (VS Code's settings)"
            ))
        })?;
    let mut imported = Imported::default();
    for (key, entry) in table {
        match server(key, entry) {
            Ok(mut server) => {
                server.name = unique(&provider_name(key), &imported.servers);
                imported.servers.push(server);
            }
            Err(why) => imported.skipped.push(Skipped {
                key: key.clone(),
                why,
            }),
        }
    }
    Ok(imported)
}

/// `name`, or `name-2`, `name-3`... when a server before took it.
fn unique(name: &str, before: &[ImportedServer]) -> String {
    let taken = |n: &str| before.iter().any(|s| s.name == n);
    if !taken(name) {
        return name.to_owned();
    }
    (2..)
        .map(|i| format!("{name}-{i}"))
        .find(|n| !taken(n))
        .unwrap_or_else(|| name.to_owned())
}

/// What a string value says of a variable the client would have expanded.
fn expansion(value: &str) -> Option<&'static str> {
    (value.contains("${") || value.contains("{env:"))
        .then_some("which the client would have expanded and the gateway does not: write the value")
}

fn strings(entry: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| format!("its `{key}` holds something other than strings")),
        Some(_) => Err(format!("its `{key}` is not a list of strings")),
    }
}

fn server(key: &str, entry: &Value) -> Result<ImportedServer, String> {
    let entry = entry.as_object().ok_or("it is not an object")?;
    if entry.get("disabled").and_then(Value::as_bool) == Some(true) {
        return Err("it is disabled".to_owned());
    }
    let kind = entry.get("type").and_then(Value::as_str).unwrap_or("");
    if kind == "sse" {
        return Err(
            "it speaks the old HTTP+SSE transport; the gateway speaks Streamable HTTP (if the \
             server serves that too, add its URL by hand)"
                .to_owned(),
        );
    }
    let mut notes = Vec::new();
    let url = ["url", "serverUrl", "httpUrl"]
        .iter()
        .find_map(|k| entry.get(*k).and_then(Value::as_str));
    let reach = match (entry.get("command"), url) {
        (Some(Value::String(program)), _) => {
            let mut words = vec![program.clone()];
            words.extend(strings(entry, "args")?);
            if program.trim().contains(char::is_whitespace) && entry.get("args").is_none() {
                notes.push(format!(
                    "its command `{program}` is one word with spaces: split it into the \
                     program and its arguments in the policy if that is what it means"
                ));
            }
            Reach::Command(words)
        }
        (Some(Value::Array(_)), _) => {
            let mut words = strings(entry, "command")?;
            words.extend(strings(entry, "args")?);
            Reach::Command(words)
        }
        (Some(_), _) => return Err("its `command` is neither a string nor a list".to_owned()),
        (None, Some(url)) => Reach::Url(url.to_owned()),
        (None, None) => return Err("it names neither a `command` nor a `url`".to_owned()),
    };
    if let Reach::Command(words) = &reach
        && words.first().is_none_or(String::is_empty)
    {
        return Err("its command names no program".to_owned());
    }
    let mut env = BTreeMap::new();
    if let Some(vars) = entry.get("env").and_then(Value::as_object) {
        for (name, value) in vars {
            if name.is_empty() || name.contains(['=', '\0']) {
                notes.push(format!(
                    "env `{name}` is not a name a process can have: not imported"
                ));
                continue;
            }
            let Some(value) = value.as_str() else {
                notes.push(format!("env `{name}` is not a string: not imported"));
                continue;
            };
            if let Some(why) = expansion(value) {
                notes.push(format!("env `{name}` is `{value}`, {why}"));
            }
            env.insert(name.clone(), value.to_owned());
        }
    }
    if matches!(reach, Reach::Url(_)) && !env.is_empty() {
        notes.push("its `env` is for a spawned server: not imported".to_owned());
        env.clear();
    }
    if entry.contains_key("headers") {
        notes.push(
            "its `headers` are not imported: a bearer token goes in a file named by \
             `token_file` under its [servers] entry"
                .to_owned(),
        );
    }
    if entry.contains_key("cwd") {
        notes.push(
            "its `cwd` is not imported: the gateway starts it in its own working directory; \
             give paths in its arguments as absolute paths"
                .to_owned(),
        );
    }
    if entry.contains_key("envFile") {
        notes.push("its `envFile` is not imported: write its variables under `env`".to_owned());
    }
    Ok(ImportedServer {
        name: String::new(),
        key: key.to_owned(),
        reach,
        env,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_become_provider_names() {
        assert_eq!(
            provider_name("mcp-servers/everything"),
            "mcp-servers-everything"
        );
        assert_eq!(
            provider_name("secure-filesystem-server"),
            "secure-filesystem-server"
        );
        assert_eq!(provider_name("@scope/x"), "scope-x");
        assert_eq!(provider_name("///"), "server");
    }

    #[test]
    fn the_three_shapes_are_read_and_what_is_not_carried_is_said() {
        let claude = r#"{"mcpServers": {
            "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"],
                       "env": {"MEMORY_FILE_PATH": "/tmp/m.json", "TOKEN": "${input:token}"}},
            "search": {"url": "https://search.example/mcp", "headers": {"Authorization": "x"}},
            "old": {"type": "sse", "url": "https://old.example/sse"},
            "off": {"command": "x", "disabled": true},
            "my server": {"command": ["uvx", "mcp-server-time"]}
        }}"#;
        let imported = read_mcp_servers(claude, "claude.json").expect("read");
        let names: Vec<&str> = imported.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["memory", "my-server", "search"]);
        let memory = &imported.servers[0];
        assert_eq!(
            memory.reach,
            Reach::Command(vec![
                "npx".into(),
                "-y".into(),
                "@modelcontextprotocol/server-memory".into()
            ])
        );
        assert_eq!(memory.env["MEMORY_FILE_PATH"], "/tmp/m.json");
        assert!(
            memory.notes[0].contains("`${input:token}`, which the client would have expanded"),
            "{:?}",
            memory.notes
        );
        assert!(imported.servers[2].notes[0].contains("`headers` are not imported"));
        let skipped: Vec<(&str, &str)> = imported
            .skipped
            .iter()
            .map(|s| (s.key.as_str(), s.why.as_str()))
            .collect();
        assert_eq!(skipped[0].0, "off");
        assert_eq!(skipped[1].0, "old");
        assert!(skipped[1].1.contains("HTTP+SSE"), "{skipped:?}");

        let vscode =
            r#"{"servers": {"fs": {"type": "stdio", "command": "node", "args": ["fs.js"]}}}"#;
        assert_eq!(
            read_mcp_servers(vscode, "mcp.json")
                .expect("read")
                .servers
                .len(),
            1
        );
        let settings = r#"{"editor.tabSize": 2, "mcp": {"servers": {"fs": {"command": "node"}}}}"#;
        assert_eq!(
            read_mcp_servers(settings, "settings.json")
                .expect("read")
                .servers
                .len(),
            1
        );
        let none = read_mcp_servers(r#"{"other": {}}"#, "x.json").expect_err("no table");
        assert!(
            none.to_string().contains("x.json has no table of servers"),
            "{none}"
        );
        let twice = r#"{"mcpServers": {"a b": {"command": "x"}, "a-b": {"command": "y"}}}"#;
        let names: Vec<String> = read_mcp_servers(twice, "t.json")
            .expect("read")
            .servers
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["a-b", "a-b-2"]);
    }
}
