//! `capability proxy`: one server governed for any client; everything is read and checked
//! before the server is spawned.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

use crate::{Failure, TrustArg};

#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// The policy file (TOML): its roles decide what the client may list and call.
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,
    /// The client's role: a role of the policy. Required over stdio; refused with --listen.
    #[arg(long)]
    role: Option<String>,
    /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8931; port 0 picks one, printed
    /// on standard error) instead of standard input and output; roles come from OAuth access
    /// tokens (the policy's [auth]) or bearer tokens (its [bearer_tokens]).
    #[arg(long, value_name = "ADDRESS")]
    listen: Option<std::net::SocketAddr>,
    /// The server's Streamable HTTP endpoint (e.g. http://127.0.0.1:3001/mcp), instead of a
    /// command after `--`.
    #[arg(long, value_name = "URL")]
    upstream: Option<String>,
    /// A file holding the bearer token the proxy presents to --upstream (its own credential;
    /// a client's token never passes the proxy). Or give it in the environment,
    /// CAPABILITY_UPSTREAM_TOKEN.
    #[arg(long, value_name = "FILE", requires = "upstream")]
    upstream_token_file: Option<PathBuf>,
    /// Calls on the caller's behalf: the proxy's client id at the issuer of [auth], which
    /// exchanges each caller's token (RFC 8693) for one whose audience is --upstream. Its
    /// secret: --upstream-exchange-secret-file, or CAPABILITY_UPSTREAM_CLIENT_SECRET.
    #[arg(long, value_name = "ID", requires = "upstream")]
    upstream_exchange_client: Option<String>,
    /// A file holding the exchange client's secret.
    #[arg(long, value_name = "FILE", requires = "upstream_exchange_client")]
    upstream_exchange_secret_file: Option<PathBuf>,
    /// The upstream's audience in exchanged tokens (default: the --upstream URL).
    #[arg(long, value_name = "URI", requires = "upstream_exchange_client")]
    upstream_audience: Option<String>,
    /// The server's name: the provider of its tools, which selects the policy's patterns and
    /// assertions and the lockfile's pins. The name the server gives itself is never used.
    #[arg(long)]
    server: String,
    /// Whether the server's annotations are believed. Untrusted: every tool counts as
    /// mutating, destructive and open-world unless the policy's assertions vouch for it.
    #[arg(long, value_enum, default_value_t = TrustArg::Untrusted)]
    trust: TrustArg,
    /// A lockfile (from `capability pin`): a tool that drifted from its pin is hidden. The
    /// file must pin the server.
    #[arg(long, value_name = "FILE")]
    lock: Option<PathBuf>,
    /// The audit trail (required): a JSON Lines file (created if missing), or an existing
    /// store: a SQLite database or `postgres://...` (create one with `capability db
    /// migrate`).
    #[arg(long, value_name = "PATH_OR_URL")]
    audit: String,
    /// A secret key file (from `capability keygen`) that signs checkpoints of the trail (every
    /// 1,000 records or 10 seconds, and when the proxy stops), so that `capability audit
    /// verify --key <FILE>.pub` detects records cut off its end.
    #[arg(long, value_name = "FILE")]
    checkpoint_key: Option<PathBuf>,
    /// Tool calls the client's session may make; then every call is refused until the proxy
    /// restarts.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    max_calls: u32,
    /// Refused calls tolerated; the next one degrades the session: every call is then refused
    /// until the proxy restarts.
    #[arg(long, default_value_t = 100, value_name = "N")]
    max_denials: u32,
    /// Serve Prometheus metrics at `http://ADDRESS/metrics` (as `capability gateway --metrics`).
    #[arg(long, value_name = "ADDRESS")]
    metrics: Option<std::net::SocketAddr>,
    /// A file holding the token a scrape of `--metrics` must present (as `capability gateway
    /// --metrics-token-file`).
    #[arg(long, value_name = "FILE", requires = "metrics")]
    metrics_token_file: Option<PathBuf>,
    /// Export the MCP spans and durations over OTLP/HTTP (as `capability gateway --otlp`).
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
    #[command(flatten)]
    bound: capability_cli::MessageBound,
    /// The server: `-- <command> [args]`, spoken to over stdio (or --upstream).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// `capability proxy`: everything is read and checked before the server is spawned.
pub fn run(args: ProxyArgs) -> Result<u8, Failure> {
    use capability_cli::proxy::{ExchangeOptions, Options, RunError, secrets};
    let input = |why: String| Failure::input(format!("proxy: {why}"));
    let upstream_token =
        secrets::upstream_token(args.upstream_token_file.as_deref()).map_err(input)?;
    let exchange = match args.upstream_exchange_client {
        Some(client_id) => Some(ExchangeOptions {
            client_id,
            client_secret: secrets::client_secret(args.upstream_exchange_secret_file.as_deref())
                .map_err(input)?,
            audience: args.upstream_audience,
        }),
        None => None,
    };
    if upstream_token.is_some() && args.upstream.is_none() {
        return Err(Failure::input(
            "proxy: CAPABILITY_UPSTREAM_TOKEN is for --upstream <url>; a server spawned over \
             stdio takes no token"
                .to_owned(),
        ));
    }
    args.bound.apply();
    let options = Options {
        policy: args.policy,
        role: args.role,
        listen: args.listen,
        upstream: args.upstream,
        upstream_token,
        exchange,
        server: args.server,
        trusted: args.trust == TrustArg::Trusted,
        lock: args.lock,
        audit: args.audit,
        checkpoint_key: args.checkpoint_key,
        budget: capability::audit::Budget {
            max_calls: args.max_calls,
            max_denials: args.max_denials,
        },
        metrics: args.metrics,
        metrics_token_file: args.metrics_token_file,
        otlp: args.otlp,
        command: args.command,
    };
    let proxy = options
        .prepare()
        .map_err(|e| Failure::input(format!("proxy: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::input(format!("proxy: cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(proxy.run());
    // A read of standard input may still be blocked in a thread of the runtime: do not wait.
    runtime.shutdown_background();
    match result {
        Ok(()) => Ok(0),
        Err(error @ RunError::Spawn(_)) => Err(Failure::input(format!("proxy: {error}"))),
        Err(error) => Err(Failure {
            code: 1,
            message: format!("proxy: {error}"),
            closed_pipe: false,
        }),
    }
}
