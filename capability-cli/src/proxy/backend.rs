//! The server's side of the proxy: a command spawned and spoken to over stdio, or a Streamable
//! HTTP endpoint (`--upstream <url>`); connected, and its tools listed, before any client is
//! served.

use std::ffi::OsString;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ::rmcp::RoleClient;
use ::rmcp::model::Tool;
use ::rmcp::service::{ClientServiceExt, RunningService};
use tokio::process::{Child, Command};

use capability::rmcp::list_tools;

use super::protocol::lifecycle;
use super::upstream::Upstream;
use super::{Proxy, RunError, Source, note};
use crate::supervise::strict::{Tap, strict_lines_tapped};

/// How long the server gets to connect (answer `server/discover` or `initialize`) and list its
/// tools.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the server gets to exit once its input is closed, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long a server that closed its output gets to exit before it counts as still running.
const STATUS_WAIT: Duration = Duration::from_millis(300);

/// The connection to the server, running.
pub(super) type Connection = RunningService<RoleClient, Upstream>;

/// Checks an `--upstream` URL: `http://` or `https://`, with a host.
pub(super) fn check_url(url: &str) -> Result<String, String> {
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

/// The server: a child process, or an HTTP endpoint.
pub(super) enum Backend {
    Child {
        child: Child,
        command: String,
        /// Why the server's output was cut off, once it was (a message past the bound).
        cut: Arc<OnceLock<String>>,
    },
    Http {
        url: String,
    },
}

/// How the server ended: its output cut off (said first, the exit it led to after), or its exit.
fn ended(command: &str, cut: &OnceLock<String>, status: std::io::Result<ExitStatus>) -> String {
    match cut.get() {
        Some(why) => format!("`{command}`'s output was cut off: {why}"),
        None => exited(command, status),
    }
}

/// Keeps why the server's output was cut off; takes no line; reads on only while the
/// server's progress is not piling up for a client that is behind.
struct Cut(Arc<OnceLock<String>>, super::progress::Relay);

impl Tap for Cut {
    fn take(&mut self, _line: &[u8]) -> bool {
        false
    }

    fn room(&mut self) -> impl std::future::Future<Output = ()> + Send {
        let relay = self.1.clone();
        async move { relay.room().await }
    }

    fn end(&mut self, why: Option<&str>) {
        if let Some(why) = why {
            let _ = self.0.set(why.to_owned());
        }
    }
}

fn exited(command: &str, status: std::io::Result<ExitStatus>) -> String {
    match status {
        Ok(status) => format!("`{command}` exited ({status})"),
        Err(error) => format!("`{command}` went away (cannot read its exit status: {error})"),
    }
}

impl Backend {
    /// Resolves when a child process exits, saying how; never for an HTTP endpoint (its end is
    /// the end of the connection).
    pub(super) async fn exited(&mut self) -> String {
        match self {
            Backend::Child {
                child,
                command,
                cut,
            } => {
                let status = child.wait().await;
                ended(command, cut, status)
            }
            Backend::Http { .. } => std::future::pending().await,
        }
    }

    /// Why the connection to the server ended: a child's exit status if it comes soon.
    pub(super) async fn why_closed(&mut self) -> String {
        match self {
            Backend::Child {
                child,
                command,
                cut,
            } => match tokio::time::timeout(STATUS_WAIT, child.wait()).await {
                Ok(status) => ended(command, cut, status),
                Err(_) => format!("`{command}` closed its standard output"),
            },
            Backend::Http { url } => format!("the connection to {url} ended"),
        }
    }

    /// Gives a child [`EXIT_GRACE`] to exit (its input is closed by then), then kills it.
    pub(super) async fn stop(&mut self) {
        if let Backend::Child { child, .. } = self
            && tokio::time::timeout(EXIT_GRACE, child.wait())
                .await
                .is_err()
        {
            let _ = child.kill().await;
        }
    }
}

/// Starts the server (spawns its command), connects to it and lists its tools.
pub(super) async fn connect(
    proxy: &Proxy,
    upstream: Upstream,
) -> Result<(Backend, Connection, Vec<Tool>), RunError> {
    match &proxy.source {
        Source::Command { program, args } => {
            let command = program.to_string_lossy().into_owned();
            let mut child = spawn(program, args)
                .map_err(|e| RunError::Spawn(format!("cannot start `{command}`: {e}")))?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                let _ = child.kill().await;
                return Err(RunError::Spawn(format!(
                    "cannot start `{command}`: its standard streams could not be captured"
                )));
            };
            // Every line the server writes is read strictly first: a message that writes a key
            // twice never reaches rmcp, which would keep the last of the two values.
            let cut = Arc::new(OnceLock::new());
            let (stdout, _checking) = strict_lines_tapped(
                stdout,
                |why| {
                    note(format_args!("{}", crate::escape::escape(why)));
                },
                Cut(cut.clone(), upstream.progress.clone()),
            );
            let connecting = async {
                let connection = upstream
                    .serve_with_lifecycle(crate::lines::rmcp_lines(stdout, stdin), lifecycle())
                    .await
                    .map_err(|e| format!("`{command}` did not connect: {e}"))?;
                list(proxy, connection, &command).await
            };
            let connected = tokio::select! {
                connected = tokio::time::timeout(CONNECT_TIMEOUT, connecting) => connected,
                status = child.wait() => {
                    return Err(RunError::Connect(format!(
                        "{} before it connected",
                        exited(&command, status)
                    )));
                }
            };
            let mut backend = Backend::Child {
                child,
                command,
                cut,
            };
            match settle(connected, backend.name()) {
                Ok((connection, tools)) => Ok((backend, connection, tools)),
                Err(error) => {
                    backend.stop().await;
                    Err(error)
                }
            }
        }
        Source::Url(url, token) => {
            let mut config =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    url.as_str(),
                );
            // The proxy's own credential for the server, configured on its own; what a client
            // presented stays at the edge.
            if let Some(token) = token {
                config = config.auth_header(token.0.clone());
            }
            let transport = super::pooled::transport(config)
                .map_err(|e| RunError::Connect(format!("{url}: {e}")))?;
            let connecting = async {
                let connection = upstream
                    .serve_with_lifecycle(transport, lifecycle())
                    .await
                    .map_err(|e| format!("{url} did not connect: {e}"))?;
                list(proxy, connection, url).await
            };
            let connected = tokio::time::timeout(CONNECT_TIMEOUT, connecting).await;
            let (connection, tools) = settle(connected, url)?;
            Ok((Backend::Http { url: url.clone() }, connection, tools))
        }
    }
}

impl Backend {
    fn name(&self) -> &str {
        match self {
            Backend::Child { command, .. } => command,
            Backend::Http { url } => url,
        }
    }
}

async fn list(
    proxy: &Proxy,
    connection: Connection,
    name: &str,
) -> Result<(Connection, Vec<Tool>), String> {
    let tools = list_tools(connection.peer(), &proxy.server)
        .await
        .map_err(|e| format!("`{name}`: {e}"))?;
    Ok((connection, tools))
}

fn settle<T>(
    connected: Result<Result<T, String>, tokio::time::error::Elapsed>,
    name: &str,
) -> Result<T, RunError> {
    match connected {
        Ok(Ok(connected)) => Ok(connected),
        Ok(Err(message)) => Err(RunError::Connect(message)),
        Err(_) => Err(RunError::Connect(format!(
            "`{name}` did not connect and list its tools within {} s",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

fn spawn(program: &OsString, args: &[OsString]) -> std::io::Result<Child> {
    Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // The server's log lines go where the proxy's go: standard error.
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
}
