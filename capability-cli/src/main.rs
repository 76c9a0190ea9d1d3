//! `capability`: inspect, check, pin and verify the tools of an MCP server.
//!
//! ```text
//! capability init --from claude_desktop_config.json --dir gov  # policy + lockfile from mcpServers
//! capability inspect tools.json                          # flags, where they come from, hashes
//! capability check --policy policy.toml --role monitor -- npx server-filesystem /tmp
//! capability pin --server fs -- node server.js           # approve: write capability.lock
//! capability verify --server fs -- node server.js        # exit 1 on any drift
//! capability db migrate state.db                         # or postgres://user@host/db
//! capability audit verify state.db --key alice.pub       # every writer's chain, checkpoints
//! capability audit stats state.db                        # mcp_daily_stats
//! capability audit sessions state.db                     # who called, when, how it went
//! capability audit replay state.db --session s-1          # one session's calls, in order
//! capability proxy --policy p.toml --role viewer --server fs --audit trail.jsonl -- node fs.js
//! capability proposals state.db                         # calls a gateway holds for approval
//! capability approve --key alice.key --approver alice --audience gw proposals/<id>.json
//! capability grant --key alice.key --issuer alice --audience gw --principal role:ops \
//!     --tools 'git/git_*' --calls 5                      # a plan: 5 calls, no per-call approval
//! ```
//!
//! The server's name (which selects policy patterns, assertions and pins) is the operator's:
//! `--server`, else the matching `[servers]` entry of `--policy`, else the file's or program's
//! name, said on standard error. The name a server gives itself is shown, never used.
//!
//! Exit codes: 0 clean, 1 findings (drift), 2 bad input or usage.

#![forbid(unsafe_code)]

mod commands;
mod engine;
mod failure;
mod findings;
mod help;
mod metrics;
mod otlp;
mod out;
mod output;
mod report;
mod source;

use commands::{approve, audit, grant, proposals, replay, tools as history};

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use crate::failure::Failure;
use crate::out::Out;
use crate::source::Source;

/// Inspect, check, pin and verify the tools of an MCP server.
#[derive(Parser, Debug)]
#[command(name = "capability", version, about, long_about = None)]
#[command(
    after_help = "A SOURCE is a file holding an MCP `tools/list` result ({\"tools\": [...]}) \
or a bare array of tools, `-` for standard input, or `-- <command> [args]` for a live server \
spoken to over stdio.\n\nExit codes: 0 clean, 1 findings (drift), 2 bad input or usage."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One row per tool: the four effective flags and where each came from, scopes, hash.
    Inspect(Common),
    /// What a role may see and call, and why the rest is hidden.
    #[command(mut_arg("policy", |arg| arg.required(true)))]
    Check {
        /// The role to check.
        #[arg(long)]
        role: String,
        #[command(flatten)]
        common: Common,
    },
    /// Approve the server's current tools: write or update the lockfile.
    Pin {
        /// Also record the pins in this store's `mcp_tool_versions` (a SQLite file or
        /// `postgres://...`), with who pinned them and when.
        #[arg(long, value_name = "PATH_OR_URL")]
        store: Option<String>,
        /// Who pins, as the store records it (default: the login name).
        #[arg(long, requires = "store")]
        by: Option<String>,
        /// Print how each tool differs from its pin, and what that introduces; write nothing.
        #[arg(long, conflicts_with_all = ["store", "approve"])]
        review: bool,
        /// Re-pin the changed tools, signed with `--key` (an approver of the policy), on record
        /// in `--audit`.
        #[arg(long, requires_all = ["key", "audit"], conflicts_with = "store")]
        approve: bool,
        /// The approver's secret key file (`capability keygen`), for `--approve`.
        #[arg(long, value_name = "FILE", requires = "approve")]
        key: Option<PathBuf>,
        /// The trail the re-pin is recorded in (`--approve`): a JSON Lines file (not one a
        /// running gateway holds), or a SQLite or PostgreSQL store.
        #[arg(long, value_name = "PATH_OR_URL", requires = "approve")]
        audit: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Compare the server's tools with the lockfile; exit 1 on any drift.
    Verify(Common),
    /// Review and sign a proposal file: a human's approval for one write gate.
    ///
    /// Shows the proposal (control and bidirectional characters escaped as `\u{..}`) and asks
    /// on the terminal; without a terminal, `--yes` is required.
    Approve(approve::Request),
    /// The versions of tools a gateway saw or an operator pinned, from a store.
    #[command(subcommand)]
    Tools(history::ToolsCommand),
    /// The proposals a gateway keeps in its store, waiting for approvers.
    Proposals(proposals::ProposalsArgs),
    /// Sign a plan grant (a number of calls of some tools, for one principal), or revoke one.
    Grant(grant::GrantArgs),
    /// Make an approver's key pair: FILE (secret) and FILE.pub (for the write gate).
    Keygen {
        /// The secret key file to write; the public key goes to FILE.pub.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Read an audit trail: a JSON Lines file, a SQLite database or PostgreSQL.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Manage the database of the shared state (ledger, revocations, audit).
    #[command(subcommand)]
    Db(DbCommand),
    /// Govern an MCP server for any MCP client: speak MCP to the client on standard input and
    /// output (or Streamable HTTP), spawn the server over stdio (or reach it over HTTP), and
    /// put the policy, the lockfile and the audit trail between them.
    #[command(long_about = help::PROXY_ABOUT, after_help = help::PROXY_AFTER_HELP)]
    Proxy(commands::proxy::ProxyArgs),
    /// Many MCP servers (the policy's [servers]) behind one listing: served to one client over
    /// stdio (`--role`, `--audit`), or checked (`--check`: what each role would see).
    Gateway(commands::gateway::GatewayArgs),
    /// Govern the servers of an `mcpServers` JSON (Claude Desktop, Cursor, VS Code): write a
    /// policy (a reader and an operator role) and a lockfile pinning every tool, and print
    /// what each server claims and each role sees.
    Init(commands::init::InitArgs),
}

#[derive(Subcommand, Debug)]
enum AuditCommand {
    /// Check every record and each writer's chain; exit 1 naming what is wrong.
    ///
    /// With `--key`, also the signed checkpoints and trees: a cut-off tail, a chain computed
    /// again, a span without checkpoints; with `--witness-key`, the witnesses' cosignatures.
    Verify(audit::VerifyArgs),
    /// The sessions: principal, role, first and last call, calls allowed, denied, held for an
    /// approval, approved and failed.
    Sessions {
        /// The trail: a `.jsonl` file, a SQLite database path, or `postgres://...`.
        #[arg(value_name = "PATH_OR_URL")]
        target: String,
        /// Print JSON on standard output.
        #[arg(long)]
        json: bool,
    },
    /// One session's tool calls in order: step, tool, verdict, redacted input, output digest
    /// and size, latency, who approved it.
    Replay {
        /// The trail: a `.jsonl` file, a SQLite database path, or `postgres://...`.
        #[arg(value_name = "PATH_OR_URL")]
        target: String,
        /// The session.
        #[arg(long)]
        session: String,
        /// Print JSON on standard output.
        #[arg(long)]
        json: bool,
    },
    /// One record's inclusion proof in a signed checkpoint (`c2sp.org/tlog-proof@v1`).
    Prove(commands::proofs::Prove),
    /// Check a proof file alone: the checkpoint's signature, the record's inclusion.
    CheckProof(commands::proofs::CheckProof),
    /// Show that a newer checkpoint's tree extends an older one's (or that it was cut or
    /// rewritten).
    Consistency(commands::proofs::Consistency),
    /// Serve a witness (`c2sp.org/tlog-witness`): cosign checkpoints extending the last one.
    Witness(commands::proofs::WitnessArgs),
    /// Have witnesses cosign each writer's latest tree checkpoint, and store their cosignatures.
    WitnessSubmit(commands::proofs::WitnessSubmit),
    /// Hand a trail's checkpoint key over to another, in a statement the old key signs,
    /// written as a record of the trail (and printed); a store's, at its next writer's run.
    Rotate(commands::proofs::Rotate),
    /// Calls, allowed, denied, errors, degraded and p50/p95 latency per day, role and tool
    /// (`mcp_daily_stats`).
    Stats {
        /// The trail: a `.jsonl` file, a SQLite database path, or `postgres://...`.
        #[arg(value_name = "PATH_OR_URL")]
        target: String,
        /// Print JSON on standard output.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum DbCommand {
    /// Create or upgrade the tables (the migrations this build ships); a database at a newer
    /// schema version is refused.
    Migrate {
        /// A SQLite database path, or `postgres://user@host/db`.
        #[arg(value_name = "PATH_OR_URL")]
        target: String,
    },
}

#[derive(Args, Debug)]
struct Common {
    /// Whether the server's annotations are believed.
    #[arg(long, value_enum, default_value_t = TrustArg::Untrusted)]
    trust: TrustArg,
    /// The lockfile.
    #[arg(long, value_name = "FILE", default_value = "capability.lock")]
    lock: PathBuf,
    /// The server's name: the provider of its tools, which selects the policy's patterns and
    /// assertions and the lockfile's pins. Default: the `[servers]` entry of `--policy` that
    /// matches the source, else the file's or the program's name. The name the server gives
    /// itself is never used.
    #[arg(long)]
    server: Option<String>,
    /// The policy file (TOML). `check` decides with it; every command takes the server's name
    /// from its `[servers]` table.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Seconds to wait for a live server.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    timeout: u64,
    /// Print JSON on standard output instead of a table.
    #[arg(long)]
    json: bool,
    /// A file, or `-` for standard input. Not with `-- <command>`.
    #[arg(value_name = "SOURCE")]
    file: Option<String>,
    /// A live server: `-- <command> [args]`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum TrustArg {
    /// Annotations are believed.
    Trusted,
    /// Annotations are recorded but count as the fail-closed defaults.
    Untrusted,
}

fn main() -> ExitCode {
    let mut out = Out::stdout();
    let result = parse_and_run(&mut out);
    // What was written before a failure still goes out, and before the failure is told.
    let flushed = out.flush().map_err(Failure::from);
    match result.and_then(|code| flushed.map(|()| code)) {
        Ok(code) => ExitCode::from(code),
        Err(failure) if failure.closed_pipe => ExitCode::SUCCESS,
        Err(failure) => {
            // A message can quote a server (its standard error, its first line of output):
            // escaped, line by line.
            out::note(format_args!(
                "capability: {}",
                capability_gateway::escape::escape_lines(&failure.message)
            ));
            ExitCode::from(failure.code)
        }
    }
}

fn parse_and_run(out: &mut Out) -> Result<u8, Failure> {
    match Cli::try_parse() {
        Ok(cli) => run(cli, out),
        // `--help` and `--version` on standard output (exit 0), usage errors on standard error
        // (exit 2). A usage message that cannot be written is still a usage error.
        Err(error) if error.use_stderr() => {
            let _ = error.print();
            Ok(2)
        }
        Err(error) => {
            error.print()?;
            Ok(0)
        }
    }
}

fn run(cli: Cli, out: &mut Out) -> Result<u8, Failure> {
    match cli.command {
        Command::Inspect(common) => {
            let policy = load_policy(&common)?;
            let loaded = Source::from_args(&common)?.load(&common, policy.as_ref())?;
            output::inspect(&loaded, &common, out)
        }
        Command::Check { role, common } => {
            let Some(policy) = load_policy(&common)? else {
                return Err(Failure::input("`check` needs `--policy <FILE>`"));
            };
            known_role(&policy, &role).map_err(Failure::input)?;
            let loaded = Source::from_args(&common)?.load(&common, Some(&policy))?;
            output::check(&loaded, &policy, &role, &common, out)
        }
        Command::Pin {
            store,
            by,
            review,
            key,
            audit,
            common,
            ..
        } => {
            let approve = key.as_deref().zip(audit.as_deref());
            history::pin(store, by, (review, approve), &common, out)
        }
        Command::Verify(common) => {
            let policy = load_policy(&common)?;
            let loaded = Source::from_args(&common)?.load(&common, policy.as_ref())?;
            output::verify(&loaded, &common, out)
        }
        Command::Approve(request) => approve::approve(&request, out),
        Command::Keygen { out: key_file } => approve::keygen(&key_file, out),
        Command::Grant(args) => grant::run(args, out),
        Command::Tools(command) => history::run(&command, out),
        Command::Proposals(args) => proposals::run(&args, out),
        Command::Audit(AuditCommand::Verify(args)) => audit::verify(&args, out),
        Command::Audit(AuditCommand::Stats { target, json }) => audit::stats(&target, json, out),
        Command::Audit(AuditCommand::Sessions { target, json }) => {
            replay::sessions(&target, json, out)
        }
        Command::Audit(AuditCommand::Replay {
            target,
            session,
            json,
        }) => replay::replay(&target, &session, json, out),
        Command::Audit(AuditCommand::Prove(args)) => commands::proofs::prove(&args, out),
        Command::Audit(AuditCommand::CheckProof(a)) => commands::proofs::check_proof(&a, out),
        Command::Audit(AuditCommand::Consistency(a)) => commands::proofs::consistency(&a, out),
        Command::Audit(AuditCommand::Witness(a)) => commands::proofs::witness(&a, out),
        Command::Audit(AuditCommand::WitnessSubmit(a)) => commands::proofs::witness_submit(&a, out),
        Command::Audit(AuditCommand::Rotate(a)) => commands::proofs::rotate(&a, out),
        Command::Db(DbCommand::Migrate { target }) => audit::migrate(&target, out),
        Command::Proxy(args) => commands::proxy::run(args),
        Command::Gateway(args) => {
            commands::gateway::run(&args, out).map_err(|e| Failure::input(format!("gateway: {e}")))
        }
        Command::Init(args) => {
            commands::init::run(&args, out).map_err(|e| Failure::input(format!("init: {e}")))
        }
    }
}

/// The policy `--policy` names, if any.
fn load_policy(common: &Common) -> Result<Option<capability::Policy>, Failure> {
    common
        .policy
        .as_ref()
        .map(|path| {
            capability::Policy::from_toml_file(path).map_err(|e| Failure::input(e.to_string()))
        })
        .transpose()
}

/// Nothing if `policy` has `role`; else why it will not do.
pub(crate) fn known_role(policy: &capability::Policy, role: &str) -> Result<(), String> {
    if policy.roles().any(|r| r == role) {
        return Ok(());
    }
    let roles: Vec<&str> = policy.roles().collect();
    Err(format!(
        "role `{role}` is not in the policy (it has: {}); an unknown role is denied everything",
        roles.join(", ")
    ))
}
