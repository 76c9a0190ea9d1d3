//! `capability tools history <store>`, and what `capability pin --store` adds to a pin: the
//! tool versions of `mcp_tool_versions`.

use std::io::Write;

use capability::audit::time::utc_at;
use capability::gate::{Clock, SystemClock};
use capability_gateway::escape::escape;
use capability_gateway::pins;
use capability_store::Store;
use clap::Subcommand;

use crate::Failure;
use crate::out::Out;

/// What `capability tools` does.
#[derive(Subcommand, Debug)]
pub enum ToolsCommand {
    /// Each descriptor of each tool a gateway saw or an operator pinned (`mcp_tool_versions`):
    /// first and last seen, pinned by whom and when. A tool with two rows changed.
    History {
        /// The store (a SQLite file or `postgres://...`).
        #[arg(value_name = "PATH_OR_URL")]
        target: String,
        /// Only this server's tools.
        #[arg(long)]
        server: Option<String>,
        /// Only this tool (its own name on its server).
        #[arg(long)]
        tool: Option<String>,
        /// One JSON object per row, each line.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `capability tools ...`.
pub fn run(command: &ToolsCommand, out: &mut Out) -> Result<u8, Failure> {
    let ToolsCommand::History {
        target,
        server,
        tool,
        json,
    } = command;
    let store = open(target)?;
    let rows = store
        .tool_versions(server.as_deref(), tool.as_deref())
        .map_err(|e| Failure::input(e.to_string()))?;
    for row in &rows {
        if *json {
            let line = serde_json::to_string(row).unwrap_or_default();
            writeln!(out, "{}", escape(&line))?;
            continue;
        }
        let pinned = match (&row.pinned_by, row.pinned_at) {
            (Some(by), Some(at)) => format!("pinned by {} at {}", escape(by), utc_at(at)),
            _ => "not pinned".to_owned(),
        };
        writeln!(
            out,
            "{}/{}  {}  first seen {}  last seen {}  {pinned}",
            escape(&row.server),
            escape(&row.tool),
            escape(&row.descriptor_hash),
            utc_at(row.first_seen),
            utc_at(row.last_seen),
        )?;
    }
    if rows.is_empty() && !*json {
        writeln!(
            out,
            "no tool versions in {}{}",
            capability_store::redact_url(target),
            match (server, tool) {
                (None, None) => String::new(),
                (Some(server), None) => format!(" for server `{}`", escape(server)),
                (None, Some(tool)) => format!(" for tool `{}`", escape(tool)),
                (Some(server), Some(tool)) => {
                    format!(
                        " for tool `{}` of server `{}`",
                        escape(tool),
                        escape(server)
                    )
                }
            }
        )?;
    }
    Ok(0)
}

/// The store `target` names, opened and at this build's schema.
pub fn open(target: &str) -> Result<Box<dyn Store>, Failure> {
    let shown = capability_store::redact_url(target);
    capability_store::open(target).map_err(|e| Failure::input(format!("cannot open {shown}: {e}")))
}

/// Runs `capability pin`: the lockfile, and with `--store`, the pins in the store too. The
/// store is opened, and who pins known, before the lockfile is written.
pub fn pin(
    store: Option<String>,
    by: Option<String>,
    (review, approve): (bool, Option<(&std::path::Path, &str)>),
    common: &crate::Common,
    out: &mut Out,
) -> Result<u8, Failure> {
    let store = store.as_deref().map(open_for_pins).transpose()?;
    let by = store.as_ref().map(|_| pinner(by.as_deref())).transpose()?;
    let policy = crate::load_policy(common)?;
    let loaded = crate::Source::from_args(common)?.load(common, policy.as_ref())?;
    if review || approve.is_some() {
        let (Some(r), Some(l)) = (&loaded.review, &loaded.lock) else {
            return Err(Failure::input("no lockfile: pin the server first"));
        };
        let (said, code) =
            pins::review(r, l, &loaded.tools, policy.as_ref(), approve, &common.lock)
                .map_err(Failure::input)?;
        writeln!(out, "{said}")?;
        return Ok(code);
    }
    let code = crate::output::pin(&loaded, common, out)?;
    if let (Some(store), Some(by)) = (store, by) {
        pins::record_in_store(
            &*store,
            &loaded.server,
            &loaded.tools,
            &by,
            SystemClock.now(),
        )
        .map_err(Failure::input)?;
    }
    Ok(code)
}

/// The store `capability pin --store` records in, asked once that it answers at this build's
/// schema (so a store that cannot take the pins refuses before the lockfile is written).
pub fn open_for_pins(target: &str) -> Result<Box<dyn Store>, Failure> {
    let store = open(target)?;
    store
        .tool_versions(Some(""), Some(""))
        .map_err(|e| Failure::input(e.to_string()))?;
    Ok(store)
}

/// Who pins: `--by`, else the login name (`USER`, `LOGNAME`).
pub fn pinner(by: Option<&str>) -> Result<String, Failure> {
    by.map(str::to_owned)
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|name| !name.trim().is_empty())
        .ok_or_else(|| {
            Failure::input("say who pins with `--by <name>` (no USER or LOGNAME to take it from)")
        })
}
