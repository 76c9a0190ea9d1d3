//! `capability init`: a governed fleet from the `mcpServers` JSON an operator already has.
//! Its servers become the policy's `[servers]` ([`servers_json`], `written.rs`), each is started
//! and its tools pinned in one lockfile, and what each role would then see is checked
//! ([`check`](crate::check())), with what each server claims of each tool: the operator reviews
//! claims instead of guessing them.

pub mod servers_json;
mod written;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use capability::Policy;
use capability::manifest::HintKind;
use capability::mcp::Lockfile;
use serde::Serialize;
use serde_json::Value;

use crate::GatewayError;
use crate::fleet::check::{Checked, check};
use servers_json::{Imported, ImportedServer, Skipped, read_mcp_servers};
use written::{LOCK, Written, policy_text};

/// The policy's file name in the folder `init` writes.
pub const POLICY: &str = "policy.toml";

/// What a server claims of one of its tools (its annotations as it wrote them).
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct ToolClaims {
    /// The tool's own name.
    pub tool: String,
    /// Each hint the server states (`read_only`, `destructive`, `idempotent`, `open_world`),
    /// and its value; a hint it does not state is absent (then the fail-closed default).
    pub claims: BTreeMap<&'static str, bool>,
}

/// One imported server, and what became of it.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct InitServer {
    /// The server as imported.
    #[serde(flatten)]
    pub server: ImportedServer,
    /// Its tools and their claims, all pinned; empty when it could not be listed.
    pub tools: Vec<ToolClaims>,
    /// Why it could not be started and listed (it is then written commented out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// What `init` wrote and found.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct Initialized {
    /// The policy written.
    pub policy: PathBuf,
    /// The lockfile written (when any server was listed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock: Option<PathBuf>,
    /// Every imported server.
    pub servers: Vec<InitServer>,
    /// The entries of the file that are not servers of the fleet.
    pub skipped: Vec<Skipped>,
    /// What each role of the written policy sees (none when no server could be listed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked: Option<Checked>,
}

fn claims_of(tool: &Value) -> ToolClaims {
    let annotations = &tool["annotations"];
    ToolClaims {
        tool: tool["name"].as_str().unwrap_or_default().to_owned(),
        claims: HintKind::ALL
            .into_iter()
            .filter_map(|kind| Some((kind.key(), annotations[kind.mcp_name()].as_bool()?)))
            .collect(),
    }
}

fn config(why: impl std::fmt::Display) -> GatewayError {
    GatewayError::Config(why.to_string())
}

/// Reads the `mcpServers` JSON at `from` and writes, in the folder `dir` (made if need be),
/// [`POLICY`] with its servers and a `reader` and an `operator` role, and `capability.lock`
/// with every tool of every server that starts and lists within `timeout`; then checks what
/// each role sees. Files already there are kept unless `overwrite`.
///
/// # Errors
///
/// [`GatewayError::Config`] for a file that cannot be read or holds no server, files that
/// exist (without `overwrite`) or cannot be written.
pub async fn init(
    from: &Path,
    dir: &Path,
    timeout: Duration,
    overwrite: bool,
) -> Result<Initialized, GatewayError> {
    let origin = from.display().to_string();
    let text =
        std::fs::read_to_string(from).map_err(|e| config(format!("cannot read {origin}: {e}")))?;
    let Imported { servers, skipped } = read_mcp_servers(&text, &origin)?;
    if servers.is_empty() {
        let why: Vec<String> = skipped
            .iter()
            .map(|s| format!("{}: {}", s.key, s.why))
            .collect();
        return Err(config(format!(
            "{origin} holds no server to govern{}",
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join("; "))
            }
        )));
    }
    let (policy_path, lock_path) = (dir.join(POLICY), dir.join(LOCK));
    for path in [&policy_path, &lock_path] {
        if path.exists() && !overwrite {
            return Err(config(format!(
                "{} exists: give another folder, or --force to write over it",
                path.display()
            )));
        }
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| config(format!("cannot make {}: {e}", dir.display())))?;

    // Every server as the policy would start it, listed once and pinned.
    let unlocked: Vec<Written<'_>> = servers
        .iter()
        .map(|server| Written {
            server,
            listed: Ok(0),
        })
        .collect();
    let first = Policy::from_toml_str(&policy_text(&origin, &unlocked, false))
        .map_err(|e| config(format!("the policy for {origin} does not read back: {e}")))?;
    let mut lock = Lockfile::default();
    let mut listed = Vec::with_capacity(servers.len());
    let mut found = Vec::with_capacity(servers.len());
    for server in &servers {
        let entry = first.servers().iter().find(|e| e.name() == server.name);
        let source =
            entry.and_then(|entry| Some((crate::spec::source::source_of(entry, dir)?, entry)));
        let tools = match source {
            Some((source, entry)) => crate::fleet::list(&source, entry, timeout)
                .await
                .map(|(t, _)| t),
            None => Err("it names neither a command nor a URL".to_owned()),
        };
        let tools = tools.and_then(|tools| {
            lock.pin(&capability::Server::untrusted(&server.name), &tools)
                .map(|()| tools)
                .map_err(|e| e.to_string())
        });
        listed.push(Written {
            server,
            listed: tools.as_ref().map(Vec::len).map_err(Clone::clone),
        });
        found.push(InitServer {
            server: server.clone(),
            tools: tools
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(claims_of)
                .collect(),
            failed: tools.err(),
        });
    }
    let any = listed.iter().any(|w| w.listed.is_ok());
    // Never through a symbolic link; over a file only when asked (checked before, too, so
    // that nothing is started for files that would be kept).
    let write = |path: &Path, text: String| {
        crate::files::write(path, text.as_bytes(), overwrite).map_err(config)
    };
    if any {
        write(&lock_path, lock.to_toml_string())?;
    }
    write(&policy_path, policy_text(&origin, &listed, true))?;
    let checked = if any {
        let policy = Policy::from_toml_file(&policy_path).map_err(config)?;
        Some(check(&policy, &policy_path, None, timeout).await?)
    } else {
        None
    };
    Ok(Initialized {
        policy: policy_path,
        lock: any.then_some(lock_path),
        servers: found,
        skipped,
        checked,
    })
}
