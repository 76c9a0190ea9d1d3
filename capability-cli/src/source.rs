//! Where the tools come from: a file, standard input, or a live server; and what they are.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use capability::mcp::McpManifest;
use capability::mcp::{DriftStatus, Lockfile, Review};
use capability::{CapabilityManifest, Policy, Server};
use capability_gateway::pins;
use serde_json::Value;

use crate::{Common, Failure, TrustArg};

/// A source of tools, as given on the command line.
pub enum Source {
    /// A JSON file.
    File(PathBuf),
    /// JSON on standard input.
    Stdin,
    /// A live server spoken to over stdio.
    Live {
        program: OsString,
        args: Vec<OsString>,
    },
}

/// Where the server's name came from: always the operator, never the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameFrom {
    /// `--server`.
    Flag,
    /// The matching entry of the policy's `[servers]` table.
    Policy,
    /// The live server's program (its file name, without extension).
    Command,
    /// The tool-list file's name (up to its first `.`).
    File,
    /// Standard input: the fixed name `stdin`.
    Stdin,
}

impl NameFrom {
    /// As written in `--json` output (`server_name_from`).
    pub fn key(self) -> &'static str {
        match self {
            NameFrom::Flag => "flag",
            NameFrom::Policy => "policy",
            NameFrom::Command => "command",
            NameFrom::File => "file",
            NameFrom::Stdin => "stdin",
        }
    }
}

/// The tools of a source, read and reviewed.
pub struct Loaded {
    /// How the source is named in messages.
    pub origin: String,
    /// The server, with the trust asked for, under the operator's name for it.
    pub server: Server,
    /// Where the server's name came from.
    pub name_from: NameFrom,
    /// The name the server gives itself (its handshake's `serverInfo.name`, or the `server.name`
    /// a file records): shown, never used.
    pub declared_name: Option<String>,
    /// The tools as the server sent them.
    pub tools: Vec<Value>,
    /// Each tool's manifest (claims believed only as trust and pins allow) and, when a lockfile
    /// is in use, its drift.
    pub manifests: Vec<(CapabilityManifest, Option<DriftStatus>)>,
    /// The lockfile's review of the server, when a lockfile is in use.
    pub review: Option<Review>,
    /// The lockfile, when one exists.
    pub lock: Option<Lockfile>,
}

impl Source {
    /// The source the arguments name.
    pub fn from_args(common: &Common) -> Result<Source, Failure> {
        match (&common.file, common.command.split_first()) {
            (Some(_), Some(_)) => Err(Failure::input(
                "give either a file or `-- <command>`, not both",
            )),
            (None, None) => Err(Failure::input(
                "no source: give a file, `-` for standard input, or `-- <command> [args]`",
            )),
            (Some(file), None) if file == "-" => Ok(Source::Stdin),
            (Some(file), None) => Ok(Source::File(PathBuf::from(file))),
            (None, Some((program, args))) => Ok(Source::Live {
                program: program.clone(),
                args: args.to_vec(),
            }),
        }
    }

    /// Names the server (from the operator only: `--server`, the policy's `[servers]`, or what
    /// was typed), reads the tools, and reviews them against the lockfile, if there is one.
    pub fn load(self, common: &Common, policy: Option<&Policy>) -> Result<Loaded, Failure> {
        let (name, name_from) = self.name_server(common, policy)?;
        let (origin, declared_name, tools) = match &self {
            Source::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    Failure::input(format!("cannot read `{}`: {e}", path.display()))
                })?;
                let origin = format!("`{}`", path.display());
                let (name, tools) = parse_tools(&text, &origin)?;
                (origin, name, tools)
            }
            Source::Stdin => {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .map_err(|e| Failure::input(format!("cannot read standard input: {e}")))?;
                let origin = "standard input".to_owned();
                let (name, tools) = parse_tools(&text, &origin)?;
                (origin, name, tools)
            }
            Source::Live { program, args } => {
                let live = fetch_live(program, args, common.timeout)?;
                let origin = format!("`{}`", self.words().join(" "));
                let declared = Some(live.server_name).filter(|n| !n.is_empty());
                (origin, declared, live.tools)
            }
        };
        if name_from != NameFrom::Flag && name_from != NameFrom::Policy {
            crate::out::note(format_args!(
                "note: server name `{name}` {}; {}. To name it yourself, pass `--server <name>` \
                 or add a `[servers]` entry to the policy.",
                self.why(),
                match &declared_name {
                    Some(declared) => format!(
                        "the server calls itself `{}`, which selects no policy pattern, \
                         assertion or pin",
                        capability_gateway::escape::escape(declared)
                    ),
                    None => "the server gives no name of its own".to_owned(),
                }
            ));
        }
        let server = match common.trust {
            TrustArg::Trusted => Server::trusted(name.as_str()),
            TrustArg::Untrusted => Server::untrusted(name.as_str()),
        };
        let lock = pins::load(&common.lock, policy, &name).map_err(Failure::input)?;
        let (manifests, review) = match &lock {
            Some(lock) => {
                let review = lock
                    .review(&server, &tools)
                    .map_err(|e| Failure::input(format!("{origin}: {e}")))?;
                let manifests = review
                    .tools()
                    .iter()
                    .map(|t| (t.manifest().clone(), Some(t.status().clone())))
                    .collect();
                (manifests, Some(review))
            }
            None => {
                let manifests = tools
                    .iter()
                    .map(|tool| {
                        CapabilityManifest::from_mcp_tool(tool, &server)
                            .map(|m| (m, None))
                            .map_err(|e| Failure::input(format!("{origin}: {e}")))
                    })
                    .collect::<Result<Vec<_>, Failure>>()?;
                (manifests, None)
            }
        };
        Ok(Loaded {
            origin,
            server,
            name_from,
            declared_name,
            tools,
            manifests,
            review,
            lock,
        })
    }
}

impl Source {
    /// The live command's words (program first), as typed.
    fn words(&self) -> Vec<String> {
        match self {
            Source::Live { program, args } => std::iter::once(program)
                .chain(args)
                .map(|w| w.to_string_lossy().into_owned())
                .collect(),
            Source::File(_) | Source::Stdin => Vec::new(),
        }
    }

    /// The server's name, from the operator only: `--server`; else the one `[servers]` entry of
    /// the policy that matches this source (a live server's exact command words, or a file);
    /// else a name derived from what was typed: the file's name up to its first `.`, the
    /// program's name without extension, or `stdin`. The name the server gives itself is never
    /// used: it would let any server pick the patterns, assertions and pins of a name it chose.
    fn name_server(
        &self,
        common: &Common,
        policy: Option<&Policy>,
    ) -> Result<(String, NameFrom), Failure> {
        if let Some(name) = &common.server {
            if let Err(violation) = CapabilityManifest::builder("probe")
                .provider(name.as_str())
                .build()
            {
                return Err(Failure::input(format!(
                    "`--server {name}`: {}",
                    violation.problems()[0].message()
                )));
            }
            return Ok((name.clone(), NameFrom::Flag));
        }
        if let Some(policy) = policy {
            let matching: Vec<&str> = policy
                .servers()
                .iter()
                .filter(|entry| self.matches(entry, common))
                .map(|entry| entry.name())
                .collect();
            match matching.as_slice() {
                [] => {}
                [name] => return Ok(((*name).to_owned(), NameFrom::Policy)),
                names => {
                    return Err(Failure::input(format!(
                        "servers `{}` of the policy all match this source: make the entries \
                         distinct, or name the server with `--server <name>`",
                        names.join("`, `")
                    )));
                }
            }
        }
        Ok(match self {
            Source::File(path) => (
                capability_gateway::provider_name(&file_stem(path)),
                NameFrom::File,
            ),
            Source::Stdin => ("stdin".to_owned(), NameFrom::Stdin),
            Source::Live { program, .. } => {
                let stem = Path::new(program)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (capability_gateway::provider_name(&stem), NameFrom::Command)
            }
        })
    }

    /// Whether a `[servers]` entry names this source. A relative `file` is relative to the
    /// policy file; both paths are compared once resolved (symbolic links followed).
    fn matches(&self, entry: &capability::authz::ServerEntry, common: &Common) -> bool {
        match self {
            Source::Live { .. } => entry.matches_command(self.words()),
            Source::File(path) => {
                let Some(file) = entry.file() else {
                    return false;
                };
                let base = common
                    .policy
                    .as_deref()
                    .and_then(Path::parent)
                    .unwrap_or(Path::new(""));
                let resolved = |p: &Path| std::fs::canonicalize(p).ok();
                resolved(&base.join(file)).is_some_and(|entry| resolved(path) == Some(entry))
            }
            Source::Stdin => false,
        }
    }

    /// Why a derived name is what it is, for the note on standard error.
    fn why(&self) -> String {
        match self {
            Source::File(path) => format!("from the file's name (`{}`)", path.display()),
            Source::Live { program, .. } => {
                format!("from the program's name (`{}`)", program.to_string_lossy())
            }
            Source::Stdin => "for standard input".to_owned(),
        }
    }
}

/// [`capability_gateway::parse_tools`], as the command line's failure.
fn parse_tools(text: &str, origin: &str) -> Result<(Option<String>, Vec<Value>), Failure> {
    capability_gateway::parse_tools(text, origin).map_err(Failure::input)
}

fn file_stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // `server-filesystem.tools.json` names the server `server-filesystem`.
    name.split('.').next().unwrap_or_default().to_owned()
}

fn fetch_live(
    program: &OsString,
    args: &[OsString],
    timeout: u64,
) -> Result<capability_gateway::live::LiveTools, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::input(format!("cannot start the async runtime: {e}")))?;
    runtime
        .block_on(capability_gateway::live::list_server_tools(
            program,
            args,
            &[],
            Duration::from_secs(timeout),
        ))
        .map_err(|e| Failure::input(e.to_string()))
}
