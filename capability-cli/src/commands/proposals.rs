//! `capability proposals`: the proposals a gateway keeps in its store, for approvers.

use std::io::Write;

use capability::audit::time::utc_at;
use capability::gate::{Clock, SystemClock};
use capability_gateway::escape::{escape, json_line};
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
    /// One JSON object per proposal, each line (its times as Unix seconds, and as RFC 3339
    /// dates in UTC: `created_at_rfc3339`, `expires_at_rfc3339`).
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
        let (created, expires) = (utc_at(proposal.created_at), utc_at(proposal.expires_at));
        if args.json {
            let mut line = serde_json::to_value(proposal).unwrap_or_default();
            line["created_at_rfc3339"] = created.into();
            line["expires_at_rfc3339"] = expires.into();
            writeln!(out, "{}", json_line(&line))?;
        } else {
            writeln!(
                out,
                "{}  {}/{}  for {}  by {}  proposed {created}  waits until {expires}",
                escape(&proposal.id),
                escape(&proposal.server),
                escape(&proposal.tool),
                escape(&proposal.audience),
                escape(&proposal.proposer),
            )?;
        }
    }
    if waiting.is_empty() && !args.json {
        writeln!(out, "no proposal waits in {shown}")?;
    }
    Ok(0)
}
