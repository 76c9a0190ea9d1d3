//! The `[servers]` table of a policy: the operator's names for the MCP servers they run.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::toml_file::TomlError;

/// One entry of a policy's `[servers]` table: a name the operator gives an MCP server, and how
/// to recognise the server by what the operator types.
///
/// A server's name selects the policy's patterns (`name/tool`), its operator assertions and its
/// lockfile pins, so it must be the operator's, never the server's own `serverInfo.name`. The
/// command line takes it from `--server`, else from the entry that matches the source, else it
/// derives one from what was typed (and says so).
///
/// ```toml
/// [servers.everything]                # the name: a provider name (A-Z a-z 0-9 _ - .)
/// command = ["npx", "-y", "@modelcontextprotocol/server-everything"]
///
/// [servers.fs]
/// file = "recorded/server-filesystem.tools.json"   # relative to the policy file
/// ```
///
/// `command` matches a live server whose command (the words after `--`) is exactly these
/// words; `file` matches a tool-list file that is this file. `forward = ["resources",
/// "prompts"]` lets `capability proxy --server <name>` pass the server's resources and prompts
/// on to its clients, which it otherwise neither advertises nor forwards (tools only).
///
/// For a fleet of servers behind one listing (the agent loop over many servers, a gateway):
/// `url` (a Streamable HTTP endpoint, instead of `command`), `env` (variables for the spawned
/// command), `trust` (`"trusted"` or `"untrusted"`, the default: whether the server's
/// annotations are believed), `lock` (its lockfile, relative to the policy file) and `prefix`
/// (what its tool names are shown with; default `<name>_`, `""` for none), and
/// `accept_wording_drift = true` (a pinned tool whose description or title was only reworded
/// stays shown, and the change is recorded; see `docs/scan.md`). For a server reached
/// over HTTP that is itself an OAuth resource server: `token_file` (a file holding the bearer
/// token the gateway presents: its own credential, never a client's), or `exchange` (each
/// caller's access token exchanged at the issuer of the policy's `[auth]`, RFC 8693, for one
/// whose audience is the server: `{ client_id = "...", secret_file = "...", audience = "..." }`,
/// the audience defaulting to the URL).
///
/// ```toml
/// [servers.git]
/// command = ["uvx", "mcp-server-git"]
/// env = { GIT_CONFIG_NOSYSTEM = "1" }
/// trust = "untrusted"
/// lock = "capability.lock"
/// prefix = "git_"
///
/// [servers.search]
/// url = "https://search.internal.example/mcp"
/// ```
///
/// An entry says at least one thing.
///
/// ```
/// use capability::Policy;
///
/// let policy = Policy::from_toml_str(r#"
///     [servers.everything]
///     command = ["node", "server-everything/dist/index.js", "stdio"]
/// "#)?;
/// let entry = &policy.servers()[0];
/// assert_eq!(entry.name(), "everything");
/// assert!(entry.matches_command(["node", "server-everything/dist/index.js", "stdio"]));
/// assert!(!entry.matches_command(["node", "server-everything/dist/index.js"]));
/// # Ok::<(), capability::authz::PolicyError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerEntry {
    name: String,
    command: Option<Vec<String>>,
    file: Option<String>,
    forward_resources: bool,
    forward_prompts: bool,
    url: Option<String>,
    env: Vec<(String, String)>,
    trusted: Option<bool>,
    lock: Option<String>,
    prefix: Option<String>,
    token_file: Option<String>,
    exchange: Option<ExchangeEntry>,
    accept_wording_drift: bool,
}

/// A server's `exchange` table: the gateway's client at the issuer of the policy's `[auth]`,
/// which exchanges each caller's access token for one whose audience is the server.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExchangeEntry {
    client_id: String,
    secret_file: String,
    audience: Option<String>,
}

impl ExchangeEntry {
    /// The gateway's client id at the issuer.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The file holding the client's secret, as written (relative to the policy file).
    pub fn secret_file(&self) -> &str {
        &self.secret_file
    }

    /// The server's audience in exchanged tokens, if the entry names one (else its URL).
    pub fn audience(&self) -> Option<&str> {
        self.audience.as_deref()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ServerFile {
    /// Read as any value, so that a command written as one string is answered with the list
    /// of words it should be.
    command: Option<Spanned<toml::Value>>,
    file: Option<Spanned<String>>,
    forward: Option<Spanned<Vec<String>>>,
    url: Option<Spanned<String>>,
    env: Option<Spanned<BTreeMap<String, String>>>,
    trust: Option<Spanned<String>>,
    lock: Option<Spanned<String>>,
    prefix: Option<Spanned<String>>,
    token_file: Option<Spanned<String>>,
    exchange: Option<Spanned<ExchangeEntry>>,
    accept_wording_drift: Option<bool>,
}

/// The longest tool-name prefix (MCP tool names are at most 128 characters).
pub const MAX_PREFIX_CHARS: usize = 64;

impl ServerEntry {
    pub(super) fn from_file(
        table: BTreeMap<Spanned<String>, ServerFile>,
        at: &impl Fn(usize, String) -> TomlError,
    ) -> Result<Vec<ServerEntry>, TomlError> {
        let mut entries = Vec::with_capacity(table.len());
        for (key, entry) in table {
            let name = key.get_ref();
            if let Err(violation) = capability_rules::check_provider(name) {
                return Err(at(
                    key.span().start,
                    format!("server `{name}`: {violation}"),
                ));
            }
            let command =
                match &entry.command {
                    None => None,
                    Some(command) => Some(command_words(command.get_ref()).map_err(|why| {
                        at(command.span().start, format!("server `{name}`: {why}"))
                    })?),
                };
            if let Some(file) = &entry.file
                && file.get_ref().is_empty()
            {
                return Err(at(
                    file.span().start,
                    format!("server `{name}`: `file` is empty"),
                ));
            }
            let says_something = entry.command.is_some()
                || entry.file.is_some()
                || entry.forward.is_some()
                || entry.url.is_some()
                || entry.trust.is_some()
                || entry.lock.is_some()
                || entry.prefix.is_some()
                || entry.token_file.is_some()
                || entry.exchange.is_some()
                || entry.accept_wording_drift.is_some();
            if !says_something {
                return Err(at(
                    key.span().start,
                    format!(
                        "server `{name}` says neither `command` (a live server's command words) \
                         nor `url` (its Streamable HTTP endpoint) nor `file` (a tool-list file), \
                         so it says nothing"
                    ),
                ));
            }
            let fleet = fleet_keys(name, &entry, at)?;
            let (mut forward_resources, mut forward_prompts) = (false, false);
            if let Some(forward) = &entry.forward {
                for what in forward.get_ref() {
                    match what.as_str() {
                        "resources" => forward_resources = true,
                        "prompts" => forward_prompts = true,
                        other => {
                            return Err(at(
                                forward.span().start,
                                format!(
                                    "server `{name}`: `forward` takes \"resources\" and \
                                     \"prompts\" (tools are always governed), not `{other}`"
                                ),
                            ));
                        }
                    }
                }
            }
            entries.push(ServerEntry {
                name: key.into_inner(),
                command,
                file: entry.file.map(Spanned::into_inner),
                forward_resources,
                forward_prompts,
                url: fleet.url,
                env: fleet.env,
                trusted: fleet.trusted,
                lock: fleet.lock,
                prefix: fleet.prefix,
                token_file: fleet.token_file,
                exchange: fleet.exchange,
                accept_wording_drift: entry.accept_wording_drift.unwrap_or(false),
            });
        }
        Ok(entries)
    }

    /// The operator's name for the server (a valid provider name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The live server's command: the program, then its arguments.
    pub fn command(&self) -> Option<&[String]> {
        self.command.as_deref()
    }

    /// The tool-list file, as written (a relative path is relative to the policy file).
    pub fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// Whether `capability proxy` passes the server's resources on to its clients
    /// (`forward = ["resources"]`): listing them, their templates, and reading them. Off by
    /// default: a proxy serves tools only.
    pub fn forwards_resources(&self) -> bool {
        self.forward_resources
    }

    /// Whether `capability proxy` passes the server's prompts on (`forward = ["prompts"]`):
    /// listing them and getting one. Off by default.
    pub fn forwards_prompts(&self) -> bool {
        self.forward_prompts
    }

    /// The server's Streamable HTTP endpoint (`url`), for one reached over HTTP.
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// The variables the spawned command gets (`env`), in name order.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Whether the server's annotations are believed (`trust`); `None` when the entry does
    /// not say (then untrusted, unless a command line says otherwise).
    pub fn trusted(&self) -> Option<bool> {
        self.trusted
    }

    /// The server's lockfile (`lock`), as written (relative to the policy file).
    pub fn lock(&self) -> Option<&str> {
        self.lock.as_deref()
    }

    /// The file holding the bearer token the gateway presents to this HTTP server
    /// (`token_file`), as written (relative to the policy file).
    pub fn token_file(&self) -> Option<&str> {
        self.token_file.as_deref()
    }

    /// Calls on the caller's behalf (`exchange`): each caller's access token exchanged for one
    /// whose audience is this HTTP server.
    pub fn exchange(&self) -> Option<&ExchangeEntry> {
        self.exchange.as_ref()
    }

    /// Whether a change of wording only of a pinned tool (its description or title reworded,
    /// bringing no new finding of the scan and no new reference to a tool) is accepted and
    /// recorded rather than hiding the tool (`accept_wording_drift = true`). Off by default: any
    /// change of a pinned descriptor hides the tool until it is pinned again.
    pub fn accepts_wording_drift(&self) -> bool {
        self.accept_wording_drift
    }

    /// What the server's tool, resource and prompt names are shown with behind one listing of
    /// many servers: `prefix` as written, else `<name>_`.
    pub fn prefix(&self) -> String {
        self.prefix
            .clone()
            .unwrap_or_else(|| format!("{}_", self.name))
    }

    /// Whether a live server started with exactly these words (program first) is this one.
    pub fn matches_command<I, S>(&self, words: I) -> bool
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let Some(command) = &self.command else {
            return false;
        };
        let mut words = words.into_iter();
        command
            .iter()
            .all(|expected| words.next().is_some_and(|w| w.as_ref() == expected))
            && words.next().is_none()
    }
}

/// A server's `command`: a list of words, the program first. One string is refused with the
/// list it should be (split at white space, which a shell would have done), since splitting it
/// here would guess at quoting.
fn command_words(value: &toml::Value) -> Result<Vec<String>, String> {
    let words = match value {
        toml::Value::String(line) => {
            // A TOML basic string is written as JSON writes a string.
            let words: Vec<String> = line
                .split_whitespace()
                .map(|w| serde_json::Value::from(w).to_string())
                .collect();
            return Err(format!(
                "`command` is a list of words, the program first, not one string: write \
                 `command = [{}]`",
                words.join(", ")
            ));
        }
        toml::Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>()
            .ok_or("`command` is a list of strings, the program first, then its arguments")?,
        _ => return Err("`command` is a list of words, the program first".to_owned()),
    };
    if words.first().is_none_or(String::is_empty) {
        return Err("`command` names a program first, then its arguments".to_owned());
    }
    Ok(words)
}

/// The keys a fleet of servers needs, checked.
struct FleetKeys {
    url: Option<String>,
    env: Vec<(String, String)>,
    trusted: Option<bool>,
    lock: Option<String>,
    prefix: Option<String>,
    token_file: Option<String>,
    exchange: Option<ExchangeEntry>,
}

fn fleet_keys(
    name: &str,
    entry: &ServerFile,
    at: &impl Fn(usize, String) -> TomlError,
) -> Result<FleetKeys, TomlError> {
    if let (Some(_), Some(url)) = (&entry.command, &entry.url) {
        return Err(at(
            url.span().start,
            format!("server `{name}`: give `command` (a spawned server) or `url`, not both"),
        ));
    }
    if let Some(url) = &entry.url {
        let text = url.get_ref();
        let rest = text
            .strip_prefix("http://")
            .or_else(|| text.strip_prefix("https://"));
        if rest.is_none_or(|r| r.is_empty() || r.starts_with('/'))
            || text.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(at(
                url.span().start,
                format!(
                    "server `{name}`: `url` must be an http:// or https:// URL with a host, \
                     like \"http://127.0.0.1:3001/mcp\""
                ),
            ));
        }
    }
    if let Some(env) = &entry.env {
        if entry.command.is_none() {
            return Err(at(
                env.span().start,
                format!("server `{name}`: `env` is for a spawned server; give its `command`"),
            ));
        }
        for (variable, value) in env.get_ref() {
            if variable.is_empty() || variable.contains(['=', '\0']) || value.contains('\0') {
                return Err(at(
                    env.span().start,
                    format!(
                        "server `{name}`: `env` variable `{}` is not one a process can have \
                         (a name without `=` or NUL, a value without NUL)",
                        variable.escape_debug()
                    ),
                ));
            }
        }
    }
    let trusted = match &entry.trust {
        None => None,
        Some(trust) => match trust.get_ref().as_str() {
            "trusted" => Some(true),
            "untrusted" => Some(false),
            other => {
                return Err(at(
                    trust.span().start,
                    format!(
                        "server `{name}`: `trust` is \"trusted\" or \"untrusted\", not \"{}\"",
                        other.escape_debug()
                    ),
                ));
            }
        },
    };
    if let Some(lock) = &entry.lock
        && lock.get_ref().is_empty()
    {
        return Err(at(
            lock.span().start,
            format!("server `{name}`: `lock` is empty"),
        ));
    }
    for (key, span) in [
        (
            "token_file",
            entry.token_file.as_ref().map(|t| t.span().start),
        ),
        ("exchange", entry.exchange.as_ref().map(|e| e.span().start)),
    ] {
        if let Some(start) = span
            && entry.url.is_none()
        {
            return Err(at(
                start,
                format!(
                    "server `{name}`: `{key}` is for a server reached over HTTP; give its `url`"
                ),
            ));
        }
    }
    if let (Some(_), Some(exchange)) = (&entry.token_file, &entry.exchange) {
        return Err(at(
            exchange.span().start,
            format!(
                "server `{name}`: give `token_file` (the gateway's own token) or `exchange` (each \
                 caller's token exchanged), not both"
            ),
        ));
    }
    if let Some(prefix) = &entry.prefix {
        let text = prefix.get_ref();
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if text.chars().count() > MAX_PREFIX_CHARS || !text.chars().all(allowed) {
            return Err(at(
                prefix.span().start,
                format!(
                    "server `{name}`: `prefix` is at most {MAX_PREFIX_CHARS} of A-Z a-z 0-9 _ - . \
                     (what MCP tool names may hold), not \"{}\"",
                    text.escape_debug()
                ),
            ));
        }
    }
    Ok(FleetKeys {
        url: entry.url.as_ref().map(|u| u.get_ref().clone()),
        env: entry
            .env
            .as_ref()
            .map(|env| {
                env.get_ref()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        trusted,
        lock: entry.lock.as_ref().map(|l| l.get_ref().clone()),
        prefix: entry.prefix.as_ref().map(|p| p.get_ref().clone()),
        token_file: entry.token_file.as_ref().map(|t| t.get_ref().clone()),
        exchange: entry.exchange.as_ref().map(|e| e.get_ref().clone()),
    })
}
