//! `capability gateway`: many MCP servers, the policy's `[servers]`, behind one listing.
//!
//! - `--check`: every server of the fleet is started (or reached) and listed, each tool shown
//!   under its server's prefix, and what each role would see is printed, with every hidden
//!   tool's reasons and every name two servers' tools would share; and the resources,
//!   templates and prompts it would see, with every prompt name or URI two servers claim.
//! - `--role <role> --audit <trail>`: the fleet served to one MCP client over standard input
//!   and output ([`serve`]); `--listen <address> --audit <trail>`: to any number of clients over
//!   Streamable HTTP, behind the HTTP edge, roles from their tokens.
//!
//! Resources and prompts are served across servers too (see `items.rs`); a server's requests
//! to the client (sampling, elicitation, roots) reach the stdio client where its role allows
//! them. Not in this build: resource subscriptions and completion across servers.

mod approvals;
mod bridge;
mod called;
mod check;
mod delegate;
mod fast;
mod fleet;
mod handler;
mod held;
mod http;
mod items;
mod lane;
mod legacy;
mod logging;
mod members;
mod process;
mod reach;
mod relay;
mod reload;
mod serve;
mod served;
mod source;
mod spec;
mod upstream;
mod versions;

use std::io::Write;
use std::path::PathBuf;

pub use check::check;
pub use fleet::{FleetServer, read_fleet};
pub use handler::GATEWAY_NAME;
pub(crate) use relay::at_or_above;
pub use serve::{Ended, Engine, Front, serve};
pub use source::ServerSource;
pub use spec::{Exchange, Secret, ServerSpec, Servers, read_secret};

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
    #[arg(long)]
    pub check: bool,
    /// The client's role over stdio (with --check: only this role). Refused with --listen.
    #[arg(long, conflicts_with = "listen")]
    pub role: Option<String>,
    /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8932; port 0 picks one, printed
    /// on standard error) instead of standard input and output; each request's role comes from
    /// its token (the policy's `[auth]` or `[bearer_tokens]`).
    #[arg(long, value_name = "ADDRESS", conflicts_with = "check")]
    pub listen: Option<std::net::SocketAddr>,
    /// The audit trail (serving: required): a JSON Lines file, or an existing SQLite or
    /// PostgreSQL store.
    #[arg(long, value_name = "PATH_OR_URL", conflicts_with = "check")]
    pub audit: Option<String>,
    /// A secret key (from `capability keygen`) that signs the trail's checkpoints.
    #[arg(long, value_name = "FILE", requires = "audit")]
    pub checkpoint_key: Option<PathBuf>,
    /// Tool calls the client's session may make; then every call is refused.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_calls: u32,
    /// Refused calls tolerated; the next one degrades the session (every call is then
    /// refused).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_denials: u32,
    /// Seconds to wait for each server to answer (with --check; serving, each server has 30 s
    /// to connect and list its tools).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub timeout: u64,
    /// Reload when the policy file or a server's lockfile changes, as on `SIGHUP` (checked
    /// first; a bad change keeps what runs, and says why).
    #[arg(long, conflicts_with = "check")]
    pub watch: bool,
    /// Serve Prometheus metrics at `http://ADDRESS/metrics` (calls by server, tool, role and
    /// verdict, denials by reason, latency histograms, sessions, reloads, audit write errors;
    /// port 0 picks one, printed on standard error).
    #[arg(long, value_name = "ADDRESS", conflicts_with = "check")]
    pub metrics: Option<std::net::SocketAddr>,
    /// A file holding the token a scrape of `--metrics` must present (`Authorization: Bearer
    /// <token>`; Prometheus: `authorization: { credentials_file: FILE }`). Without it, anyone
    /// who reaches the address reads the metrics.
    #[arg(long, value_name = "FILE", requires = "metrics")]
    pub metrics_token_file: Option<PathBuf>,
    /// Export the MCP spans (`mcp.server`, `execute_tool`, `mcp.client`, with the client's
    /// trace context from `_meta` and the gateway's passed to the server) and durations over
    /// OTLP/HTTP to this receiver: spans to `URL/v1/traces`, metrics to `URL/v1/metrics`.
    #[arg(long, value_name = "URL", conflicts_with = "check")]
    pub otlp: Option<String>,
    /// The bound on one message (`--max-message`).
    #[command(flatten)]
    pub bound: crate::MessageBound,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// Why the engine did not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GatewayError {
    /// The configuration is refused (the policy, a role, an address, the trail, the
    /// exporters): nothing was served.
    Config(String),
    /// A server could not be started, reached or listed: nothing was served.
    Server(String),
}

impl std::fmt::Display for GatewayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GatewayError::Config(why) | GatewayError::Server(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for GatewayError {}

/// Runs `capability gateway`: the exit code (0 clean, 1 findings), or why it could not.
pub fn run(args: &GatewayArgs, out: &mut dyn Write) -> Result<u8, GatewayError> {
    args.bound.apply();
    if args.check {
        return check(args, out);
    }
    let Some(target) = &args.audit else {
        return Err(GatewayError::Config(
            "give `--check` to check the fleet, or `--role <role> --audit <trail>` (or \
             `--listen <address> --audit <trail>`) to serve it"
                .to_owned(),
        ));
    };
    let policy = capability::Policy::from_toml_file(&args.policy)
        .map_err(|e| GatewayError::Config(e.to_string()))?;
    let front = match (&args.role, args.listen) {
        (Some(role), None) => {
            if !policy.roles().any(|r| r == role) {
                let roles: Vec<&str> = policy.roles().collect();
                return Err(GatewayError::Config(format!(
                    "role `{role}` is not in the policy (it has: {})",
                    roles.join(", ")
                )));
            }
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
    let engine = Engine {
        name: GATEWAY_NAME,
        servers: Servers::Policy,
        restart: true,
    };
    let serving = Serving {
        policy,
        policy_path: &args.policy,
        front,
        audit: target,
        trail_name: "gateway",
        checkpoint_key: args.checkpoint_key.as_deref(),
        budget: capability::audit::Budget {
            max_calls: args.max_calls,
            max_denials: args.max_denials,
        },
        metrics: args.metrics,
        metrics_token_file: args.metrics_token_file.as_deref(),
        otlp: args.otlp.as_deref(),
        watch: args.watch,
        service: "capability-gateway",
        who: "capability gateway",
    };
    run_engine(&engine, serving).map(|_| 0)
}

/// What a command asks of the engine besides its servers: its policy and front, its trail and
/// budget, its exporters.
#[derive(Debug)]
pub struct Serving<'a> {
    /// The policy, read.
    pub policy: capability::Policy,
    /// Its file (read again on a reload; relative paths in it are relative to its folder).
    pub policy_path: &'a std::path::Path,
    /// Where the clients are.
    pub front: Front,
    /// The audit trail: a JSON Lines file, or a SQLite or PostgreSQL store.
    pub audit: &'a str,
    /// The name of the trail's writer (`gateway`, or the proxy's server).
    pub trail_name: &'a str,
    /// The key that signs the trail's checkpoints.
    pub checkpoint_key: Option<&'a std::path::Path>,
    /// The budget of each client's session.
    pub budget: capability::audit::Budget,
    /// Where to serve Prometheus metrics.
    pub metrics: Option<std::net::SocketAddr>,
    /// The token a scrape must present.
    pub metrics_token_file: Option<&'a std::path::Path>,
    /// Where to export spans and durations (OTLP/HTTP).
    pub otlp: Option<&'a str>,
    /// Reload when the policy file or a lockfile changes.
    pub watch: bool,
    /// The service name of the exported spans.
    pub service: &'static str,
    /// Who speaks on standard error (`capability gateway`).
    pub who: &'static str,
}

/// Runs `engine` as `serving` says until its stdio client goes, a signal stops it, or (when it
/// does not start servers again) a server goes: why it ended.
pub fn run_engine(engine: &Engine, serving: Serving<'_>) -> Result<Ended, GatewayError> {
    let Serving {
        policy,
        policy_path,
        front,
        audit: target,
        trail_name,
        checkpoint_key,
        budget,
        metrics,
        metrics_token_file,
        otlp,
        watch,
        service,
        who,
    } = serving;
    let writer = match &front {
        Front::Stdio(role) => role.clone(),
        Front::Http(_) => "http".to_owned(),
    };
    let signer = match checkpoint_key {
        Some(path) => Some(crate::proxy::checkpoint_key(path).map_err(GatewayError::Config)?),
        None => None,
    };
    let metrics = metrics
        .map(|address| crate::metrics::Endpoint::bind(address, metrics_token_file, who))
        .transpose()
        .map_err(GatewayError::Config)?;
    let mut sink = crate::proxy::open_audit(target, trail_name, &writer, signer)
        .map_err(GatewayError::Config)?;
    if let Some(endpoint) = &metrics {
        sink = std::sync::Arc::new(crate::metrics::MeteredSink::new(
            sink,
            endpoint.counters.clone(),
        ));
    }
    let dispatch = capability::audit::AuditedDispatch::new(sink.clone()).with_budget(budget);
    // No version on the dispatch: each record carries the version of the policy in force
    // (the role's decider's), which a reload changes.
    let otlp = match otlp {
        Some(endpoint) => {
            Some(crate::otlp::start(endpoint, service, who).map_err(GatewayError::Config)?)
        }
        None => {
            crate::report::install(who);
            None
        }
    };
    let session = matches!(front, Front::Stdio(_)).then(|| {
        capability::mcp::telemetry::Session::start(
            capability::mcp::telemetry::Side::Server,
            capability::mcp::telemetry::Transport::Pipe,
        )
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| GatewayError::Config(format!("cannot start the async runtime: {e}")))?;
    let served = runtime.block_on(async {
        if let Some(endpoint) = metrics {
            tokio::spawn(endpoint.serve());
        }
        serve(
            engine,
            policy,
            policy_path,
            front,
            std::sync::Arc::new(dispatch),
            watch,
            target,
        )
        .await
    });
    // A read of standard input may still be blocked in a thread of the runtime: do not wait.
    runtime.shutdown_background();
    // The session's duration, then the last spans and durations sent.
    drop(session);
    drop(otlp);
    let closed = sink.close();
    let ended = served?;
    closed
        .map_err(|e| GatewayError::Config(format!("the audit trail could not be closed: {e}")))?;
    Ok(ended)
}

/// What the engine says to its operator: a `tracing` event (target `capability_cli::gateway`,
/// `info`), which the command prints on standard error as `<who>: <message>`
/// ([`crate::report`]).
pub(crate) fn note(message: std::fmt::Arguments<'_>) {
    tracing::info!(target: "capability_cli::gateway", "{message}");
}
