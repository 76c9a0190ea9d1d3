//! `capability proposals`: the proposals a gateway keeps in its store, for approvers.

use std::io::Write;

use capability::gate::{Clock, SystemClock};
use capability_gateway::escape::escape;
use clap::Args;

use crate::Failure;
use crate::out::Out;

/// List the proposals waiting in a store (a gateway's `[approvals]` ledger), or print one for
/// `capability approve`.
#[derive(Args, Debug)]
pub struct ProposalsArgs {
    /// The store (a SQLite file or `postgres://...`).
    store: String,
    /// Print this proposal's file (redirect it to a file and give that to `capability
    /// approve`).
    #[arg(long)]
    id: Option<String>,
    /// One JSON object per proposal, each line.
    #[arg(long, conflicts_with = "id")]
    json: bool,
}

/// Runs `capability proposals ...`.
pub fn run(args: &ProposalsArgs, out: &mut Out) -> Result<u8, Failure> {
    let shown = capability_store::redact_url(&args.store);
    let store = capability_store::open(&args.store)
        .map_err(|e| Failure::input(format!("cannot open {shown}: {e}")))?;
    let waiting = store
        .proposals(SystemClock.now())
        .map_err(|e| Failure::input(e.to_string()))?;
    if let Some(id) = &args.id {
        let Some(found) = waiting.iter().find(|p| p.id == *id) else {
            return Err(Failure::input(format!(
                "no proposal `{}` waits in {shown} (used, expired, or never made)",
                escape(id)
            )));
        };
        write!(out, "{}", found.body)?;
        return Ok(0);
    }
    for proposal in &waiting {
        if args.json {
            let line = serde_json::to_string(proposal).unwrap_or_default();
            writeln!(out, "{}", escape(&line))?;
        } else {
            writeln!(
                out,
                "{}  {}/{}  for {}  by {}  until {}",
                escape(&proposal.id),
                escape(&proposal.server),
                escape(&proposal.tool),
                escape(&proposal.audience),
                escape(&proposal.proposer),
                proposal.expires_at
            )?;
        }
    }
    if waiting.is_empty() && !args.json {
        writeln!(out, "no proposal waits in {shown}")?;
    }
    Ok(0)
}
