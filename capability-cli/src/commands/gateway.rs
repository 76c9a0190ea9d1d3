//! `capability gateway`: many MCP servers, the policy's `[servers]`, behind one listing
//! (the engine is `capability-gateway`'s).
//!
//! - `--check`: every server of the fleet is started (or reached) and listed, each tool shown
//!   under its server's prefix, and what each role would see is printed, with every hidden
//!   tool's reasons and every name two servers' tools would share; and the resources,
//!   templates and prompts it would see, with every prompt name or URI two servers claim.
//! - `--role <role> --audit <trail>`: the fleet served to one MCP client over standard input
//!   and output; `--listen <address> --audit <trail>`: to any number of clients over
//!   Streamable HTTP, behind the HTTP edge, roles from their tokens.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use capability_gateway::escape::escape;
use capability_gateway::{Checked, Front, GATEWAY_NAME, GatewayError, ServerSource, Servers};

use crate::engine::{ServeArgs, Serving, run_engine};
use crate::out::Out;

/// What `capability gateway` takes.
#[derive(clap::Args, Debug)]
pub struct GatewayArgs {
    /// The policy file (TOML): its `[servers]` are the fleet, its roles decide what each
    /// caller sees.
    #[arg(long, value_name = "FILE")]
    pub policy: PathBuf,
    /// Check the configuration: start and list every server, print what each role would see
    /// (exit 1 when tools or prompts of two servers would share a shown name, or two servers
    /// serve one URI), serve nothing.
    #[arg(long, conflicts_with_all = ["listen", "audit", "watch", "metrics", "otlp", "checkpoint_key"])]
    pub check: bool,
    /// The client's role over stdio (with --check: only this role). Refused with --listen.
    #[arg(long, conflicts_with = "listen")]
    pub role: Option<String>,
    /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8932; port 0 picks one, printed
    /// on standard error) instead of standard input and output; each request's role comes from
    /// its token (the policy's `[auth]` or `[bearer_tokens]`).
    #[arg(long, value_name = "ADDRESS")]
    pub listen: Option<std::net::SocketAddr>,
    /// The audit trail (serving: required): a JSON Lines file, or an existing SQLite or
    /// PostgreSQL store.
    #[arg(long, value_name = "PATH_OR_URL")]
    pub audit: Option<String>,
    /// Seconds to wait for each server to answer (with --check; serving, each server has 30 s
    /// to connect and list its tools).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub timeout: u64,
    /// JSON output (with --check).
    #[arg(long)]
    pub json: bool,
    /// Where the servers' standard error goes (default: with --check, a new file in the temporary
    /// directory, `capability-check-<pid>.log`, named in the report; serving, ours).
    #[arg(long, value_name = "FILE")]
    pub server_log: Option<PathBuf>,
    /// Trail, budget, reloads, exporters, message bound.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Runs `capability gateway`: the exit code (0 clean, 1 findings), or why it could not.
pub fn run(args: &GatewayArgs, out: &mut Out) -> Result<u8, GatewayError> {
    args.serve.apply_bound();
    let policy = capability::Policy::from_toml_file(&args.policy)
        .map_err(|e| GatewayError::Config(e.to_string()))?;
    let log = match (&args.server_log, args.check) {
        (Some(log), _) => Some(log.clone()),
        (None, true) => Some(capability_gateway::fresh_log_in(&std::env::temp_dir())?),
        (None, false) => None,
    };
    if let Some(log) = &log {
        capability_gateway::log_servers_to(log)?;
    }
    if args.check {
        let code = check(args, &policy, out).map_err(|error| {
            let Some(log) = &log else { return error };
            let said = |why| format!("{why} (the servers' standard error: {})", log.display());
            match error {
                GatewayError::Config(why) => GatewayError::Config(said(why)),
                GatewayError::Unstarted(why) => GatewayError::Unstarted(said(why)),
                GatewayError::Server(why) => GatewayError::Server(said(why)),
                other => other,
            }
        })?;
        if let Some(log) = log.filter(|_| !args.json) {
            let _ = writeln!(out, "\nthe servers' standard error: {}", log.display());
        }
        return Ok(code);
    }
    let Some(target) = &args.audit else {
        return Err(GatewayError::Config(
            "give `--check` to check the fleet, or `--role <role> --audit <trail>` (or \
             `--listen <address> --audit <trail>`) to serve it"
                .to_owned(),
        ));
    };
    let front = match (&args.role, args.listen) {
        (Some(role), None) => {
            crate::known_role(&policy, role).map_err(GatewayError::Config)?;
            Front::Stdio(role.clone())
        }
        (None, Some(address)) => Front::Http(
            std::net::TcpListener::bind(address)
                .map_err(|e| GatewayError::Config(format!("cannot listen on {address}: {e}")))?,
        ),
        _ => {
            return Err(GatewayError::Config(
                "give the client's role with `--role` (stdio), or `--listen <address>` to serve \
                 Streamable HTTP with roles from tokens"
                    .to_owned(),
            ));
        }
    };
    let serving = Serving {
        name: GATEWAY_NAME,
        servers: Servers::Policy,
        restart: true,
        policy,
        policy_path: &args.policy,
        front,
        audit: target,
        trail_name: "gateway",
        who: "capability gateway",
    };
    run_engine(serving, &args.serve).map(|_| 0)
}

/// `--check`: what each role would see, printed (text, or JSON with `--json`); exit 1 when
/// a name or a URI is shared.
fn check(
    args: &GatewayArgs,
    policy: &capability::Policy,
    out: &mut Out,
) -> Result<u8, GatewayError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| GatewayError::Config(format!("cannot start the async runtime: {e}")))?;
    let checked = runtime.block_on(capability_gateway::check(
        policy,
        &args.policy,
        args.role.as_deref(),
        Duration::from_secs(args.timeout),
    ))?;
    let written = if args.json {
        // Escaped as every --json output is: the same JSON value, safe to print.
        serde_json::to_value(&checked)
            .map_err(std::io::Error::other)
            .and_then(|report| out.json(&report))
    } else {
        text_report(out, &checked)
    };
    written.map_err(|e| GatewayError::Config(format!("cannot write the report: {e}")))?;
    Ok(u8::from(checked.collides()))
}

fn source_text(source: &ServerSource) -> String {
    match source {
        ServerSource::Command(words) => escape(&words.join(" ")),
        ServerSource::Url(url) => escape(url),
        ServerSource::File(path) => escape(&path.display().to_string()),
    }
}

fn text_report(out: &mut dyn Write, checked: &Checked) -> std::io::Result<()> {
    writeln!(out, "fleet: {} servers", checked.servers.len())?;
    for server in &checked.servers {
        writeln!(
            out,
            "  {:<16} {:>3} tools  prefix {:<12} {}{}  {}",
            server.name,
            server.tools,
            format!("\"{}\"", server.prefix),
            server.trust,
            server
                .lock
                .as_ref()
                .map(|l| format!(", lock {}", escape(l)))
                .unwrap_or_default(),
            source_text(&server.source),
        )?;
    }
    let (resources, templates, prompts) = checked.item_counts;
    for view in &checked.roles {
        let of = view.visible.len() + view.hidden.len();
        writeln!(
            out,
            "\nrole {}: {} of {of} tools",
            view.role,
            view.visible.len()
        )?;
        for tool in &view.visible {
            let held = match tool.hold {
                Some("signature") => "  (each call needs a signed approval)",
                Some(_) => "  (each call confirmed by the user)",
                None => "",
            };
            writeln!(
                out,
                "  shown   {:<36} {}/{}{held}",
                escape(&tool.shown),
                tool.server,
                escape(&tool.tool)
            )?;
        }
        for tool in &view.hidden {
            let reasons: Vec<String> = tool.reasons.iter().flatten().map(|r| escape(r)).collect();
            writeln!(
                out,
                "  hidden  {:<36} {}/{}: {}",
                escape(&tool.shown),
                tool.server,
                escape(&tool.tool),
                reasons.join("; ")
            )?;
            if let Some(fix) = &tool.fix {
                writeln!(out, "          to show it: {}", escape(fix))?;
            }
        }
        for (kind, list, of) in [
            ("resource", &view.resources, resources),
            ("template", &view.templates, templates),
            ("prompt", &view.prompts, prompts),
        ] {
            if of == 0 {
                continue;
            }
            writeln!(out, "  {kind}s: {} of {of}", list.len())?;
            for item in list {
                writeln!(
                    out,
                    "  {kind:<8} {:<36} {}/{}",
                    escape(&item.shown),
                    item.server,
                    escape(&item.own)
                )?;
            }
        }
    }
    if checked.collisions.is_empty() {
        writeln!(out, "\nno shown name is shared by tools of two servers")?;
    } else {
        writeln!(
            out,
            "\n{} shown names are shared by tools of several servers (each withheld from \
             every role; give one of the servers another `prefix`):",
            checked.collisions.len()
        )?;
        for collision in &checked.collisions {
            let tools: Vec<String> = collision.tools.iter().map(|t| escape(t)).collect();
            writeln!(out, "  {}: {}", escape(&collision.shown), tools.join(", "))?;
        }
    }
    if !checked.item_collisions.is_empty() {
        writeln!(
            out,
            "\nprompt names or resources claimed by several servers, each withheld from every \
             role ({}):",
            checked.item_collisions.len()
        )?;
        for collision in &checked.item_collisions {
            let by: Vec<String> = collision.by.iter().map(|b| escape(b)).collect();
            writeln!(
                out,
                "  {} {}: {}",
                collision.kind,
                escape(&collision.shown),
                by.join(", ")
            )?;
        }
    }
    Ok(())
}
