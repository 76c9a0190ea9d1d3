//! `capability proxy`: one server governed for any client; everything is read and checked
//! before the server is spawned.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

use crate::engine::ServeArgs;
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
    /// Trail, budget, reloads, exporters, message bound.
    #[command(flatten)]
    serve: ServeArgs,
    /// The server: `-- <command> [args]`, spoken to over stdio (or --upstream).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// `capability proxy`: a gateway of one server (`--server`, spawned from the command after `--`
/// or reached at `--upstream`), served as the engine serves a fleet: the lanes, approvals,
/// reloads, transparency across revisions. Everything is read and checked before the server is
/// spawned; when the server goes, the proxy stops with an error saying why (its client sees its
/// one server go, as it would straight).
pub fn run(args: ProxyArgs) -> Result<u8, Failure> {
    use crate::engine::{Serving, run_engine};
    use capability_gateway::secrets;
    use capability_gateway::{
        Exchange, Front, GatewayError, Secret, ServerSource, ServerSpec, Servers,
    };
    let input = |why: String| Failure::input(format!("proxy: {why}"));
    let upstream_token =
        secrets::upstream_token(args.upstream_token_file.as_deref()).map_err(input)?;
    let exchange = match args.upstream_exchange_client {
        Some(client_id) => Some(Exchange {
            client_id,
            client_secret: Secret(
                secrets::client_secret(args.upstream_exchange_secret_file.as_deref())
                    .map_err(input)?,
            ),
            audience: args.upstream_audience,
        }),
        None => None,
    };
    if upstream_token.is_some() && args.upstream.is_none() {
        return Err(input(
            "CAPABILITY_UPSTREAM_TOKEN is for --upstream <url>; a server spawned over stdio \
             takes no token"
                .to_owned(),
        ));
    }
    args.serve.apply_bound();
    let source = match (args.command.split_first(), &args.upstream) {
        (Some(_), Some(url)) => {
            return Err(input(format!(
                "give the server either as a command after `--` or as `--upstream {url}`, not \
                 both"
            )));
        }
        (None, None) => {
            return Err(input(
                "no server: give its command after `--`, e.g. `-- npx -y \
                 @modelcontextprotocol/server-memory`, or its URL with `--upstream \
                 http://127.0.0.1:3001/mcp`"
                    .to_owned(),
            ));
        }
        (Some(_), None) => {
            let mut words = Vec::with_capacity(args.command.len());
            for word in &args.command {
                words.push(word.to_str().map(str::to_owned).ok_or_else(|| {
                    input(format!("the server's command word {word:?} is not UTF-8"))
                })?);
            }
            ServerSource::Command(words)
        }
        (None, Some(url)) => ServerSource::Url(check_url(url).map_err(input)?),
    };
    let policy =
        capability::Policy::from_toml_file(&args.policy).map_err(|e| input(e.to_string()))?;
    let front = match (args.listen, &args.role) {
        (Some(_), Some(role)) => {
            return Err(input(format!(
                "`--role {role}` is not used with `--listen`: each request's role comes from \
                 its bearer token, through the policy's `[auth]` (OAuth access tokens) or \
                 `[bearer_tokens]`"
            )));
        }
        (Some(address), None) => {
            capability_gateway::check_credentials(&policy)
                .map_err(|e| input(format!("{}: {e}", args.policy.display())))?;
            Front::Http(
                std::net::TcpListener::bind(address)
                    .map_err(|e| input(format!("cannot listen on {address}: {e}")))?,
            )
        }
        (None, None) => {
            return Err(input(
                "give the client's role with `--role`, or `--listen <address>` to serve \
                 Streamable HTTP with roles from bearer tokens"
                    .to_owned(),
            ));
        }
        (None, Some(role)) => {
            crate::known_role(&policy, role).map_err(input)?;
            Front::Stdio(role.clone())
        }
    };
    if let Err(error) = capability::CapabilityManifest::builder("tool")
        .provider(&args.server)
        .build()
    {
        return Err(input(format!(
            "`--server {}` is not a valid server name: {error}",
            args.server
        )));
    }
    if let Some(path) = &args.lock {
        let lock = capability::mcp::Lockfile::load(path)
            .map_err(|e| input(e.to_string()))?
            .ok_or_else(|| input(format!("{}: no such lockfile", path.display())))?;
        if lock.server(&args.server).is_none() {
            return Err(input(format!(
                "{} pins no tool of server `{}`: every tool would be hidden; pin them with \
                 `capability pin --server {} --lock {} -- <command>`",
                path.display(),
                args.server,
                args.server,
                path.display()
            )));
        }
    }
    if exchange.is_some()
        && !(matches!(front, Front::Http(_))
            && matches!(source, ServerSource::Url(_))
            && policy.auth().is_some())
    {
        return Err(input(
            "`--upstream-exchange-client` exchanges callers' OAuth access tokens: it needs \
             `--listen`, the policy's `[auth]` and `--upstream <url>`"
                .to_owned(),
        ));
    }
    // The policy's `[servers.<name>]` entry says whether resources and prompts go through.
    let entry = policy.servers().iter().find(|e| e.name() == args.server);
    let spec = ServerSpec {
        name: args.server.clone(),
        source,
        env: Vec::new(),
        trusted: args.trust == TrustArg::Trusted,
        lock: args.lock.clone(),
        prefix: String::new(),
        token: upstream_token.map(Secret),
        exchange,
        resources: entry.is_some_and(|e| e.forwards_resources()),
        prompts: entry.is_some_and(|e| e.forwards_prompts()),
    };
    let serving = Serving {
        name: capability_gateway::PROXY_NAME,
        servers: Servers::Given(vec![spec]),
        restart: false,
        policy,
        policy_path: &args.policy,
        front,
        audit: &args.audit,
        trail_name: &args.server,
        who: "capability proxy",
    };
    match run_engine(serving, &args.serve) {
        Ok(capability_gateway::Ended::Stopped) => Ok(0),
        Ok(capability_gateway::Ended::ServerGone(why)) => Err(Failure {
            code: 1,
            message: format!("proxy: the MCP server is gone: {why}"),
            closed_pipe: false,
        }),
        // A server that was started and did not connect is a failure of the run (1), as when
        // it goes later; anything else is the input's (2).
        Err(GatewayError::Server(why)) => Err(Failure {
            code: 1,
            message: format!("proxy: {why}"),
            closed_pipe: false,
        }),
        Err(error) => Err(input(error.to_string())),
    }
}

/// Checks an `--upstream` URL: `http://` or `https://`, with a host.
fn check_url(url: &str) -> Result<String, String> {
    let bad = |why: &str| {
        format!("`--upstream {url}` is not a server's URL: {why} (e.g. http://127.0.0.1:3001/mcp)")
    };
    let uri: hyper::Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(bad("it must start with http:// or https://")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("it names no host"));
    }
    Ok(url.to_owned())
}
