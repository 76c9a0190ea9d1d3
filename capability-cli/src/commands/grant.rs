//! `capability grant` and `capability grant revoke`: a human's plan-level grant of a number of
//! calls to one principal, and its revocation in the shared store.

use std::io::Write;
use std::path::{Path, PathBuf};

use capability::authz::Ceiling;
use capability::gate::{Clock, MAX_VALIDITY_SECS, PlanGrant, SecretKey, SystemClock};
use capability_gateway::escape::escape;
use clap::{Args, Subcommand};

use crate::Failure;
use crate::out::{self, Out};

/// Sign a plan grant: PRINCIPAL may make CALLS calls of the tools TOOLS names, with no
/// approval of each, until it expires or is revoked.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct GrantArgs {
    #[command(subcommand)]
    command: Option<GrantCommand>,
    /// The issuer's secret key file (from `capability keygen`).
    #[arg(long, value_name = "FILE", required = true)]
    key: Option<PathBuf>,
    /// The issuer's name, as the gateway's `[approvals] approvers` knows them.
    #[arg(long, required = true)]
    issuer: Option<String>,
    /// The gateway the grant is for (its `[approvals] audience`).
    #[arg(long, required = true)]
    audience: Option<String>,
    /// Whose calls it covers: `role:<role>` for a stdio client, or the principal the edge
    /// authenticates (`<issuer>#<subject>`, `token:<hash prefix>`), as proposals name it.
    #[arg(long, required = true)]
    principal: Option<String>,
    /// The `server/tool` glob of the tools it covers (`git/git_reset`, `k8s/delete_*`).
    #[arg(long, required = true)]
    tools: Option<String>,
    /// The most the covered tools may do: read-only, non-destructive or unrestricted.
    #[arg(long, value_parser = ceiling, default_value = "non-destructive")]
    ceiling: Ceiling,
    /// A scope it holds (repeat for more): a tool requiring another is not covered.
    #[arg(long = "scope", value_name = "SCOPE")]
    scopes: Vec<String>,
    /// How many calls it allows in all, across every gateway process (1 to 1000).
    #[arg(long, required = true)]
    calls: Option<u32>,
    /// How long it holds, in seconds (at most 86400, 24 hours).
    #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
    expires_in: u64,
    /// Where to write the grant (default: standard output); an existing file is refused.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum GrantCommand {
    /// Revoke a grant in the shared store: every gateway process refuses it at its next use.
    Revoke {
        /// The store the gateways share (a SQLite file or `postgres://...`).
        #[arg(long)]
        store: String,
        /// The grant's id.
        id: String,
    },
}

fn ceiling(text: &str) -> Result<Ceiling, String> {
    match text {
        "read-only" => Ok(Ceiling::ReadOnly),
        "non-destructive" => Ok(Ceiling::NonDestructive),
        "unrestricted" => Ok(Ceiling::Unrestricted),
        other => Err(format!(
            "`{other}` is not a ceiling: write read-only, non-destructive or unrestricted"
        )),
    }
}

/// Runs `capability grant ...`.
pub fn run(args: GrantArgs, out: &mut Out) -> Result<u8, Failure> {
    if let Some(GrantCommand::Revoke { store, id }) = args.command {
        return revoke(&store, &id, out);
    }
    let missing = |what: &str| Failure::input(format!("`--{what}` is required"));
    let key = args.key.ok_or_else(|| missing("key"))?;
    let issuer = args.issuer.ok_or_else(|| missing("issuer"))?;
    let audience = args.audience.ok_or_else(|| missing("audience"))?;
    let principal = args.principal.ok_or_else(|| missing("principal"))?;
    let tools = args.tools.ok_or_else(|| missing("tools"))?;
    let calls = args.calls.ok_or_else(|| missing("calls"))?;
    if args.expires_in > MAX_VALIDITY_SECS {
        return Err(Failure::input(format!(
            "`--expires-in {}` is over the maximum of {MAX_VALIDITY_SECS} s (24 hours)",
            args.expires_in
        )));
    }
    let text = std::fs::read_to_string(&key)
        .map_err(|e| Failure::input(format!("cannot read `{}`: {e}", key.display())))?;
    let secret = SecretKey::from_text(&text)
        .map_err(|e| Failure::input(format!("`{}`: {e}", key.display())))?;
    let now = SystemClock.now();
    let grant = PlanGrant::sign(
        audience,
        principal,
        tools,
        args.ceiling,
        args.scopes,
        calls,
        issuer,
        &secret,
        now,
        now.saturating_add(args.expires_in),
    )
    .map_err(|e| Failure::input(e.to_string()))?;
    out::note(format_args!(
        "granted {} call(s) of `{}` to `{}` for `{}`, up to {}: grant {}",
        grant.calls,
        escape(&grant.tools),
        escape(&grant.principal),
        escape(&grant.audience),
        grant.ceiling,
        grant.id
    ));
    let text = grant.to_json() + "\n";
    match &args.out {
        Some(path) => capability_gateway::files::write(path, text.as_bytes(), false)
            .map_err(|e| Failure::input(e.to_string()))?,
        None => write!(out, "{text}")?,
    }
    Ok(0)
}

fn revoke(store: &str, id: &str, out: &mut Out) -> Result<u8, Failure> {
    let shown = capability_store::redact_url(store);
    if capability_store::target_kind(store) == capability_store::TargetKind::Sqlite
        && !Path::new(store).exists()
    {
        return Err(Failure::input(format!(
            "the store {shown} does not exist; nothing revoked"
        )));
    }
    let opened = capability_store::open(store)
        .map_err(|e| Failure::input(format!("cannot open {shown}: {e}")))?;
    opened
        .migrate()
        .map_err(|e| Failure::input(format!("cannot prepare {shown}: {e}")))?;
    opened
        .revocations()
        .revoke(id)
        .map_err(|e| Failure::input(format!("cannot revoke in {shown}: {e}")))?;
    writeln!(out, "revoked grant {} in {shown}", escape(id))?;
    Ok(0)
}
