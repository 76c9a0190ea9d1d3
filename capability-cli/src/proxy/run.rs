//! Running the proxy: spawn the server, connect to it, serve the client, list again when the
//! server says its tools changed, and shut both sides down when either goes.

use std::ffi::OsString;
use std::fmt;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ::rmcp::model::{ProtocolVersion, Tool};
use ::rmcp::service::{ClientLifecycleMode, ClientServiceExt, ServiceExt};
use ::rmcp::{Peer, RoleClient, RoleServer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use capability::Server;
use capability::audit::AuditedDispatch;
use capability::mcp::{DriftStatus, Lockfile};
use capability::rmcp::{FixedRole, GovernedServer, list_tools, tool_json};

use super::forward::{Forward, Gone, ToolCache, Upstream};
use super::{Proxy, front, note};

/// How long the server gets to connect (answer `server/discover` or `initialize`) and list its
/// tools.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the server gets to exit once its input is closed, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long answers already on their way (errors saying why the server is gone) get to reach
/// the client once the server is gone; more than a call waits to learn why.
const DRAIN: Duration = Duration::from_millis(800);
/// How long a server that closed its output gets to exit before it counts as still running.
const STATUS_WAIT: Duration = Duration::from_millis(300);
/// How long the last lines get to be written to the client.
const FLUSH: Duration = Duration::from_secs(2);

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

fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

fn exited(command: &str, status: std::io::Result<ExitStatus>) -> String {
    match status {
        Ok(status) => format!("`{command}` exited ({status})"),
        Err(error) => format!("`{command}` went away (cannot read its exit status: {error})"),
    }
}

/// Runs the proxy between `input`/`output` (the client) and a spawned server.
pub(super) async fn run<R, W>(proxy: Proxy, input: R, output: W) -> Result<(), RunError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let sink = Arc::clone(&proxy.sink);
    let result = serve(proxy, input, output).await;
    // The trail is closed (what is pending written) on every path.
    if let Err(error) = sink.close() {
        note(format_args!("the audit trail could not be closed: {error}"));
    }
    result
}

async fn serve<R, W>(proxy: Proxy, input: R, output: W) -> Result<(), RunError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let command = proxy.program.to_string_lossy().into_owned();
    let mut child = spawn(&proxy.program, &proxy.args)
        .map_err(|e| RunError::Spawn(format!("cannot start `{command}`: {e}")))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill().await;
        return Err(RunError::Spawn(format!(
            "cannot start `{command}`: its standard streams could not be captured"
        )));
    };

    // Connect and list, unless the server exits first.
    let (changed_tx, mut changed) = mpsc::unbounded_channel();
    let connect = async {
        let upstream = Upstream {
            changed: changed_tx,
        }
        .serve_with_lifecycle((stdout, stdin), lifecycle())
        .await
        .map_err(|e| format!("`{command}` did not connect: {e}"))?;
        let tools = list_tools(upstream.peer(), &proxy.server)
            .await
            .map_err(|e| format!("`{command}`: {e}"))?;
        Ok::<_, String>((upstream, tools))
    };
    let (upstream, tools) = tokio::select! {
        connected = tokio::time::timeout(CONNECT_TIMEOUT, connect) => match connected {
            Ok(Ok(connected)) => connected,
            Ok(Err(message)) => return Err(stop(&mut child, RunError::Connect(message)).await),
            Err(_) => {
                let message = format!(
                    "`{command}` did not connect and list its tools within {} s",
                    CONNECT_TIMEOUT.as_secs()
                );
                return Err(stop(&mut child, RunError::Connect(message)).await);
            }
        },
        status = child.wait() => {
            return Err(RunError::Connect(format!(
                "{} before it connected",
                exited(&command, status)
            )));
        }
    };
    review(&proxy.server, proxy.lock.as_deref(), &tools);
    let cache = ToolCache::default();
    cache.set(tools);

    let gone = Gone::default();
    let forward = Forward {
        upstream: upstream.peer().clone(),
        tools: cache.clone(),
        server: proxy.server.name().to_owned(),
        gone: gone.clone(),
    };
    let mut dispatch = AuditedDispatch::new(Arc::clone(&proxy.sink)).with_budget(proxy.budget);
    if let Some(version) = proxy.policy.version() {
        dispatch = dispatch.with_policy_version(version);
    }
    let mut governed = GovernedServer::new(
        forward,
        proxy.server.clone(),
        Arc::clone(&proxy.policy),
        FixedRole::new(proxy.role.clone()),
        Arc::new(dispatch),
    );
    if let Some(lock) = &proxy.lock {
        governed = governed.with_lockfile(Arc::clone(lock));
    }

    let filter = front::start(input, output);
    let upstream_peer = upstream.peer().clone();
    let upstream_stop = upstream.cancellation_token();
    let mut upstream_done = tokio::spawn(upstream.waiting());

    let front = tokio::select! {
        front = governed.serve(filter.transport) => front,
        status = child.wait() => {
            let message = format!("{} before the client connected", exited(&command, status));
            return Err(RunError::ServerGone(message));
        }
    };
    let front = match front {
        Ok(front) => front,
        Err(error) => {
            // Most often the client went away before its handshake.
            upstream_stop.cancel();
            let _ = stop(&mut child, ()).await;
            finish(filter.reader, filter.writer).await;
            return Err(RunError::Client(error.to_string()));
        }
    };
    note(format_args!(
        "serving `{}` to role `{}` ({} tools listed by the server)",
        proxy.server.name(),
        proxy.role,
        cache.get().len()
    ));
    let front_peer = front.peer().clone();
    let front_stop = front.cancellation_token();
    let mut front_done = tokio::spawn(front.waiting());

    // Watched from here on, once: a signal between two turns of the loop is not lost.
    let signalled = terminated();
    tokio::pin!(signalled);
    let ending = loop {
        tokio::select! {
            _ = &mut front_done => break Err("the client disconnected"),
            signal = &mut signalled => break Err(signal),
            status = child.wait() => break Ok(exited(&command, status)),
            _ = &mut upstream_done => {
                // Most often it is exiting: its status says more, if it comes soon.
                let why = match tokio::time::timeout(STATUS_WAIT, child.wait()).await {
                    Ok(status) => exited(&command, status),
                    Err(_) => format!("`{command}` closed its standard output"),
                };
                break Ok(why);
            }
            Some(()) = changed.recv() => {
                relist(&upstream_peer, &proxy.server, proxy.lock.as_deref(), &cache, &front_peer)
                    .await;
            }
        }
    };
    match ending {
        Err(cause) => {
            // The client went, or the proxy was asked to stop: stop the server (its input is
            // closed, then it is killed).
            front_stop.cancel();
            upstream_stop.cancel();
            let _ = stop(&mut child, ()).await;
            finish(filter.reader, filter.writer).await;
            note(format_args!("{cause}; the server was stopped"));
            Ok(())
        }
        Ok(why) => {
            gone.set(why.clone());
            // Answers to calls in flight (errors naming why) reach the client, then it is told
            // by the end of the proxy's output.
            tokio::time::sleep(DRAIN).await;
            front_stop.cancel();
            let _ = stop(&mut child, ()).await;
            finish(filter.reader, filter.writer).await;
            Err(RunError::ServerGone(format!(
                "the MCP server is gone: {why}"
            )))
        }
    }
}

/// SIGTERM, SIGINT or SIGHUP (on Windows, Ctrl-C): the proxy is asked to stop, and stops as
/// when the client disconnects. A signal that cannot be watched is never reported.
async fn terminated() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let watch = |kind| async move {
            match signal(kind) {
                Ok(mut stream) => {
                    stream.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = watch(SignalKind::terminate()) => "SIGTERM",
            () = watch(SignalKind::interrupt()) => "SIGINT",
            () = watch(SignalKind::hangup()) => "SIGHUP",
        }
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        "Ctrl-C"
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

/// Gives the server [`EXIT_GRACE`] to exit (its input is closed by then), then kills it.
async fn stop<T>(child: &mut Child, value: T) -> T {
    if tokio::time::timeout(EXIT_GRACE, child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
    value
}

/// Stops reading the client and lets the last lines out.
async fn finish(reader: tokio::task::JoinHandle<()>, writer: tokio::task::JoinHandle<()>) {
    reader.abort();
    let _ = tokio::time::timeout(FLUSH, writer).await;
}

/// Lists the server's tools again after `notifications/tools/list_changed`, reviews them
/// against the lockfile, and tells the client.
async fn relist(
    upstream: &Peer<RoleClient>,
    server: &Server,
    lock: Option<&Lockfile>,
    cache: &ToolCache,
    client: &Peer<RoleServer>,
) {
    match list_tools(upstream, server).await {
        Ok(tools) => {
            review(server, lock, &tools);
            cache.set(tools);
            if let Err(error) = client.notify_tool_list_changed().await {
                note(format_args!(
                    "cannot tell the client the tools changed: {error}"
                ));
            }
        }
        Err(error) => note(format_args!(
            "the server announced new tools, but listing them failed ({error}); the client \
             keeps the previous list"
        )),
    }
}

/// Says on standard error which tools drifted from the lockfile (they are hidden).
fn review(server: &Server, lock: Option<&Lockfile>, tools: &[Tool]) {
    let Some(lock) = lock else { return };
    let json: Result<Vec<_>, _> = tools.iter().map(tool_json).collect();
    let review = json
        .map_err(|e| e.to_string())
        .and_then(|json| lock.review(server, &json).map_err(|e| e.to_string()));
    match review {
        Ok(review) => {
            for tool in review.tools() {
                if *tool.status() != DriftStatus::Unchanged {
                    note(format_args!(
                        "drift: `{}/{}` {} since it was pinned; it is hidden until pinned again",
                        server.name(),
                        tool.manifest().name(),
                        tool.status()
                    ));
                }
            }
            for name in review.removed() {
                note(format_args!(
                    "drift: `{}/{name}` is pinned but no longer listed",
                    server.name()
                ));
            }
        }
        Err(error) => note(format_args!("the tools cannot be reviewed: {error}")),
    }
}
