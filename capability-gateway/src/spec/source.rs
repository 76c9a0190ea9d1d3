//! Where a server of the fleet is: the command that starts it, its URL, or a recorded list.

use std::path::{Path, PathBuf};

use capability::authz::ServerEntry;

/// Where a server's tools came from (in JSON: `command`, `url` or `file`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerSource {
    /// Its command, spawned.
    Command(Vec<String>),
    /// Its Streamable HTTP endpoint.
    Url(String),
    /// A recorded tool list.
    File(PathBuf),
}

/// Where `entry`'s server is: its command, its URL, or its recorded list (relative to `base`).
/// A command's program written as a relative path (`./server.js`, `bin/server`) is relative to
/// `base` too, as `lock` and `file` are, not to wherever the command is run from; a bare name
/// (`npx`) is looked up on `PATH`.
pub(crate) fn source_of(entry: &ServerEntry, base: &Path) -> Option<ServerSource> {
    if let Some(command) = entry.command() {
        let mut words = command.to_vec();
        if let Some(program) = words.first_mut() {
            *program = program_at(program, base);
        }
        return Some(ServerSource::Command(words));
    }
    if let Some(url) = entry.url() {
        return Some(ServerSource::Url(url.to_owned()));
    }
    entry.file().map(|file| ServerSource::File(base.join(file)))
}

/// `program` made relative to `base` when it is a relative path with a directory in it.
fn program_at(program: &str, base: &Path) -> String {
    let path = Path::new(program);
    if path.is_absolute() || path.components().count() < 2 || base.as_os_str().is_empty() {
        return program.to_owned();
    }
    base.join(path).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_program_is_relative_to_the_policy_and_a_bare_name_is_looked_up() {
        let base = Path::new("/etc/capability");
        assert_eq!(
            program_at("./server.js", base),
            "/etc/capability/./server.js"
        );
        assert_eq!(program_at("bin/server", base), "/etc/capability/bin/server");
        assert_eq!(program_at("npx", base), "npx");
        assert_eq!(program_at("/usr/bin/node", base), "/usr/bin/node");
        assert_eq!(program_at("bin/server", Path::new("")), "bin/server");
    }
}
