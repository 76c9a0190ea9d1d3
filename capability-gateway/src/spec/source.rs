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
pub(crate) fn source_of(entry: &ServerEntry, base: &Path) -> Option<ServerSource> {
    if let Some(command) = entry.command() {
        return Some(ServerSource::Command(command.to_vec()));
    }
    if let Some(url) = entry.url() {
        return Some(ServerSource::Url(url.to_owned()));
    }
    entry.file().map(|file| ServerSource::File(base.join(file)))
}
