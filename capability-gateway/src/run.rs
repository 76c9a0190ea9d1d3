//! `capability gateway --role <role> --audit <trail>`: the fleet served to one MCP client over
//! standard input and output, and kept running.
//!
//! - **A server that dies** fails the calls routed to it (saying why); the others keep serving.
//!   It is started again after [`FIRST_BACKOFF`], doubling up to [`MAX_BACKOFF`] while it keeps
//!   failing; once it is back, it is listed again and the client told.
//! - **A server's list change** (`notifications/tools/list_changed`): it is listed again, the
//!   listing rebuilt and the client told.
//! - **`SIGHUP`** reloads the policy file, the servers and their lockfiles, and over HTTP the
//!   edge's `[auth]`, `[bearer_tokens]` and `[http]` (sessions and rates kept): everything is
//!   read, fetched and started first; a server whose entry did not change keeps running (its lockfile is read
//!   again); only when all of it holds is it swapped in, at once, and the client told. A bad
//!   file, a server that does not start, a role the new file lacks: what runs keeps running, and
//!   the gateway says why. Each reload, done or refused, is an audit record (`gateway/reload`)
//!   carrying the policy version.
//! - **`--watch`**: a change of the policy file or of a lockfile (its length, modification time,
//!   inode or bytes, looked at every 200 ms) reloads as `SIGHUP` does once the files have stayed
//!   the same for a second, and only if the policy file still holds what was parsed: a file
//!   written in place in several writes is never applied half-written. A change that is
//!   refused is not tried again until the files change again.
//! - **`SIGTERM`, `SIGINT`**, or the client leaving: the servers are stopped, then the lane's
//!   calls' ends are waited for (10 s at most: each answers, records its outcome and ends its
//!   spans on the thread that heard it) before the trail is closed.

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use ::rmcp::ServiceExt;
use tokio::sync::mpsc;

use capability::Policy;
use capability::audit::AuditedDispatch;

use crate::GatewayError;
use crate::serve::approvals::Approvals;
use crate::serve::clients::Changed;
use crate::serve::gateway::Gateway;
use crate::spec::Servers;

use crate::fleet::members::{
    Gate, Member, names, rebuild, report_collisions, restart_down, snapshot,
};
use crate::fleet::reload::{Reloading, Stamp, reload_now};

/// How often servers that are down are looked at.
const TICK: Duration = Duration::from_millis(200);

/// Where the gateway's clients are.
#[derive(Debug)]
pub enum Front {
    /// One client on standard input and output, of this role.
    Stdio(String),
    /// Streamable HTTP on this socket, behind the HTTP edge: each request's role from its
    /// token (the policy's `[auth]` or `[bearer_tokens]`).
    Http(std::net::TcpListener),
}

impl Front {
    /// The role its trail's writer is named after: the stdio client's, or `http`.
    pub fn role(&self) -> &str {
        match self {
            Front::Stdio(role) => role,
            Front::Http(_) => "http",
        }
    }
}

/// How the engine runs beyond its policy: what a command chooses ([`crate::Builder`]).
#[derive(Clone, Debug)]
pub(crate) struct Engine {
    /// The name it gives itself, to clients and servers and in its refusals
    /// (`capability-gateway`, `capability-proxy`).
    pub(crate) name: &'static str,
    /// Where its servers come from.
    pub(crate) servers: Servers,
    /// Whether a server that dies is started again (with backoff); else the engine stops,
    /// with an error saying why (`capability proxy`, whose client sees its one server go).
    pub(crate) restart: bool,
    /// How long the engine waits, once its servers are stopped, for the lane's calls to end
    /// and record their outcomes before it closes the trail.
    pub(crate) drain: std::time::Duration,
}

impl Engine {
    /// What sessions are named under: a proxy's one server, else `gateway`.
    pub(crate) fn scope(&self) -> &str {
        match &self.servers {
            Servers::Given(specs) if specs.len() == 1 && self.name != crate::GATEWAY_NAME => {
                &specs[0].name
            }
            _ => "gateway",
        }
    }
}

/// Starts every server, serves the clients until the stdio client goes (or a signal), then
/// stops the servers.
#[allow(clippy::too_many_arguments)] // what one run is made of, from the builder
pub(crate) async fn serve(
    engine: &Engine,
    policy: Policy,
    policy_path: &Path,
    front: Front,
    dispatch: Arc<AuditedDispatch>,
    watch: bool,
    audit: &str,
    metrics: Option<Arc<crate::metrics::Metrics>>,
    shutdown: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
) -> Result<Ended, GatewayError> {
    let mut shutdown = shutdown;
    let servers = &engine.servers;
    let base = policy_path.parent().unwrap_or(Path::new(".")).to_owned();
    let role = match &front {
        Front::Stdio(role) => Some(role.clone()),
        Front::Http(_) => None,
    };
    let role = role.as_deref();
    let (changed_tx, mut changed) = mpsc::unbounded_channel();
    let gate = Gate {
        role: role.map(str::to_owned),
        dispatch: dispatch.clone(),
        front: Arc::default(),
        audit: Arc::from(audit),
        levels: crate::upstream::relay::Levels::default(),
        name: engine.name,
        scope: Arc::from(engine.scope()),
    };
    // Before any server starts: a gateway that cannot keep approvals once serves nothing.
    let approvals = Approvals::open(&policy, &base, Some(audit)).map_err(GatewayError::Config)?;
    let mut members = Vec::new();
    for spec in servers
        .specs(&policy, &base)
        .map_err(GatewayError::Config)?
    {
        members.push(Member::start(spec, changed_tx.clone(), &gate, &policy).await?);
    }
    let mut first =
        snapshot(members.iter().map(Member::view), &policy, role).map_err(GatewayError::Config)?;
    first.approvals = approvals;
    report_collisions(&first);
    let gateway = Gateway {
        role: role.map(str::to_owned),
        dispatch: dispatch.clone(),
        current: Arc::new(RwLock::new(Arc::new(first))),
        clients: role.is_none().then(crate::serve::clients::Clients::default),
        versions: crate::fleet::versions::store_of(audit),
        levels: gate.levels.clone(),
        name: engine.name,
        scope: gate.scope.clone(),
    };
    gateway.saw_tools(&gateway.current());
    if let Some(metrics) = metrics {
        let watched = gateway.clone();
        metrics.count_pending(move || watched.pending_proposals());
    }
    let count = if members.len() == 1 {
        "1 server".to_owned()
    } else {
        format!("{} servers", members.len())
    };
    let mut http_front = None;
    // The lane's calls, whose ends are waited for once the servers are stopped.
    let mut lane = None;
    // The stdio client's lines, written before the engine ends.
    let mut to_client = None;
    let (client, waiting) = match front {
        Front::Stdio(role) => {
            crate::note(format_args!(
                "serving {count} ({}) to a client of role `{role}` on standard input and output",
                names(&members)
            ));
            // `tools/call` takes the forwarding lane where it can; everything else is rmcp's.
            // The client is read and written on threads of its own (the lane's calls are
            // handled there), or, where its streams cannot be had as blocking files, on the
            // runtime.
            let fast = crate::lane::Fast::new(gateway.clone());
            lane = Some(fast.clone());
            let filter = match crate::front::stdio::start_threaded(fast.clone()) {
                Ok(filter) => filter,
                Err(_) => {
                    let (input, output) = crate::front::stdio::standard_streams();
                    crate::front::stdio::start_with(input, output, Some(fast))
                }
            };
            to_client = Some(filter.out);
            let transport = filter.transport;
            let running =
                // Every message rmcp's path takes goes through the method table first.
                capability::rmcp::ByTable::new(gateway.clone()).serve(transport).await.map_err(|e| {
                    GatewayError::Config(format!("the client did not connect: {e}"))
                })?;
            // A client of 2026-07-28 has no handshake: rmcp serves from its first request,
            // which it takes itself; the lane takes calls of such a client from then on.
            if let Some(fast) = &lane {
                fast.rmcp_serves();
            }
            let client = running.peer().clone();
            // The servers' requests go to this client from now on (where its role allows).
            let _ = gate.front.set(client.clone());
            let waiting: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
                Box::pin(async move {
                    let _ = running.waiting().await;
                });
            (Some(client), waiting)
        }
        Front::Http(listener) => {
            let (served, front) =
                crate::front::http::start(&gateway, &policy, listener, dispatch.clone(), audit)
                    .await?;
            http_front = Some(front);
            crate::note(format_args!(
                "serving {count} ({}) over Streamable HTTP; listening on {served}",
                names(&members)
            ));
            let waiting: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
                Box::pin(std::future::pending());
            (None, waiting)
        }
    };
    let mut waiting = waiting;
    let mut gone = None;
    let mut signals = Signals::new();
    let mut tick = tokio::time::interval(TICK);
    let mut reloading = Reloading {
        path: policy_path,
        base: &base,
        role,
        changed: changed_tx.clone(),
        http: http_front,
        gateway: gateway.clone(),
        client: client.clone(),
        gate,
        stamp: Stamp::of(policy_path, &members),
        pending: None,
        policy,
        members,
        servers,
    };
    loop {
        tokio::select! {
            () = &mut waiting => break,
            () = &mut shutdown => {
                crate::note(format_args!("asked to stop: stopping the servers"));
                break;
            }
            signal = signals.next() => {
                let Some(stop) = signal else {
                    reload_now(&mut reloading, "SIGHUP").await;
                    continue;
                };
                crate::note(format_args!("{stop}: stopping the servers"));
                break;
            }
            Some(server) = changed.recv() => {
                let mut servers = vec![server];
                while let Ok(more) = changed.try_recv() {
                    servers.push(more);
                }
                let mut kinds = Vec::new();
                for member in reloading.members.iter_mut().filter(|m| servers.contains(&m.spec.name)) {
                    let peer = member.connection.peer();
                    match crate::upstream::list(&peer, &member.server).await {
                        Ok(tools) if tools != member.tools => {
                            crate::fleet::members::review(&member.server, member.lock.as_ref(), &tools, &reloading.gate.dispatch);
                            member.tools = tools;
                            kinds.push(Changed::Tools);
                        }
                        Ok(_) => {}
                        Err(why) => crate::note(format_args!("server `{}`: {why}", member.spec.name)),
                    }
                    let spec = &member.spec;
                    let items = crate::upstream::list_served_items(&peer, &spec.name, spec.resources, spec.prompts).await;
                    if items.resources != member.items.resources
                        || items.templates != member.items.templates
                    {
                        kinds.push(Changed::Resources);
                    }
                    if items.prompts != member.items.prompts {
                        kinds.push(Changed::Prompts);
                    }
                    member.items = items;
                }
                kinds.sort_by_key(|k| *k as u8);
                kinds.dedup();
                rebuild(&gateway, &reloading.members, &reloading.policy, role, client.as_ref(), &kinds).await;
            }
            _ = tick.tick() => {
                if let Some(front) = &reloading.http {
                    front.close_idle();
                }
                if !engine.restart
                    && let Some(member) = reloading.members.iter().find(|m| m.is_down())
                {
                    let why = member.why_down();
                    crate::note(format_args!("the MCP server is gone: {why}; stopping"));
                    gone = Some(why);
                    break;
                }
                let back = restart_down(&mut reloading.members, &changed_tx, &reloading.gate, &reloading.policy).await;
                if !back.is_empty() {
                    rebuild(&gateway, &reloading.members, &reloading.policy, role, client.as_ref(), &Changed::ALL).await;
                    for server in back {
                        crate::note(format_args!("server `{server}` is back"));
                    }
                }
                if watch && reloading.files_settled() {
                    reload_now(&mut reloading, "a change of the file").await;
                }
            }
        }
    }
    // Every server is killed and waited for: none outlives the engine.
    for member in &mut reloading.members {
        member.stop().await;
    }
    drop(reloading);
    // The servers are stopped, so every call on the lane has its end (answered, or failed
    // with its server gone); it runs on the thread that heard it. The trail is closed (and
    // the process ends) only once each has recorded its outcome and ended its spans: a
    // client that leaves as soon as it has its answer loses no outcome.
    // One bound for both waits: the lane's calls, then the client's answers.
    let draining = tokio::time::Instant::now();
    if let Some(lane) = lane {
        let drain = engine.drain;
        let open = tokio::task::spawn_blocking(move || lane.wait_for_ends(drain))
            .await
            .unwrap_or(0);
        if open > 0 {
            crate::note(format_args!(
                "{open} call(s) on the lane had not ended {} s after the servers stopped; \
                 the trail is closed without their outcomes",
                drain.as_secs_f64()
            ));
        }
    }
    // Each request of the client is answered by now, or is about to be (its server's answer,
    // or that its server is gone): the process may end once those answers are written, as it
    // does when this returns (the answer to a call that failed as its HTTP server went, on its
    // way or queued behind answers the client had not read yet, was lost when it exited).
    if let Some(out) = to_client
        && !out
            .flushed(engine.drain.saturating_sub(draining.elapsed()))
            .await
    {
        crate::note(format_args!(
            "the client had not been written every answer {} s after the servers stopped",
            engine.drain.as_secs_f64()
        ));
    }
    Ok(match gone {
        Some(why) => Ended::ServerGone(why),
        None => Ended::Stopped,
    })
}

/// Why [`Builder::serve`](crate::Builder::serve) returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The stdio client left, or a signal asked the engine to stop.
    Stopped,
    /// A server went away and the engine does not start servers again
    /// ([`Builder::restart`](crate::Builder::restart)): why.
    ServerGone(String),
}

/// How long the engine waits by default, once its servers are stopped, for the lane's calls
/// to end and a stdio client's answers to be written ([`Builder::drain`](crate::Builder::drain)).
pub const DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The signals the gateway answers.
struct Signals {
    #[cfg(unix)]
    hangup: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                hangup: signal(SignalKind::hangup()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The next signal: `None` for `SIGHUP` (reload), else the name of one that stops.
    async fn next(&mut self) -> Option<&'static str> {
        #[cfg(unix)]
        {
            async fn recv(signal: &mut Option<tokio::signal::unix::Signal>) {
                match signal {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                () = recv(&mut self.hangup) => None,
                () = recv(&mut self.terminate) => Some("SIGTERM"),
                _ = tokio::signal::ctrl_c() => Some("SIGINT"),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Some("Ctrl-C")
        }
    }
}
