//! The server, connected: what the stdio front and the HTTP front share (the governed handler,
//! listing again, the server's end, the signals that stop the proxy).

use std::sync::Arc;
use std::time::Duration;

use ::rmcp::model::Tool;
use ::rmcp::service::RunningServiceCancellationToken;
use ::rmcp::{Peer, RoleClient};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use capability::Server;
use capability::audit::AuditedDispatch;
use capability::mcp::{DriftStatus, Lockfile};
use capability::rmcp::{GovernedServer, RoleResolver, ToolListings, list_tools, tool_json};

use super::backend::Backend;
use super::delegate::Delegated;
use super::forward::{Changed, Clients, Forward};
use super::gone::Gone;
use super::upstream::{Event, ServerRequests};
use super::{Proxy, RunError, note};
use crate::escape::escape;
use capability::mcp::telemetry::Transport;

/// How long answers already on their way (errors saying why the server is gone) get to reach
/// the client once the server is gone; more than a call waits to learn why.
const DRAIN: Duration = Duration::from_millis(800);

/// The server, connected and listed; what either front needs to serve it.
pub(super) struct Connected {
    pub(super) backend: Backend,
    pub(super) upstream: Peer<RoleClient>,
    pub(super) upstream_stop: RunningServiceCancellationToken,
    pub(super) upstream_done: JoinHandle<()>,
    pub(super) events: mpsc::UnboundedReceiver<Event>,
    pub(super) listings: ToolListings,
    pub(super) gone: Gone,
    pub(super) dispatch: Arc<AuditedDispatch>,
    pub(super) requests: Arc<ServerRequests>,
    /// The server's progress for the calls passed on (its connection's).
    pub(super) progress: super::progress::Relay,
}

/// The server's events that arrived together: each list changed at most once, and the
/// resources updated.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) changed: Vec<Changed>,
    pub(super) updated: Vec<::rmcp::model::ResourceUpdatedNotificationParam>,
}

impl Connected {
    /// `first`, and every event that arrived behind it: a storm of notifications becomes one
    /// relist (at most one in flight, one pending).
    pub(super) fn coalesce(&mut self, first: Event) -> Pending {
        let mut pending = Pending::default();
        let mut add = |event: Event| match event {
            Event::Changed(list) => {
                if !pending.changed.contains(&list) {
                    pending.changed.push(list);
                }
            }
            Event::ResourceUpdated(params) => {
                if !pending.updated.iter().any(|p| p.uri == params.uri) {
                    pending.updated.push(params);
                }
            }
        };
        add(first);
        while let Ok(event) = self.events.try_recv() {
            add(event);
        }
        pending
    }

    /// What a changed list means for the clients: `true` when they should be told. The tools
    /// are listed again and reviewed (told only when what the clients see changed); resources
    /// and prompts are passed on when the policy forwards them.
    pub(super) async fn changed(&self, proxy: &Proxy, list: Changed) -> bool {
        match list {
            Changed::Tools => self.relist(&proxy.server, proxy.lock.as_deref()).await,
            Changed::Resources => forwards(proxy, true),
            Changed::Prompts => forwards(proxy, false),
        }
    }

    /// Lists the server's tools again after `notifications/tools/list_changed` and reviews
    /// them against the lockfile; `true` when they changed, and the clients should be told.
    pub(super) async fn relist(&self, server: &Server, lock: Option<&Lockfile>) -> bool {
        match list_tools(&self.upstream, server).await {
            Ok(tools) => {
                review(server, lock, &tools);
                match self.listings.set(tools) {
                    Ok(changed) => changed,
                    Err(error) => {
                        note(format_args!(
                            "the server's new tool list is refused ({}); the clients keep the \
                             previous list",
                            escape(&error.message)
                        ));
                        false
                    }
                }
            }
            Err(error) => {
                note(format_args!(
                    "the server announced new tools, but listing them failed ({}); the \
                     clients keep the previous list",
                    escape(&error.to_string())
                ));
                false
            }
        }
    }

    /// The server is gone: calls in flight get their errors naming why, then the front and
    /// the server are stopped.
    pub(super) async fn gone(mut self, why: String, stop_front: impl FnOnce()) -> RunError {
        self.gone.set(why.clone());
        tokio::time::sleep(DRAIN).await;
        stop_front();
        self.upstream_stop.cancel();
        self.backend.stop().await;
        RunError::ServerGone(format!("the MCP server is gone: {why}"))
    }
}

/// Resolves when the server is gone, saying why: a child process exited; for an HTTP endpoint,
/// a call's connection to it failed (rmcp's client does not get a session back from a server
/// that restarted, so the proxy stops as it does when a command exits).
pub(super) async fn server_gone(backend: &mut Backend, gone: &Gone) -> String {
    match backend {
        Backend::Http { url } => {
            let error = gone.broken().await;
            format!("the connection to {url} failed: {error}")
        }
        Backend::Child { .. } => backend.exited().await,
    }
}

/// The proxy's audited dispatch: its budget, the policy's version.
pub(super) fn dispatch(proxy: &Proxy) -> Arc<AuditedDispatch> {
    let mut dispatch = AuditedDispatch::new(Arc::clone(&proxy.sink)).with_budget(proxy.budget);
    if let Some(version) = proxy.policy.version() {
        dispatch = dispatch.with_policy_version(version);
    }
    Arc::new(dispatch)
}

/// The governed front of the proxy, with the resolver of its callers' roles.
pub(super) fn governed(
    proxy: &Proxy,
    connected: &Connected,
    resolver: impl RoleResolver,
    clients: Option<Clients>,
    delegated: Option<Arc<Delegated>>,
) -> GovernedServer<Forward> {
    // The policy's `[servers.<name>]` entry says whether resources and prompts go through.
    let entry = proxy
        .policy
        .servers()
        .iter()
        .find(|e| e.name() == proxy.server.name());
    let forward = Forward {
        upstream: connected.upstream.clone(),
        progress: connected.progress.clone(),
        listings: connected.listings.clone(),
        server: proxy.server.name().to_owned(),
        transport: match connected.backend {
            Backend::Http { .. } => Transport::Tcp,
            Backend::Child { .. } => Transport::Pipe,
        },
        gone: connected.gone.clone(),
        clients,
        resources: entry.is_some_and(|e| e.forwards_resources()),
        prompts: entry.is_some_and(|e| e.forwards_prompts()),
        delegated,
    };
    GovernedServer::new(
        forward,
        proxy.server.clone(),
        Arc::clone(&proxy.policy),
        resolver,
        Arc::clone(&connected.dispatch),
    )
    .with_listings(connected.listings.clone())
}

/// SIGTERM, SIGINT or SIGHUP (on Windows, Ctrl-C): the proxy is asked to stop, and stops as
/// when the client disconnects. A signal that cannot be watched is never reported.
pub(super) async fn terminated() -> &'static str {
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

/// Says on standard error which tools drifted from the lockfile (they are hidden).
pub(super) fn review(server: &Server, lock: Option<&Lockfile>, tools: &[Tool]) {
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
                        escape(tool.manifest().name()),
                        escape(&tool.status().to_string())
                    ));
                }
            }
            for name in review.removed() {
                note(format_args!(
                    "drift: `{}/{}` is pinned but no longer listed",
                    server.name(),
                    escape(name)
                ));
            }
        }
        Err(error) => note(format_args!(
            "the tools cannot be reviewed: {}",
            escape(&error)
        )),
    }
}

/// Whether the policy's `[servers.<name>]` entry lets the server's resources (or prompts)
/// through.
pub(super) fn forwards(proxy: &Proxy, resources: bool) -> bool {
    proxy
        .policy
        .servers()
        .iter()
        .find(|e| e.name() == proxy.server.name())
        .is_some_and(|e| {
            if resources {
                e.forwards_resources()
            } else {
                e.forwards_prompts()
            }
        })
}
