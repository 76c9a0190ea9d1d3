//! An ops MCP server written the way rmcp users write servers (`#[tool_router]`, `#[tool]`,
//! `#[tool_handler]`), given capability manifests by one attribute, `#[tool_capabilities]`, and
//! served through `GovernedServer`: each caller lists only the tools its role may call, every
//! other call is refused before it reaches the code below, and every call is audited.
//!
//! ```text
//! cargo run --example rmcp_server -- --role viewer              # stdio, one fixed role
//! cargo run --example rmcp_server -- --http 127.0.0.1:8090      # Streamable HTTP at /mcp
//! ```
//!
//! Options:
//!
//! - `--role <role>`: stdio mode (the default transport): every request has this role.
//! - `--http <address>`: Streamable HTTP at `http://<address>/mcp` (port 0 picks a free port);
//!   the role comes from the request's `Authorization: Bearer <token>`.
//! - `--token <token>=<role>` (HTTP, repeatable), and `RMCP_SERVER_TOKENS=<token>=<role>,...`
//!   in the environment (out of the process list): the bearer-token table. Without any, two demo
//!   tokens are used and printed at startup: `operator-demo-token` (operator) and
//!   `viewer-demo-token` (viewer). A request without a token, or with a token not in the table,
//!   has no role: it lists no tool and every call is refused.
//! - `--audit <path>`: the JSON Lines audit trail, one hash-chained record per call, allowed or
//!   refused. Default: a trail of this process alone, `capability-rmcp-server-<role>-<pid>.jsonl`
//!   (`http` for the role over HTTP) in the system's temporary directory, printed at startup: a
//!   JSON Lines trail has one writer, so a second server (another role, the same one) never
//!   finds the default taken; give `--audit` to keep one trail across runs. Check it with
//!   `capability audit verify <path>`.
//! - `--checkpoint-key <path>`: a secret key from `capability keygen`; the trail's writer signs
//!   a checkpoint every 1,000 records or 10 seconds and when the server stops, so `capability
//!   audit verify <path> --key <path>.pub` finds records cut off its end.
//! - `--policy <path>`: the policy (default: `examples/rmcp_server_policy.toml`, compiled in):
//!   `operator` sees every tool, `viewer` (read-only ceiling) the read-only ones.
//! - `--journal <path>`: the (pretend) cluster appends one JSON line per tool that actually
//!   ran, so you can see that a refused call never reached the tool.
//! - `--manifests`: print each tool's capability manifest as a JSON line and exit.
//!
//! Everything but the MCP messages goes to stderr (in stdio mode, stdout is the MCP channel).
//! A bad flag prints the reason and the usage and exits with status 2.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use capability::audit::{AuditedDispatch, CheckpointEvery, FlushPolicy, JsonlSink};
use capability::gate::SecretKey;
use capability::{Policy, Registry, Server};
// In your crate: `capability = { features = ["rmcp-server"] }` and `capability::rmcp::...`.
use capability_http::{Credentials, Edge, EdgeConfig, EdgeRoles};
use capability_mcp::rmcp::{BearerRoles, ByTable, FixedRole, GovernedServer};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde_json::{Value, json};

/// The policy used without `--policy`.
const POLICY: &str = include_str!("rmcp_server_policy.toml");
/// The bearer tokens used over HTTP without `--token`: demo values, printed at startup.
const DEMO_TOKENS: [(&str, &str); 2] = [
    ("operator-demo-token", "operator"),
    ("viewer-demo-token", "viewer"),
];
/// The environment variable with more of the bearer-token table: `token=role,token=role`.
const TOKENS_ENV: &str = "RMCP_SERVER_TOKENS";
/// The start of the audit trail's name in the temporary directory, without `--audit`: the
/// role (or `http`) and the process id follow, so two servers never share it.
const DEFAULT_AUDIT: &str = "capability-rmcp-server";

const USAGE: &str =
    "usage: rmcp_server [--role <role> | --http <address> [--token <token>=<role>]...]
                  [--audit <path>] [--checkpoint-key <path>] [--policy <path>]
                  [--journal <path>]
       rmcp_server --manifests
environment: RMCP_SERVER_TOKENS=<token>=<role>,... (with --http: more of the token table)";

/// A pod, by name.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct PodRef {
    /// The pod's name, e.g. `web-1`.
    name: String,
}

/// A PromQL query.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct MetricsQuery {
    /// The query, e.g. `up{job="web"}`.
    query: String,
}

/// A deployment and its wanted replica count.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct ScaleRequest {
    /// The deployment.
    deployment: String,
    /// How many replicas it should run.
    replicas: u32,
}

/// The ops server: a pretend Kubernetes cluster.
#[derive(Clone)]
struct Ops {
    /// Where each tool that runs is written down (`--journal`).
    journal: Option<Arc<PathBuf>>,
}

#[capability::tool_capabilities]
#[tool_router]
impl Ops {
    /// The status of one pod.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    #[capability(scopes = ["k8s:read"], provider = "k8s")]
    fn get_pod_status(&self, Parameters(pod): Parameters<PodRef>) -> String {
        self.ran("get_pod_status", json!({"name": pod.name}));
        format!("pod {}: Running, 1/1 ready, 0 restarts", pod.name)
    }

    /// Run a PromQL query against the cluster's metrics.
    #[tool(annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false))]
    #[capability(scopes = ["metrics:read"], provider = "k8s")]
    fn query_metrics(&self, Parameters(q): Parameters<MetricsQuery>) -> String {
        self.ran("query_metrics", json!({"query": q.query}));
        format!("{}: 1 series, last value 1", q.query)
    }

    /// List the deployments of the cluster.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    #[capability(scopes = ["k8s:read"], provider = "k8s")]
    fn list_deployments(&self) -> String {
        self.ran("list_deployments", json!({}));
        "web (3/3), api (2/2), worker (1/1)".to_owned()
    }

    /// Restart a pod: delete it and let its deployment start a new one.
    #[tool(annotations(destructive_hint = true, open_world_hint = false))]
    #[capability(scopes = ["k8s:write"], provider = "k8s")]
    fn restart_pod(&self, Parameters(pod): Parameters<PodRef>) -> String {
        self.ran("restart_pod", json!({"name": pod.name}));
        format!("pod {} restarted", pod.name)
    }

    /// Scale a deployment to a number of replicas.
    #[tool(annotations(
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    #[capability(scopes = ["k8s:write"], provider = "k8s")]
    fn scale_deployment(&self, Parameters(scale): Parameters<ScaleRequest>) -> String {
        let args = json!({"deployment": scale.deployment, "replicas": scale.replicas});
        self.ran("scale_deployment", args);
        format!(
            "deployment {} scaled to {}",
            scale.deployment, scale.replicas
        )
    }
}

#[tool_handler(name = "ops", instructions = "A pretend Kubernetes cluster.")]
impl ServerHandler for Ops {}

impl Ops {
    /// Writes down that `tool` ran, in the journal if there is one.
    fn ran(&self, tool: &str, arguments: Value) {
        let Some(path) = &self.journal else { return };
        let line = json!({"tool": tool, "arguments": arguments}).to_string();
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path.as_path())
            .and_then(|mut file| writeln!(file, "{line}"));
        if let Err(e) = written {
            eprintln!(
                "rmcp_server: cannot write the journal {}: {e}",
                path.display()
            );
        }
    }
}

/// What the command line asks for.
enum Mode {
    Stdio {
        role: String,
    },
    Http {
        address: SocketAddr,
        tokens: Vec<(String, String)>,
    },
    Manifests,
}

struct Options {
    mode: Mode,
    audit: PathBuf,
    policy: Option<PathBuf>,
    journal: Option<PathBuf>,
    /// The secret key that signs the trail's checkpoints (`--checkpoint-key`).
    checkpoint_key: Option<PathBuf>,
}

/// Sets a flag's value, refusing a second one.
fn once<T>(slot: &mut Option<T>, value: T, flag: &str) -> Result<(), String> {
    match slot.replace(value) {
        Some(_) => Err(format!("{flag} is given twice")),
        None => Ok(()),
    }
}

/// One entry of the token table: `<token>=<role>`.
fn token_entry(text: &str, from: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .filter(|(t, r)| !t.is_empty() && !r.is_empty())
        .map(|(t, r)| (t.to_owned(), r.to_owned()))
        // The entry is not echoed: it may hold a token.
        .ok_or(format!("{from}: expected <token>=<role>"))
}

fn parse(
    mut args: impl Iterator<Item = String>,
    env_tokens: Option<String>,
) -> Result<Options, String> {
    let (mut role, mut http, mut tokens, mut manifests) = (None, None, Vec::new(), false);
    let (mut audit, mut policy, mut journal, mut checkpoint_key) = (None, None, None, None);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "--role" => once(&mut role, value("--role")?, "--role")?,
            "--http" => {
                let text = value("--http")?;
                let address = text.parse().map_err(|e| {
                    format!("--http {text:?}: not an address like 127.0.0.1:8090 ({e})")
                })?;
                once(&mut http, address, "--http")?;
            }
            "--token" => tokens.push(token_entry(&value("--token")?, "--token")?),
            "--audit" => once(&mut audit, PathBuf::from(value("--audit")?), "--audit")?,
            "--policy" => once(&mut policy, PathBuf::from(value("--policy")?), "--policy")?,
            "--checkpoint-key" => once(
                &mut checkpoint_key,
                PathBuf::from(value("--checkpoint-key")?),
                "--checkpoint-key",
            )?,
            "--journal" => once(
                &mut journal,
                PathBuf::from(value("--journal")?),
                "--journal",
            )?,
            "--manifests" => manifests = true,
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let mode = match (role, http, manifests) {
        (None, None, true) => Mode::Manifests,
        (_, _, true) => return Err("--manifests takes no other mode".to_owned()),
        (Some(_), Some(_), _) => return Err("give --role (stdio) or --http, not both".to_owned()),
        (Some(_), None, _) if !tokens.is_empty() => {
            return Err("--token is for --http; over stdio the role is --role".to_owned());
        }
        (Some(role), None, _) => Mode::Stdio { role },
        (None, Some(address), _) => {
            // The table from the environment, kept out of the process list.
            for entry in env_tokens.iter().flat_map(|v| v.split(',')) {
                let entry = entry.trim();
                if !entry.is_empty() {
                    tokens.push(token_entry(entry, TOKENS_ENV)?);
                }
            }
            Mode::Http { address, tokens }
        }
        (None, None, _) => return Err("give --role <role> (stdio) or --http <address>".to_owned()),
    };
    // A trail has one writer: the default is this process's own.
    let default_audit = || {
        let who = match &mode {
            Mode::Stdio { role } => role.as_str(),
            Mode::Http { .. } | Mode::Manifests => "http",
        };
        // A role's name is the policy's: anything but a letter, digit, `-` or `_` becomes `_`.
        let who: String = who
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
                _ => '_',
            })
            .collect();
        let name = format!("{DEFAULT_AUDIT}-{who}-{}.jsonl", std::process::id());
        std::env::temp_dir().join(name)
    };
    Ok(Options {
        audit: audit.unwrap_or_else(default_audit),
        mode,
        policy,
        journal,
        checkpoint_key,
    })
}

fn main() -> ExitCode {
    let args: Result<Vec<String>, _> = std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect();
    let env_tokens = std::env::var_os(TOKENS_ENV).map(|v| v.into_string());
    let parsed = match (args, env_tokens) {
        (Err(arg), _) => Err(format!("an argument is not UTF-8: {arg:?}")),
        (_, Some(Err(_))) => Err(format!("{TOKENS_ENV} is not UTF-8")),
        (Ok(args), env_tokens) => parse(args.into_iter(), env_tokens.and_then(Result::ok)),
    };
    let options = match parsed {
        Ok(options) => options,
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("rmcp_server: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("rmcp_server: {message}\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(message)) => {
            eprintln!("rmcp_server: {message}");
            ExitCode::FAILURE
        }
    }
}

enum Failure {
    /// The command line asks for something impossible (exit 2).
    Usage(String),
    /// Something went wrong while serving (exit 1).
    Runtime(String),
}

fn runtime(e: impl std::fmt::Display) -> Failure {
    Failure::Runtime(e.to_string())
}

fn run(options: Options) -> Result<(), Failure> {
    let policy = match &options.policy {
        Some(path) => Policy::from_toml_file(path),
        None => Policy::from_toml_str(POLICY),
    }
    .map_err(|e| Failure::Usage(format!("the policy: {e}")))?;
    let roles: Vec<String> = policy.roles().map(str::to_owned).collect();
    let known = |role: &str| {
        if roles.iter().any(|r| r == role) {
            Ok(())
        } else {
            Err(Failure::Usage(format!(
                "role {role:?} is not in the policy (roles: {})",
                roles.join(", ")
            )))
        }
    };
    // Who is calling: checked before anything is opened or served.
    let caller = match options.mode {
        Mode::Manifests => return print_manifests(),
        Mode::Stdio { role } => {
            known(&role)?;
            Caller::Fixed(role)
        }
        Mode::Http { address, tokens } if policy.auth().is_some() => {
            if !tokens.is_empty() {
                return Err(Failure::Usage(
                    "--token and RMCP_SERVER_TOKENS are the token table; this policy's [auth] \
                     names an authorization server, whose access tokens are taken instead"
                        .to_owned(),
                ));
            }
            Caller::Bearer(address, BearerRoles::new())
        }
        Mode::Http { address, tokens } => {
            let tokens = if tokens.is_empty() {
                eprintln!(
                    "rmcp_server: no --token or {TOKENS_ENV} given; DEMO tokens (do not deploy):"
                );
                DEMO_TOKENS
                    .iter()
                    .map(|(t, r)| {
                        eprintln!("rmcp_server:   Authorization: Bearer {t}  -> role {r}");
                        (t.to_string(), r.to_string())
                    })
                    .collect()
            } else {
                tokens
            };
            let mut table = BearerRoles::new();
            for (token, role) in &tokens {
                known(role)?;
                table = table.token(token, role.clone());
            }
            Caller::Bearer(address, table)
        }
    };

    // The key is read before the trail is opened: a bad key file starts nothing.
    let signer = match &options.checkpoint_key {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::Usage(format!(
                    "cannot read the checkpoint key {}: {e}",
                    path.display()
                ))
            })?;
            let key = SecretKey::from_text(&text).map_err(|e| {
                Failure::Usage(format!(
                    "{} is not a secret key from `capability keygen`: {e}",
                    path.display()
                ))
            })?;
            Some(Arc::new(key))
        }
        None => None,
    };
    let mut sink = JsonlSink::open(&options.audit, FlushPolicy::EveryRecord).map_err(|e| {
        Failure::Runtime(format!("the audit trail {}: {e}", options.audit.display()))
    })?;
    if let Some(signer) = signer {
        sink = sink.with_checkpoints(signer, CheckpointEvery::default());
    }
    eprintln!("rmcp_server: audit trail {}", options.audit.display());
    // No budget (`AuditedDispatch::new`'s default): a server's sessions are its clients', as
    // long as they live, and a refused call refuses only itself.
    let dispatch = Arc::new(AuditedDispatch::new(Arc::new(sink)));
    let ops = Ops {
        journal: options.journal.map(Arc::new),
    };
    let policy = Arc::new(policy);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(runtime)?;
    match caller {
        Caller::Fixed(role) => {
            eprintln!("rmcp_server: serving stdio as role {role}");
            let resolver = FixedRole::new(role);
            let server =
                GovernedServer::new(ops, Server::trusted("k8s"), policy, resolver, dispatch);
            tokio.block_on(serve_stdio(server))
        }
        Caller::Bearer(address, table) => tokio.block_on(async {
            // The policy's [auth] (OAuth access tokens) when it has one, else the token table.
            let credentials = match policy.auth() {
                Some(_) => Credentials::from_policy(&policy)
                    .await
                    .map_err(Failure::Usage)?,
                None => Credentials::Tokens(table),
            };
            let server = GovernedServer::new(
                ops,
                Server::trusted("k8s"),
                Arc::clone(&policy),
                EdgeRoles,
                Arc::clone(&dispatch),
            );
            let config = EdgeConfig::new(credentials, policy.http().clone())
                .recording(dispatch, server.server(), policy.version())
                .tools(server.listings().clone());
            serve_http(server, config, address).await
        }),
    }
}

/// How the caller's role is found.
enum Caller {
    /// Over stdio: one role.
    Fixed(String),
    /// Over HTTP at this address: from the bearer token.
    Bearer(SocketAddr, BearerRoles),
}

async fn serve_stdio(server: impl ServerHandler) -> Result<(), Failure> {
    // The method table is the door: a method without a row never reaches the server.
    let running = ByTable::new(server)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Failure::Runtime(format!("stdio: {e}")))?;
    running.waiting().await.map_err(runtime)?;
    Ok(())
}

async fn serve_http<S>(server: S, edge: EdgeConfig, address: SocketAddr) -> Result<(), Failure>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| Failure::Runtime(format!("cannot listen on {address}: {e}")))?;
    let bound = listener.local_addr().map_err(runtime)?;
    let manager = Arc::new(LocalSessionManager::default());
    let server = ByTable::new(server);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::clone(&manager),
        StreamableHttpServerConfig::default(),
    );
    // Who is calling, Origin, sessions and limits, before rmcp sees the request.
    let edge = Edge::new(service, edge.sessions(manager));
    // The line a script (or a test) waits for.
    eprintln!("rmcp_server: listening on http://{bound}/mcp");
    loop {
        let (stream, _) = listener.accept().await.map_err(runtime)?;
        let _ = stream.set_nodelay(true);
        let edge = edge.clone();
        tokio::spawn(async move {
            let handler = service_fn(move |request: hyper::Request<Incoming>| {
                let edge = edge.clone();
                async move { Ok::<_, std::convert::Infallible>(edge.serve(request).await) }
            });
            let io = TokioIo::new(stream);
            if let Err(e) = http1::Builder::new().serve_connection(io, handler).await {
                eprintln!("rmcp_server: connection: {e}");
            }
        });
    }
}

fn print_manifests() -> Result<(), Failure> {
    let registry = Registry::from_inventory().map_err(runtime)?;
    let mut out = std::io::stdout().lock();
    for m in registry.tools() {
        let line = json!({
            "name": m.name(),
            "provider": m.provider(),
            "read_only": m.read_only(),
            "destructive": m.destructive(),
            "idempotent": m.idempotent(),
            "open_world": m.open_world(),
            "scopes": m.required_scopes(),
            "descriptor_hash": m.descriptor_hash(),
        });
        writeln!(out, "{line}").map_err(runtime)?;
    }
    Ok(())
}
