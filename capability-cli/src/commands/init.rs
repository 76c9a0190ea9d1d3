//! `capability init`: a governed fleet from the `mcpServers` JSON an operator already has (the
//! work is `capability_gateway::init`'s): the policy and lockfile written, each tool's claims
//! and what each role sees printed, and the client entry that runs it.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use capability_gateway::GatewayError;
use capability_gateway::escape::escape;
use capability_gateway::init::Initialized;

use crate::out::Out;

/// What `capability init` takes.
#[derive(clap::Args, Debug)]
pub struct InitArgs {
    /// The client's configuration: Claude Desktop's or Cursor's `mcpServers` JSON, VS Code's
    /// `mcp.json` or settings.
    #[arg(long, value_name = "FILE")]
    pub from: PathBuf,
    /// The folder to write `policy.toml` and `capability.lock` in.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Write over a policy or lockfile already there.
    #[arg(long)]
    pub force: bool,
    /// Seconds each server has to start and list its tools.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub timeout: u64,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// Runs `capability init`: 0 when every server was pinned, 1 when some could not be started.
pub fn run(args: &InitArgs, out: &mut Out) -> Result<u8, GatewayError> {
    // A file that cannot be read leaves nothing behind (no folder, no log).
    if let Err(error) = std::fs::metadata(&args.from) {
        return Err(GatewayError::Config(format!(
            "cannot read {}: {error}",
            args.from.display()
        )));
    }
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| GatewayError::Config(format!("cannot make {}: {e}", args.dir.display())))?;
    let log = args.dir.join("servers.log");
    capability_gateway::log_servers_to(&log)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| GatewayError::Config(format!("cannot start the async runtime: {e}")))?;
    let done = runtime.block_on(capability_gateway::init::init(
        &args.from,
        &args.dir,
        Duration::from_secs(args.timeout),
        args.force,
    ))?;
    let written = if args.json {
        serde_json::to_value(&done)
            .map_err(std::io::Error::other)
            .and_then(|report| out.json(&report))
    } else {
        text(out, &done, &log)
    };
    written.map_err(|e| GatewayError::Config(format!("cannot write the report: {e}")))?;
    Ok(u8::from(done.servers.iter().any(|s| s.failed.is_some())))
}

fn text(out: &mut dyn Write, done: &Initialized, log: &std::path::Path) -> std::io::Result<()> {
    writeln!(out, "wrote {}", done.policy.display())?;
    if let Some(lock) = &done.lock {
        writeln!(out, "wrote {} (every tool below pinned)", lock.display())?;
    }
    for server in &done.servers {
        let name = &server.server.name;
        match &server.failed {
            Some(why) => writeln!(
                out,
                "\n{name}: not started, left commented out: {}",
                escape(why)
            )?,
            None => writeln!(
                out,
                "\n{name}: {} tools; what the server claims of each:",
                server.tools.len()
            )?,
        }
        for tool in &server.tools {
            let claims: Vec<String> = ["read_only", "destructive", "idempotent", "open_world"]
                .iter()
                .filter_map(|k| Some(format!("{k}={}", tool.claims.get(k)?)))
                .collect();
            let said = if claims.is_empty() {
                "nothing (so: may write, destroy, reach out)".to_owned()
            } else {
                claims.join(" ")
            };
            writeln!(out, "  {:<36} {said}", escape(&tool.tool))?;
        }
        for note in &server.server.notes {
            writeln!(out, "  note: {}", escape(note))?;
        }
    }
    for skipped in &done.skipped {
        writeln!(
            out,
            "\nskipped {}: {}",
            escape(&skipped.key),
            escape(&skipped.why)
        )?;
    }
    if let Some(checked) = &done.checked {
        for view in &checked.roles {
            let shown: Vec<String> = view.visible.iter().map(|t| escape(&t.shown)).collect();
            writeln!(
                out,
                "\nrole {} sees {} of {} tools: {}",
                view.role,
                shown.len(),
                shown.len() + view.hidden.len(),
                shown.join(", ")
            )?;
        }
    }
    let policy = std::fs::canonicalize(&done.policy).unwrap_or_else(|_| done.policy.clone());
    let trail = policy.with_file_name("reader.jsonl");
    let entry = serde_json::json!({"mcpServers": {"governed": {
        "command": "capability",
        "args": ["gateway", "--policy", policy, "--role", "reader", "--audit", trail]}}});
    writeln!(
        out,
        "\nReview the claims: a claim that is wrong goes under [assertions] in the policy. Then \
         `capability gateway --policy {} --check` says what each role sees and why, and this \
         client entry serves the reader role:\n{}\n(the servers' standard error: {})",
        policy.display(),
        serde_json::to_string_pretty(&entry).unwrap_or_default(),
        log.display()
    )
}
