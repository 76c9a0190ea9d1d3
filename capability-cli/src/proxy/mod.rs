//! `capability proxy`: the policy, the lockfile and the audit trail in front of any MCP server,
//! for any MCP client.
//!
//! The proxy is the governed server ([`GovernedServer`](capability::rmcp::GovernedServer)) as
//! the client's side, with a forwarding handler behind it that speaks to the server as an rmcp
//! client. So what the client sees and may call is decided by the one visibility function
//! (untrusted claims not believed, tools that drifted from the lockfile hidden, duplicate names
//! hidden), a refused call is answered with the governed server's JSON-RPC error and never
//! reaches the server, and every call, allowed or refused, goes through the audited dispatch
//! (its per-session budget, and fail-closed: a call whose record cannot be written is refused).
//!
//! The client's side is standard input and output (one client, one role: `--role`), or
//! Streamable HTTP (`--listen`: any number of clients, each request's role from its bearer
//! token through the policy's `[bearer_tokens]`). The server's side is a command spawned and
//! spoken to over stdio, or a Streamable HTTP server (`--upstream <url>`); one server is shared
//! by every client.
//!
//! [`Options::prepare`] reads and checks everything (policy, role or tokens, lockfile, the
//! address to listen on, the upstream URL, audit trail) before anything is spawned;
//! [`Proxy::run`] connects to the server and serves the clients. Messages go to standard error
//! only.

mod audit;
mod backend;
mod completed;
mod connected;
mod delegate;
mod forward;
mod front;
mod gone;
mod http;
mod outbox;
mod pooled;
mod progress;
mod protocol;

pub(crate) use audit::{checkpoint_key, open as open_audit};
pub(crate) use completed::Completed;
pub(crate) use forward::{Changed, Clients};
pub(crate) use front::{
    Held, Hook as FrontHook, Outbox, standard_streams, start_threaded as filter_client_threaded,
    start_with as filter_client_with,
};
pub use http::check_credentials;
pub(crate) use http::config as http_config;
pub(crate) use pooled::{client as http_client, transport_with as http_transport_with};
pub(crate) use progress::{Relay as ProgressRelay, Relaying, send_call};
pub(crate) use protocol::lifecycle;
pub(crate) use upstream::{ServerRequests, ask_client};
mod run;
pub mod secrets;
#[cfg(unix)]
mod socket;
mod upstream;

use std::ffi::OsString;
use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;

use capability::audit::{AuditSink, Budget};
use capability::mcp::Lockfile;
use capability::mcp::telemetry::{Session, Side, Transport};
use capability::{CapabilityManifest, Policy, Server};

pub use delegate::ExchangeOptions;
pub use forward::PROXY_NAME;

/// What `capability proxy` was asked to do, before anything is read.
#[derive(Clone, Debug)]
pub struct Options {
    /// The policy file (TOML).
    pub policy: PathBuf,
    /// The client's role, a role of the policy: required over stdio, refused with `listen`.
    pub role: Option<String>,
    /// Serve Streamable HTTP on this address instead of standard input and output; each
    /// request's role comes from its bearer token (the policy's `[bearer_tokens]`).
    pub listen: Option<SocketAddr>,
    /// The server's Streamable HTTP endpoint, instead of a command.
    pub upstream: Option<String>,
    /// The bearer token the proxy presents to `upstream`: its own credential for the server,
    /// never a client's (a client's token does not pass the proxy).
    pub upstream_token: Option<String>,
    /// Calls on the caller's behalf: each caller's access token exchanged (RFC 8693) for one
    /// with the upstream's audience. Needs `listen` with the policy's `[auth]`, and `upstream`.
    pub exchange: Option<ExchangeOptions>,
    /// The server's name: the provider its tools are known by in the policy and the lockfile.
    pub server: String,
    /// Whether the server's annotations are believed.
    pub trusted: bool,
    /// A lockfile: a tool that drifted from its pin is hidden.
    pub lock: Option<PathBuf>,
    /// The audit trail: a `.jsonl` file, a SQLite database path, or `postgres://...`.
    pub audit: String,
    /// A secret key (from `capability keygen`) that signs the trail's checkpoints, so that
    /// `capability audit verify --key` detects a cut-off tail.
    pub checkpoint_key: Option<PathBuf>,
    /// The budget of the client's session.
    pub budget: Budget,
    /// Serve Prometheus metrics on this address (`/metrics`, see [`crate::metrics`]).
    pub metrics: Option<SocketAddr>,
    /// The file holding the token a scrape of the metrics must present, if any.
    pub metrics_token_file: Option<PathBuf>,
    /// Export the MCP spans and durations to this OTLP/HTTP receiver (see [`crate::otlp`]).
    pub otlp: Option<String>,
    /// The server's command and its arguments (empty with `upstream`).
    pub command: Vec<OsString>,
}

/// The client's side.
#[derive(Debug)]
enum Front {
    /// Standard input and output, one client of one role.
    Stdio { role: String },
    /// Streamable HTTP on a bound socket, roles from OAuth access tokens (the policy's
    /// `[auth]`) or the bearer-token table.
    Http { listener: TcpListener },
}

/// The proxy's token for an upstream server; its `Debug` does not show it.
pub(crate) struct UpstreamToken(pub(crate) String);

impl fmt::Debug for UpstreamToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UpstreamToken(..)")
    }
}

/// The server's side.
#[derive(Debug)]
enum Source {
    /// A command, spoken to over stdio.
    Command {
        program: OsString,
        args: Vec<OsString>,
    },
    /// A Streamable HTTP endpoint, and the proxy's own token for it.
    Url(String, Option<UpstreamToken>),
}

/// A proxy ready to run: its files read and checked, its socket bound, its audit trail open.
pub struct Proxy {
    policy: Arc<Policy>,
    front: Front,
    server: Server,
    lock: Option<Arc<Lockfile>>,
    sink: Arc<dyn AuditSink>,
    audit: String,
    budget: Budget,
    source: Source,
    exchange: Option<ExchangeOptions>,
    /// The `--metrics` endpoint, bound.
    metrics: Option<crate::metrics::Endpoint>,
    /// The `--otlp` exporters: dropped when the proxy stops, they send what is left.
    otlp: Option<crate::otlp::Otlp>,
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proxy")
            .field("front", &self.front)
            .field("server", &self.server)
            .field("lockfile", &self.lock.is_some())
            .field("audit", &self.audit)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Why the proxy cannot start: bad input, found before anything is spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupError(String);

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupError {}

impl Options {
    /// Reads the policy and the lockfile, checks the role and the server's name, and opens the
    /// audit trail; nothing is spawned.
    pub fn prepare(self) -> Result<Proxy, SetupError> {
        let fail = |message: String| SetupError(message);
        let source = match (self.command.split_first(), self.upstream) {
            (Some(_), Some(url)) => {
                return Err(fail(format!(
                    "give the server either as a command after `--` or as `--upstream {url}`, \
                     not both"
                )));
            }
            (None, None) => {
                return Err(fail(
                    "no server: give its command after `--`, e.g. `-- npx -y \
                     @modelcontextprotocol/server-memory`, or its URL with `--upstream \
                     http://127.0.0.1:3001/mcp`"
                        .to_owned(),
                ));
            }
            (Some((program, args)), None) => Source::Command {
                program: program.clone(),
                args: args.to_vec(),
            },
            (None, Some(url)) => Source::Url(
                backend::check_url(&url).map_err(fail)?,
                self.upstream_token.map(UpstreamToken),
            ),
        };
        let policy = Policy::from_toml_file(&self.policy).map_err(|e| fail(e.to_string()))?;
        let front = match (self.listen, self.role) {
            (Some(_), Some(role)) => {
                return Err(fail(format!(
                    "`--role {role}` is not used with `--listen`: each request's role comes \
                     from its bearer token, through the policy's `[auth]` (OAuth access \
                     tokens) or `[bearer_tokens]`"
                )));
            }
            (Some(address), None) => {
                http::check_credentials(&policy)
                    .map_err(|e| fail(format!("{}: {e}", self.policy.display())))?;
                let listener = TcpListener::bind(address)
                    .map_err(|e| fail(format!("cannot listen on {address}: {e}")))?;
                Front::Http { listener }
            }
            (None, None) => {
                return Err(fail(
                    "give the client's role with `--role`, or `--listen <address>` to serve \
                     Streamable HTTP with roles from bearer tokens"
                        .to_owned(),
                ));
            }
            (None, Some(role)) => {
                if !policy.roles().any(|r| r == role) {
                    let roles: Vec<&str> = policy.roles().collect();
                    return Err(fail(format!(
                        "role `{role}` is not in the policy {} (it has: {})",
                        self.policy.display(),
                        roles.join(", ")
                    )));
                }
                Front::Stdio { role }
            }
        };
        if let Err(error) = CapabilityManifest::builder("tool")
            .provider(&self.server)
            .build()
        {
            return Err(fail(format!(
                "`--server {}` is not a valid server name: {error}",
                self.server
            )));
        }
        let server = if self.trusted {
            Server::trusted(&self.server)
        } else {
            Server::untrusted(&self.server)
        };
        let lock = match &self.lock {
            None => None,
            Some(path) => {
                let lock = Lockfile::load(path)
                    .map_err(|e| fail(e.to_string()))?
                    .ok_or_else(|| fail(format!("{}: no such lockfile", path.display())))?;
                if lock.server(&self.server).is_none() {
                    return Err(fail(format!(
                        "{} pins no tool of server `{}`: every tool would be hidden; pin them \
                         with `capability pin --server {} --lock {} -- <command>`",
                        path.display(),
                        self.server,
                        self.server,
                        path.display()
                    )));
                }
                Some(Arc::new(lock))
            }
        };
        // The writer of the trail names the role over stdio; over HTTP, each record does.
        let writer = match &front {
            Front::Stdio { role } => role.as_str(),
            Front::Http { .. } => "http",
        };
        let signer = match &self.checkpoint_key {
            Some(path) => Some(audit::checkpoint_key(path).map_err(fail)?),
            None => None,
        };
        if self.exchange.is_some()
            && !(matches!(front, Front::Http { .. })
                && matches!(source, Source::Url(..))
                && policy.auth().is_some())
        {
            return Err(fail(
                "`--upstream-exchange-client` exchanges callers' OAuth access tokens: it needs \
                 `--listen`, the policy's `[auth]` and `--upstream <url>`"
                    .to_owned(),
            ));
        }
        let metrics = self
            .metrics
            .map(|address| {
                crate::metrics::Endpoint::bind(
                    address,
                    self.metrics_token_file.as_deref(),
                    "capability proxy",
                )
            })
            .transpose()
            .map_err(fail)?;
        let mut sink = audit::open(&self.audit, &self.server, writer, signer).map_err(fail)?;
        if let Some(endpoint) = &metrics {
            sink = Arc::new(crate::metrics::MeteredSink::new(
                sink,
                endpoint.counters.clone(),
            ));
        }
        // Last, once everything else is known to be right; before the async runtime starts.
        let otlp = match &self.otlp {
            Some(endpoint) => Some(
                crate::otlp::start(endpoint, "capability-proxy", "capability proxy")
                    .map_err(fail)?,
            ),
            None => {
                crate::report::install("capability proxy");
                None
            }
        };
        Ok(Proxy {
            metrics,
            otlp,
            policy: Arc::new(policy),
            front,
            server,
            lock,
            sink,
            audit: self.audit,
            budget: self.budget,
            source,
            exchange: self.exchange,
        })
    }
}

impl Proxy {
    /// Connects to the server (spawning its command) and serves the client on standard input
    /// and output, or the clients over Streamable HTTP, until either side goes: `Ok` when the
    /// stdio client disconnected or a signal asked the proxy to stop (the server is then
    /// stopped), an error when the server could not be started or went away. The audit trail
    /// is closed (flushed) on every path.
    ///
    /// Call it inside a tokio runtime with the I/O and time drivers enabled.
    pub async fn run(mut self) -> Result<(), RunError> {
        if let Some(endpoint) = self.metrics.take() {
            tokio::spawn(endpoint.serve());
        }
        let otlp = self.otlp.take();
        let session = matches!(self.front, Front::Stdio { .. })
            .then(|| Session::start(Side::Server, Transport::Pipe));
        let (input, output) = front::standard_streams();
        let result = run::run(self, input, output).await;
        // The session's duration, then the last spans and durations sent.
        drop(session);
        drop(otlp);
        result
    }
}

/// Why the proxy stopped other than by the client disconnecting.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    /// The server's command could not be started.
    Spawn(String),
    /// The server did not connect, or did not list its tools.
    Connect(String),
    /// The server exited, or closed its output, while the client was connected.
    ServerGone(String),
    /// The client did not complete the MCP handshake.
    Client(String),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Spawn(m) | RunError::Connect(m) | RunError::ServerGone(m) => f.write_str(m),
            RunError::Client(m) => write!(f, "the client did not connect: {m}"),
        }
    }
}

impl std::error::Error for RunError {}

/// What the engine says to its operator (see [`crate::gateway`]'s `note`): printed by the
/// command as `<who>: <message>`.
pub(crate) fn note(message: fmt::Arguments<'_>) {
    crate::gateway::note(message);
}
