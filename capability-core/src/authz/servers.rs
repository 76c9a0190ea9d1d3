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
/// on to its clients, which it otherwise neither advertises nor forwards (tools only). An entry
/// has at least one of the three.
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ServerFile {
    command: Option<Spanned<Vec<String>>>,
    file: Option<Spanned<String>>,
    forward: Option<Spanned<Vec<String>>>,
}

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
            if let Some(command) = &entry.command
                && command.get_ref().first().is_none_or(String::is_empty)
            {
                return Err(at(
                    command.span().start,
                    format!("server `{name}`: `command` names a program first, then its arguments"),
                ));
            }
            if let Some(file) = &entry.file
                && file.get_ref().is_empty()
            {
                return Err(at(
                    file.span().start,
                    format!("server `{name}`: `file` is empty"),
                ));
            }
            if entry.command.is_none() && entry.file.is_none() && entry.forward.is_none() {
                return Err(at(
                    key.span().start,
                    format!(
                        "server `{name}` says neither `command` (a live server's command words) \
                         nor `file` (a tool-list file) nor `forward`, so it says nothing"
                    ),
                ));
            }
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
                command: entry.command.map(Spanned::into_inner),
                file: entry.file.map(Spanned::into_inner),
                forward_resources,
                forward_prompts,
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
