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
//! - **`--watch`**: a change of the policy file or of a lockfile (its length, modification time
//!   or inode, looked at every 200 ms) reloads as `SIGHUP` does; a change that is refused is not
//!   tried again until the files change again.
//! - **`SIGTERM`, `SIGINT`**, or the client leaving: the servers are stopped.

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use ::rmcp::ServiceExt;
use serde_json::json;
use tokio::sync::mpsc;

use capability::Policy;
use capability::audit::{AuditedDispatch, Caller, Reason, Subject};

use super::GatewayError;
use super::handler::Gateway;
use crate::proxy::Changed;
use capability::mcp::Lockfile;

use super::handler::Snapshot;
use super::members::{FIRST_BACKOFF, Gate, MAX_BACKOFF, Member, Spec, View, snapshot};

/// How often servers that are down are looked at.
const TICK: Duration = Duration::from_millis(200);

/// Where the gateway's clients are.
pub enum Front {
    /// One client on standard input and output, of this role.
    Stdio(String),
    /// Streamable HTTP on this socket, behind the HTTP edge: each request's role from its
    /// token (the policy's `[auth]` or `[bearer_tokens]`).
    Http(std::net::TcpListener),
}

/// Starts every server, serves the clients until the stdio client goes (or a signal), then
/// stops the servers.
pub async fn serve(
    policy: Policy,
    policy_path: &Path,
    front: Front,
    dispatch: Arc<AuditedDispatch>,
    watch: bool,
) -> Result<(), GatewayError> {
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
    };
    let mut members = Vec::new();
    for spec in Spec::all(&policy, &base).map_err(GatewayError)? {
        members.push(
            Member::start(spec, changed_tx.clone(), &gate, &policy)
                .await
                .map_err(GatewayError)?,
        );
    }
    let first = snapshot(members.iter().map(Member::view), &policy, role).map_err(GatewayError)?;
    report_collisions(&first);
    let gateway = Gateway {
        role: role.map(str::to_owned),
        dispatch: dispatch.clone(),
        current: Arc::new(RwLock::new(Arc::new(first))),
        clients: role.is_none().then(crate::proxy::Clients::default),
    };
    let servers = if members.len() == 1 {
        "1 server".to_owned()
    } else {
        format!("{} servers", members.len())
    };
    let mut http_front = None;
    let (client, waiting) = match front {
        Front::Stdio(role) => {
            super::note(format_args!(
                "serving {servers} ({}) to a client of role `{role}` on standard input and output",
                names(&members)
            ));
            let (input, output) = crate::proxy::standard_streams();
            // `tools/call` takes the forwarding lane where it can; everything else is rmcp's.
            let fast = super::fast::Fast::new(gateway.clone());
            let filter = crate::proxy::filter_client_with(input, output, Some(fast));
            let running = gateway
                .clone()
                .serve(filter.transport)
                .await
                .map_err(|e| GatewayError(format!("the client did not connect: {e}")))?;
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
                super::http::start(&gateway, &policy, listener, dispatch.clone()).await?;
            http_front = Some(front);
            super::note(format_args!(
                "serving {servers} ({}) over Streamable HTTP; listening on {served}",
                names(&members)
            ));
            let waiting: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
                Box::pin(std::future::pending());
            (None, waiting)
        }
    };
    let mut waiting = waiting;
    let mut signals = Signals::new();
    let mut tick = tokio::time::interval(TICK);
    let mut reloading = Reloading {
        path: policy_path,
        base: &base,
        role,
        changed: changed_tx.clone(),
        http: http_front,
        gateway: gateway.clone(),
        dispatch,
        client: client.clone(),
        gate,
        stamp: Stamp::of(policy_path, &members),
        policy,
        members,
    };
    loop {
        tokio::select! {
            () = &mut waiting => break,
            signal = signals.next() => {
                let Some(stop) = signal else {
                    reload_now(&mut reloading, "SIGHUP").await;
                    continue;
                };
                super::note(format_args!("{stop}: stopping the servers"));
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
                    match super::upstream::list(&peer, &member.server).await {
                        Ok(tools) if tools != member.tools => {
                            member.tools = tools;
                            kinds.push(Changed::Tools);
                        }
                        Ok(_) => {}
                        Err(why) => super::note(format_args!("server `{}`: {why}", member.spec.name)),
                    }
                    let items = super::upstream::list_items(&peer, &member.spec.name).await;
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
                if restart_down(&mut reloading.members, &changed_tx, &reloading.gate, &reloading.policy).await {
                    rebuild(&gateway, &reloading.members, &reloading.policy, role, client.as_ref(), &Changed::ALL).await;
                }
                if watch && reloading.files_changed() {
                    reload_now(&mut reloading, "a change of the file").await;
                }
            }
        }
    }
    drop(reloading);
    Ok(())
}

/// What a reload reads and changes.
struct Reloading<'a> {
    path: &'a Path,
    base: &'a Path,
    role: Option<&'a str>,
    changed: mpsc::UnboundedSender<String>,
    http: Option<super::http::HttpFront>,
    gateway: Gateway,
    dispatch: Arc<AuditedDispatch>,
    client: Option<::rmcp::Peer<::rmcp::RoleServer>>,
    gate: Gate,
    /// The policy file and lockfiles as last read (or last tried).
    stamp: Stamp,
    policy: Policy,
    members: Vec<Member>,
}

impl Reloading<'_> {
    /// Whether the policy file or a lockfile changed since it was last read or tried.
    fn files_changed(&self) -> bool {
        Stamp::of(self.path, &self.members) != self.stamp
    }
}

/// What tells a file's change: its length, modification time and inode, for the policy file and
/// each server's lockfile (`None` for one that cannot be read).
#[derive(Debug, PartialEq)]
struct Stamp(Vec<Option<(u64, std::time::SystemTime, u64)>>);

impl Stamp {
    fn of(policy: &Path, members: &[Member]) -> Stamp {
        let one = |path: &Path| {
            let meta = std::fs::metadata(path).ok()?;
            #[cfg(unix)]
            let inode = std::os::unix::fs::MetadataExt::ino(&meta);
            #[cfg(not(unix))]
            let inode = 0;
            Some((meta.len(), meta.modified().ok()?, inode))
        };
        let locks = members.iter().filter_map(|m| m.spec.lock.as_deref());
        Stamp(std::iter::once(policy).chain(locks).map(one).collect())
    }
}

/// Reloads (on `SIGHUP`, or `why`): swapped in whole, or refused and said; on record either way.
async fn reload_now(state: &mut Reloading<'_>, why: &str) {
    let attempted = Stamp::of(state.path, &state.members);
    let done = reload(
        state.path,
        state.base,
        state.role,
        &mut state.members,
        &state.changed,
        &state.gate,
        state.http.as_ref(),
    )
    .await;
    match done {
        Ok((next_policy, next, edge)) => {
            report_collisions(&next);
            state.gateway.swap(next);
            if let (Some(front), Some(edge)) = (&state.http, edge) {
                front.apply(edge);
            }
            state.policy = next_policy;
            let names = names(&state.members);
            record_reload(
                &state.dispatch,
                &state.policy,
                state.role,
                Ok(names.clone()),
            );
            super::note(format_args!("{why}: reloaded: serving {names}"));
            tell(&state.gateway, state.client.as_ref(), &Changed::ALL).await;
        }
        Err(refused) => {
            super::note(format_args!(
                "{why}: not reloaded, what runs keeps running: {refused}"
            ));
            record_reload(&state.dispatch, &state.policy, state.role, Err(refused));
        }
    }
    // Not tried again until a file changes again: the policy file as it was before it was read
    // (a change while reloading is seen at the next look), the lockfiles of the servers now.
    let mut now = Stamp::of(state.path, &state.members);
    if let (Some(slot), Some(before)) = (now.0.first_mut(), attempted.0.into_iter().next()) {
        *slot = before;
    }
    state.stamp = now;
}

fn names(members: &[Member]) -> String {
    members
        .iter()
        .map(|m| m.spec.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn report_collisions(snapshot: &Snapshot) {
    use crate::escape::escape;
    for collision in snapshot.fleet.collisions() {
        super::note(format_args!(
            "the shown name `{}` is shared by {}: withheld from every role",
            escape(&collision.shown),
            escape(&collision.tools.join(", "))
        ));
    }
    for collision in snapshot.items.collisions() {
        let shared = match collision.kind {
            "prompt" => "the shown prompt name",
            _ => "the resource",
        };
        super::note(format_args!(
            "{shared} `{}` is claimed by {}: withheld from every role",
            escape(&collision.shown),
            escape(&collision.by.join(", "))
        ));
    }
}

/// Tells the clients that these lists changed: the stdio client on its connection, the HTTP
/// front's clients on a task of their own.
async fn tell(
    gateway: &Gateway,
    client: Option<&::rmcp::Peer<::rmcp::RoleServer>>,
    kinds: &[Changed],
) {
    for kind in kinds {
        if let Some(client) = client {
            kind.tell_peer(client).await;
        }
        gateway.tell_clients(*kind);
    }
}

async fn rebuild(
    gateway: &Gateway,
    members: &[Member],
    policy: &Policy,
    role: Option<&str>,
    client: Option<&::rmcp::Peer<::rmcp::RoleServer>>,
    kinds: &[Changed],
) {
    match snapshot(members.iter().map(Member::view), policy, role) {
        Ok(next) => {
            report_collisions(&next);
            gateway.swap(next);
            tell(gateway, client, kinds).await;
        }
        Err(why) => super::note(format_args!("the listing was kept: {why}")),
    }
}

/// Starts again each server that is down and due; whether one came back.
async fn restart_down(
    members: &mut [Member],
    changed: &mpsc::UnboundedSender<String>,
    gate: &Gate,
    policy: &Policy,
) -> bool {
    let mut back = false;
    for member in members.iter_mut() {
        if !member.is_down() {
            continue;
        }
        let now = Instant::now();
        let (due, wait) = *member.retry.get_or_insert_with(|| {
            super::note(format_args!(
                "server `{}` is gone; starting it again in {} ms",
                member.spec.name,
                FIRST_BACKOFF.as_millis()
            ));
            (now + FIRST_BACKOFF, FIRST_BACKOFF)
        });
        if now < due {
            continue;
        }
        match Member::start(member.spec.clone(), changed.clone(), gate, policy).await {
            Ok(started) => {
                super::note(format_args!("server `{}` is back", member.spec.name));
                *member = started;
                back = true;
            }
            Err(why) => {
                let next = (wait * 2).min(MAX_BACKOFF);
                super::note(format_args!(
                    "{why}; trying again in {} ms",
                    next.as_millis()
                ));
                member.retry = Some((Instant::now() + next, next));
            }
        }
    }
    back
}

/// Reloads: the new policy and fleet, all of it read, started and put together first (the
/// servers whose entry did not change are kept, their lockfiles read again, the others
/// started); only then is `running` replaced (the servers no longer named are stopped). On an
/// error nothing running has changed.
async fn reload(
    path: &Path,
    base: &Path,
    role: Option<&str>,
    running: &mut Vec<Member>,
    changed: &mpsc::UnboundedSender<String>,
    gate: &Gate,
    http: Option<&super::http::HttpFront>,
) -> Result<(Policy, Snapshot, Option<capability_http::EdgeConfig>), String> {
    let policy = Policy::from_toml_file(path).map_err(|e| e.to_string())?;
    if let Some(role) = role
        && policy.context(role, "check").is_none()
    {
        return Err(format!("the new policy has no role `{role}`"));
    }
    enum Plan {
        Keep(usize, Option<Lockfile>),
        Start(Box<Member>),
    }
    let mut plans = Vec::new();
    for spec in Spec::all(&policy, base)? {
        match running.iter().position(|m| m.spec == spec && !m.is_down()) {
            Some(i) => plans.push(Plan::Keep(i, spec.read_lock()?)),
            None => plans.push(Plan::Start(Box::new(
                Member::start(spec, changed.clone(), gate, &policy).await?,
            ))),
        }
    }
    let views = plans.iter().filter_map(|plan| match plan {
        Plan::Start(member) => Some(member.view()),
        Plan::Keep(i, lock) => running.get(*i).map(|member| View {
            lock: lock.as_ref(),
            ..member.view()
        }),
    });
    let next = snapshot(views, &policy, role)?;
    // The HTTP edge's credentials and limits, read from the new file too.
    let edge = match http {
        Some(front) => Some(front.config(&policy).await?),
        None => None,
    };
    // Everything holds: take over the kept servers, stop the others.
    let mut old: Vec<Option<Member>> = std::mem::take(running).into_iter().map(Some).collect();
    for plan in plans {
        match plan {
            Plan::Start(member) => running.push(*member),
            Plan::Keep(i, lock) => {
                if let Some(mut member) = old.get_mut(i).and_then(Option::take) {
                    member.lock = lock;
                    member.requests.set_policy(&policy);
                    running.push(member);
                }
            }
        }
    }
    Ok((policy, next, edge))
}

fn record_reload(
    dispatch: &AuditedDispatch,
    policy: &Policy,
    role: Option<&str>,
    done: Result<String, String>,
) {
    let role = role.unwrap_or("(gateway)");
    let session = format!("gateway:{role}");
    let subject = Subject::new(role, &session).policy_version(policy.version());
    let (input, reason) = match done {
        Ok(servers) => (
            json!({"servers": servers}),
            Reason::note(
                "reloaded",
                format!("the policy, servers and lockfiles were reloaded: {servers}"),
            ),
        ),
        Err(why) => (
            json!({"refused": why}),
            Reason::note(
                "reload_refused",
                format!("the reload was refused, what ran keeps running: {why}"),
            ),
        ),
    };
    if let Err(error) = dispatch.notice(
        &subject,
        Caller::new("gateway"),
        "gateway/reload",
        "policy",
        &input,
        reason,
    ) {
        super::note(format_args!("the reload could not be recorded: {error}"));
    }
}

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
