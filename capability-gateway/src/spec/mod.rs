//! What the engine serves: each server of the fleet as one [`ServerSpec`] (where it is, whether
//! it is believed, its lockfile, its prefix, its credentials for an HTTP server, which of its
//! items are served), read from the policy's `[servers]` ([`Servers::Policy`], `capability
//! gateway`) or given ([`Servers::Given`], `capability proxy`: one server from its flags).
//! A reload keeps a running server whose spec did not change.

pub(crate) mod source;

use std::path::{Path, PathBuf};

use capability::Policy;
use capability::authz::ServerEntry;
use capability::mcp::{Lockfile, Server};

use crate::spec::source::{ServerSource, source_of};

/// Where the engine's servers come from.
#[derive(Clone, Debug)]
pub enum Servers {
    /// The policy's `[servers]` (read again on a reload).
    Policy,
    /// These, whatever the policy says (a reload reads their lockfiles again).
    Given(Vec<ServerSpec>),
}

/// A server's bearer token: its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Calls on the caller's behalf: each caller's access token exchanged at the issuer of the
/// policy's `[auth]` (RFC 8693) for one whose audience is the server.
#[derive(Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The engine's client id at the issuer.
    pub client_id: String,
    /// Its secret.
    pub client_secret: Secret,
    /// The server's audience in exchanged tokens (default: its URL).
    pub audience: Option<String>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("client_id", &self.client_id)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

/// One server of the fleet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// The operator's name for it: the provider of its tools in the policy and the lockfile.
    pub name: String,
    /// Where it is: its command, or its Streamable HTTP endpoint.
    pub source: ServerSource,
    /// Variables for a spawned command.
    pub env: Vec<(String, String)>,
    /// Whether its annotations are believed.
    pub trusted: bool,
    /// Its lockfile: a tool that drifted from its pin is hidden.
    pub lock: Option<PathBuf>,
    /// What its tool and prompt names are shown with.
    pub prefix: String,
    /// The token presented to an HTTP server: the engine's own credential, never a client's.
    pub token: Option<Secret>,
    /// Calls on the caller's behalf (an HTTP server behind an `[auth]` front).
    pub exchange: Option<Exchange>,
    /// Whether its resources are served.
    pub resources: bool,
    /// Whether its prompts are served.
    pub prompts: bool,
}

impl ServerSpec {
    /// The live servers of `policy`'s `[servers]`, in name order (paths relative to `base`); an
    /// entry with only a recorded list is an error (the engine serves live servers).
    pub fn of_policy(policy: &Policy, base: &Path) -> Result<Vec<ServerSpec>, String> {
        let mut specs = Vec::new();
        for entry in policy.servers() {
            let Some(source) = source_of(entry, base) else {
                continue;
            };
            if let ServerSource::File(_) = source {
                return Err(format!(
                    "server `{}` has only a recorded tool list (`file`); a gateway serves live \
                     servers: give its `command` or `url`",
                    entry.name()
                ));
            }
            specs.push(ServerSpec::of(entry, source, base)?);
        }
        if specs.is_empty() {
            return Err(
                "the policy's [servers] name no live server (`command` or `url`)".to_owned(),
            );
        }
        Ok(specs)
    }

    fn of(entry: &ServerEntry, source: ServerSource, base: &Path) -> Result<ServerSpec, String> {
        let relative = |file: &str| base.join(file);
        let token = entry
            .token_file()
            .map(|file| read_secret(&relative(file), entry.name(), "token"))
            .transpose()?;
        let exchange = entry
            .exchange()
            .map(|exchange| {
                Ok::<_, String>(Exchange {
                    client_id: exchange.client_id().to_owned(),
                    client_secret: read_secret(
                        &relative(exchange.secret_file()),
                        entry.name(),
                        "exchange client's secret",
                    )?,
                    audience: exchange.audience().map(str::to_owned),
                })
            })
            .transpose()?;
        Ok(ServerSpec {
            name: entry.name().to_owned(),
            source,
            env: entry.env().to_vec(),
            trusted: entry.trusted().unwrap_or(false),
            lock: entry.lock().map(relative),
            prefix: entry.prefix(),
            token,
            exchange,
            // A gateway serves every server's resources and prompts.
            resources: true,
            prompts: true,
        })
    }

    pub(crate) fn server(&self) -> Server {
        if self.trusted {
            Server::trusted(&self.name)
        } else {
            Server::untrusted(&self.name)
        }
    }

    /// The server's lockfile, read now, as `policy` governs it ([`crate::pins::governed`]).
    pub(crate) fn read_lock(&self, policy: &Policy) -> Result<Option<Lockfile>, String> {
        let Some(path) = &self.lock else {
            return Ok(None);
        };
        let lock = Lockfile::load(path)
            .map_err(|e| format!("server `{}`: {e}", self.name))?
            .ok_or_else(|| {
                format!(
                    "server `{}`: {}: no such lockfile",
                    self.name,
                    path.display()
                )
            })?;
        Ok(Some(crate::pins::governed(lock, policy, &self.name)))
    }
}

impl Servers {
    /// The servers to run under `policy` (whose file is in `base`).
    pub(crate) fn specs(&self, policy: &Policy, base: &Path) -> Result<Vec<ServerSpec>, String> {
        match self {
            Servers::Policy => ServerSpec::of_policy(policy, base),
            Servers::Given(specs) => Ok(specs.clone()),
        }
    }
}

/// A secret from a file: its one line, without spaces or control characters.
pub fn read_secret(path: &Path, server: &str, what: &str) -> Result<Secret, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "server `{server}`: cannot read the {what} `{}`: {e}",
            path.display()
        )
    })?;
    let value = text.trim();
    if value.is_empty() || value.chars().any(|c| c.is_control() || c == ' ') {
        return Err(format!(
            "server `{server}`: `{}` holds no {what} (one line, no spaces or control characters)",
            path.display()
        ));
    }
    Ok(Secret(value.to_owned()))
}
