//! The policy `capability init` writes: the imported servers under `[servers]` (commands as
//! lists of words, their `env`, URLs), each pinned in one lockfile, and two roles to start
//! from, commented so that an operator reads what each line does.

use std::fmt::Write;

use crate::init::servers_json::{ImportedServer, Reach};

/// The lockfile's name, next to the policy.
pub(crate) const LOCK: &str = "capability.lock";

/// `text` as a TOML basic string (JSON writes strings as TOML reads them).
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// A server as the policy writes it, and whether it could be listed (else why not: it is
/// then written commented out, so the rest of the fleet starts).
pub(crate) struct Written<'a> {
    pub(crate) server: &'a ImportedServer,
    pub(crate) listed: Result<usize, String>,
}

/// The policy for `servers`, imported from `origin`; each listed one pinned in [`LOCK`] when
/// `locked`.
pub(crate) fn policy_text(origin: &str, servers: &[Written<'_>], locked: bool) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# Written by `capability init` from {origin}.\n\
         # Every server's tools are pinned in {LOCK}: while a tool's descriptor stays as pinned,\n\
         # what its server claims of it (read-only, destructive...) is believed; a tool that\n\
         # changes is hidden until it is reviewed and pinned again. Review the claims `capability\n\
         # init` printed: where one is wrong, assert the truth under [assertions].\n\
         version = \"1\"\n\
         \n\
         # Sees and calls the tools whose pinned claims say they only read.\n\
         [roles.reader]\n\
         ceiling = \"read-only\"\n\
         allow = [\"*\"]\n\
         \n\
         # Sees and calls every tool. Narrow it, or hold destructive calls for a human's\n\
         # signed approval (`approve = [\"server/tool\"]` and [approvals]), before giving\n\
         # it to an agent.\n\
         [roles.operator]\n\
         ceiling = \"unrestricted\"\n\
         allow = [\"*\"]"
    );
    for written in servers {
        let server = written.server;
        let mut entry = String::new();
        let _ = writeln!(entry, "\n[servers.{}]", quoted(&server.name));
        if server.key != server.name {
            let _ = writeln!(entry, "# {} in {origin}", quoted(&server.key));
        }
        match &server.reach {
            Reach::Command(words) => {
                let words: Vec<String> = words.iter().map(|w| quoted(w)).collect();
                let _ = writeln!(entry, "command = [{}]", words.join(", "));
            }
            Reach::Url(url) => {
                let _ = writeln!(entry, "url = {}", quoted(url));
            }
        }
        if !server.env.is_empty() {
            let vars: Vec<String> = server
                .env
                .iter()
                .map(|(name, value)| format!("{} = {}", quoted(name), quoted(value)))
                .collect();
            let _ = writeln!(entry, "env = {{ {} }}", vars.join(", "));
        }
        if locked && written.listed.is_ok() {
            let _ = writeln!(entry, "lock = \"{LOCK}\"");
        }
        for note in &server.notes {
            let _ = writeln!(entry, "# note: {}", one_line(note));
        }
        match &written.listed {
            Ok(_) => text.push_str(&entry),
            Err(why) => {
                let _ = writeln!(
                    text,
                    "\n# Not started by `capability init` ({}); uncomment it once it starts, \
                     then pin it: `capability pin --server {} --lock {LOCK} -- <its command>`.",
                    one_line(why),
                    server.name
                );
                for line in entry.lines().filter(|l| !l.is_empty()) {
                    let _ = writeln!(text, "# {line}");
                }
            }
        }
    }
    text
}

/// `text` on one line, fit for a comment.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r']).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::servers_json::read_mcp_servers;

    #[test]
    fn the_policy_reads_back_with_every_server_and_the_unlisted_commented_out() {
        let imported = read_mcp_servers(
            r#"{"mcpServers": {
                "a.b": {"command": "node", "args": ["s \"quoted\".js"], "env": {"K": "v\n"}},
                "web": {"url": "https://web.example/mcp"},
                "gone": {"command": "no-such-program"}}}"#,
            "mcp.json",
        )
        .expect("read");
        let written: Vec<Written<'_>> = imported
            .servers
            .iter()
            .map(|server| Written {
                server,
                listed: if server.name == "gone" {
                    Err("cannot start `no-such-program`:\nnot found".to_owned())
                } else {
                    Ok(1)
                },
            })
            .collect();
        let text = policy_text("mcp.json", &written, true);
        let policy =
            capability::Policy::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let names: Vec<&str> = policy.servers().iter().map(|s| s.name()).collect();
        assert_eq!(names, ["a.b", "web"], "{text}");
        let ab = &policy.servers()[0];
        assert_eq!(
            ab.command(),
            Some(&["node".to_owned(), "s \"quoted\".js".to_owned()][..])
        );
        assert_eq!(ab.lock(), Some(LOCK));
        assert!(
            text.contains(
                "# Not started by `capability init` (cannot start `no-such-program`: not found)"
            ),
            "{text}"
        );
        assert!(text.contains("# command = [\"no-such-program\"]"), "{text}");
        assert_eq!(policy.roles().collect::<Vec<_>>(), ["operator", "reader"]);
    }
}
