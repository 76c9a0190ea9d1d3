//! The fleet of the policy's `[servers]`: each server started (or reached) and listed, with its
//! trust, its lockfile and its prefix, put together into one [`Fleet`].

pub(crate) mod check;
pub(crate) mod fix;
pub(crate) mod members;
pub(crate) mod reload;
pub(crate) mod tools_file;
pub(crate) mod versions;

use std::path::{Path, PathBuf};
use std::time::Duration;

use capability::Policy;
use capability::authz::ServerEntry;
use capability::mcp::{Fleet, Listing, Lockfile, Server};
use serde_json::Value;

use crate::GatewayError;
use crate::spec::source::{ServerSource, source_of};
use crate::upstream::Listed;

/// One server of the fleet, listed.
#[derive(Debug)]
pub struct FleetServer {
    /// Its operator's name.
    pub name: String,
    /// Where its tools came from.
    pub source: ServerSource,
    /// Whether its annotations are believed.
    pub trusted: bool,
    /// Its lockfile, if any.
    pub lock: Option<PathBuf>,
    /// The prefix its tools are shown with.
    pub prefix: String,
    /// How many tools it lists.
    pub tools: usize,
    /// Its resources, templates and prompts.
    pub(crate) items: Listed,
}

/// Starts (or reaches) and lists, in name order, every server of `policy`'s `[servers]` that names a command,
/// a URL or a file (an entry that only says what the proxy forwards is not a server of the
/// fleet); paths are relative to `policy_path`'s directory. Any server that cannot be listed,
/// any lockfile that cannot be read or does not pin its server, stops it, naming which.
pub async fn read_fleet(
    policy: &Policy,
    policy_path: &Path,
    timeout: Duration,
) -> Result<(Fleet, Vec<FleetServer>), GatewayError> {
    let base = policy_path.parent().unwrap_or(Path::new("."));
    let mut members = Vec::new();
    let mut servers = Vec::new();
    for entry in policy.servers() {
        let Some(source) = source_of(entry, base) else {
            continue;
        };
        let name = entry.name();
        let fail = |why: String| GatewayError::Config(format!("server `{name}`: {why}"));
        let (tools, items) = list(&source, entry, timeout).await.map_err(fail)?;
        let trusted = entry.trusted().unwrap_or(false);
        let server = if trusted {
            Server::trusted(name)
        } else {
            Server::untrusted(name)
        };
        let lock_path = entry.lock().map(|l| base.join(l));
        let lock = match &lock_path {
            None => None,
            Some(path) => {
                let lock = Lockfile::load(path)
                    .map_err(|e| fail(e.to_string()))?
                    .ok_or_else(|| fail(format!("{}: no such lockfile", path.display())))?;
                if lock.server(name).is_none() {
                    return Err(fail(format!(
                        "{} pins no tool of it: every tool would be hidden; pin them with \
                         `capability pin --server {name} --lock {}`",
                        path.display(),
                        path.display()
                    )));
                }
                Some(crate::pins::governed(lock, policy, name))
            }
        };
        let listing =
            Listing::read(&server, &tools, lock.as_ref()).map_err(|e| fail(e.to_string()))?;
        servers.push(FleetServer {
            name: name.to_owned(),
            source,
            trusted,
            lock: lock_path,
            prefix: entry.prefix(),
            tools: tools.len(),
            items,
        });
        members.push((listing, entry.prefix()));
    }
    if members.is_empty() {
        return Err(GatewayError::Config(format!(
            "{}: the policy's [servers] name no server with a `command`, a `url` or a `file`",
            policy_path.display()
        )));
    }
    let fleet = Fleet::new(members).map_err(|e| GatewayError::Config(e.to_string()))?;
    Ok((fleet, servers))
}

/// The tools of the server at `source` as JSON values, and its other items (none for a
/// recorded list): a live one started (or reached) and listed by the same code that serves it.
pub(crate) async fn list(
    source: &ServerSource,
    entry: &ServerEntry,
    timeout: Duration,
) -> Result<(Vec<Value>, Listed), String> {
    if let ServerSource::File(path) = source {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        return crate::fleet::tools_file::parse_tools(&text, &path.display().to_string())
            .map(|(_, tools)| (tools, Listed::default()));
    }
    let name = entry.name();
    let listing = async {
        // Nothing listens to list changes here; a server's requests are refused.
        let (changed, _unheard) = tokio::sync::mpsc::unbounded_channel();
        let connection = crate::upstream::connect(
            name,
            source,
            entry.env(),
            None,
            changed,
            None,
            crate::upstream::relay::Levels::default(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let peer = connection.peer();
        let tools = connection.tools(&Server::untrusted(name)).await?;
        let items = crate::upstream::list_items(&peer, name).await;
        connection.close().await;
        let tools = tools
            .into_iter()
            .map(|tool| serde_json::to_value(tool).map_err(|e| e.to_string()))
            .collect::<Result<Vec<Value>, String>>()?;
        Ok::<_, String>((tools, items))
    };
    tokio::time::timeout(timeout, listing)
        .await
        .map_err(|_| format!("did not answer within {} s", timeout.as_secs()))?
}
