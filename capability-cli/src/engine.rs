//! What `capability gateway` and `capability proxy` share around the engine
//! (`capability-gateway`): their serving options, the trail opened, the exporters started
//! (Prometheus, OTLP, or standard error), and a runtime to serve on.

use std::path::PathBuf;
use std::sync::Arc;

use capability::mcp::telemetry::{Session, Side, Transport};
use capability_gateway::{Ended, Front, GatewayError, Servers};

/// The options of both commands that serve.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// A secret key file (from `capability keygen`) that signs checkpoints of the trail (every
    /// 1,000 records or 10 seconds, and when the command stops), so that `capability audit
    /// verify --key <FILE>.pub` detects records cut off its end.
    #[arg(long, value_name = "FILE")]
    pub checkpoint_key: Option<PathBuf>,
    /// Seconds between two checkpoints at most, idle or not, from 1 to 10 (`audit verify`
    /// expects one every 10): shorter, and a witness cosigns a fresher tree. [default: 10]
    #[arg(long, value_name = "SECONDS", requires = "checkpoint_key",
          value_parser = clap::value_parser!(u64).range(1..=10))]
    pub checkpoint_every: Option<u64>,
    /// A witness URL (repeatable) to cosign each tree checkpoint of the trail as it is written.
    #[arg(long, value_name = "URL", requires = "checkpoint_key")]
    pub witness: Vec<String>,
    /// Tool calls a client's session may make; then every call is refused.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_calls: u32,
    /// Refused calls tolerated; the next one degrades the session (every call is then
    /// refused).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_denials: u32,
    /// Reload when the policy file or a server's lockfile changes, as on `SIGHUP` (checked
    /// first; a bad change keeps what runs, and says why).
    #[arg(long)]
    pub watch: bool,
    /// Serve Prometheus metrics at `http://ADDRESS/metrics` (calls by server, tool, role and
    /// verdict, `held` for approval included, denials by reason, latency histograms, sessions,
    /// reloads, audit write errors, proposals pending; port 0 picks one, printed on standard
    /// error).
    #[arg(long, value_name = "ADDRESS")]
    pub metrics: Option<std::net::SocketAddr>,
    /// A file holding the token a scrape of `--metrics` must present (`Authorization: Bearer
    /// <token>`; Prometheus: `authorization: { credentials_file: FILE }`). Without it, anyone
    /// who reaches the address reads the metrics.
    #[arg(long, value_name = "FILE", requires = "metrics")]
    pub metrics_token_file: Option<PathBuf>,
    /// Export the MCP spans (`mcp.server`, `execute_tool`, `mcp.client`, with the client's
    /// trace context from `_meta` and the engine's passed to the server) and durations over
    /// OTLP/HTTP to this receiver: spans to `URL/v1/traces`, metrics to `URL/v1/metrics`.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// The longest message read from the client or a server (a line over stdio, an HTTP
    /// server's answer): bytes, or with KiB, MiB or GiB (e.g. 8MiB), from 64KiB to 1GiB. A
    /// longer one is not held: a client's is answered with an error unread, a server's cuts
    /// its output off. [default: 64MiB]
    #[arg(long = "max-message", value_name = "SIZE", value_parser = capability_gateway::lines::parse_max_message)]
    pub max_message: Option<usize>,
    /// Seconds to wait, once a signal or the client's leaving has stopped the servers, for the
    /// calls still ending to record their outcomes before the trail is closed, from 0 to 3600.
    /// Only a call whose client stopped reading its answer takes that long (its intent stays on
    /// record, and how many were given up is said): keep it under the time your supervisor
    /// allows between SIGTERM and SIGKILL (Kubernetes: 30 s), so the trail is closed whole.
    #[arg(long, default_value_t = capability_gateway::DRAIN.as_secs(), value_name = "SECONDS",
          allow_negative_numbers = true,
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub drain: u64,
}

impl ServeArgs {
    /// When the trail's checkpoints come: `--checkpoint-every`'s interval, else the default.
    fn checkpoint_every(&self) -> capability::audit::CheckpointEvery {
        let mut every = capability::audit::CheckpointEvery::default();
        if let Some(seconds) = self.checkpoint_every {
            every.interval = std::time::Duration::from_secs(seconds);
        }
        every
    }

    /// Makes `--max-message` the process's bound, before anything is read.
    pub fn apply_bound(&self) {
        if let Some(bytes) = self.max_message {
            capability_gateway::lines::set_max_message(bytes);
        }
    }
}

/// What a command asks of the engine: its servers, its policy and front, its trail.
pub struct Serving<'a> {
    /// The name the engine gives itself (`capability-gateway`, `capability-proxy`).
    pub name: &'static str,
    /// Where its servers come from.
    pub servers: Servers,
    /// Whether a server that dies is started again.
    pub restart: bool,
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
    /// Who speaks on standard error (`capability gateway`); its service name in spans is the
    /// same with a dash.
    pub who: &'static str,
}

/// Runs the engine as `serving` and `args` say until its stdio client goes, a signal stops it,
/// or (when it does not start servers again) a server goes: why it ended.
pub fn run_engine(serving: Serving<'_>, args: &ServeArgs) -> Result<Ended, GatewayError> {
    let Serving {
        name,
        servers,
        restart,
        policy,
        policy_path,
        front,
        audit: target,
        trail_name,
        who,
    } = serving;
    let metrics = args
        .metrics
        .map(|address| {
            crate::metrics::Endpoint::bind(address, args.metrics_token_file.as_deref(), who)
        })
        .transpose()
        .map_err(GatewayError::Config)?;
    let mut sink = capability_gateway::trail::open_witnessed(
        target,
        (trail_name, front.role()),
        (args.checkpoint_key.as_deref(), args.checkpoint_every()),
        &args.witness,
    )?;
    if let Some(endpoint) = &metrics {
        sink = Arc::new(capability_gateway::metrics::MeteredSink::new(
            sink,
            endpoint.counters.clone(),
        ));
    }
    let budget = capability::audit::Budget {
        max_calls: args.max_calls,
        max_denials: args.max_denials,
    };
    // No version on the dispatch: each record carries the version of the policy in force
    // (the role's decider's), which a reload changes.
    let dispatch = capability::audit::AuditedDispatch::new(sink.clone()).with_budget(budget);
    let otlp = match &args.otlp {
        Some(endpoint) => Some(
            crate::otlp::start(endpoint, &who.replace(' ', "-"), who)
                .map_err(GatewayError::Config)?,
        ),
        None => {
            crate::report::install(who);
            None
        }
    };
    let session =
        matches!(front, Front::Stdio(_)).then(|| Session::start(Side::Server, Transport::Pipe));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| GatewayError::Config(format!("cannot start the async runtime: {e}")))?;
    let counters = metrics.as_ref().map(|endpoint| endpoint.counters.clone());
    let served = runtime.block_on(async {
        if let Some(endpoint) = metrics {
            tokio::spawn(endpoint.serve());
        }
        capability_gateway::builder(policy, policy_path, Arc::new(dispatch))
            .metrics(counters)
            .name(name)
            .servers(servers)
            .restart(restart)
            .store(target)
            .watch(args.watch)
            .drain(std::time::Duration::from_secs(args.drain))
            .serve(front)
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
