//! The running fleet's servers: each started from its entry of the policy's `[servers]`, listed,
//! and put together (with the role's decider) into what the client is served from.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ::rmcp::model::Tool;
use serde_json::Value;
use tokio::sync::mpsc;

use capability::Policy;
use capability::authz::ServerEntry;
use capability::mcp::{Fleet, Listing, Lockfile, Server};

use super::handler::{Gateway, Snapshot};
use super::items::{Items, Listed};
use super::source::{ServerSource, source_of};
use super::upstream::{Connection, connect, list, list_items};
use crate::proxy::Changed;
use crate::proxy::ServerRequests;

/// The first wait before a server that died is started again; it doubles up to [`MAX_BACKOFF`].
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// How long a server has to connect and list its tools when it is started.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest wait between two starts of a server that keeps dying.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What an entry says about a server: a reload keeps a server whose spec did not change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Spec {
    pub(super) name: String,
    pub(super) source: ServerSource,
    pub(super) env: Vec<(String, String)>,
    pub(super) trusted: bool,
    pub(super) lock: Option<std::path::PathBuf>,
    pub(super) prefix: String,
}

impl Spec {
    /// The live servers of `policy`, in name order; an entry with only a recorded list is an
    /// error (a gateway serves live servers).
    pub(super) fn all(policy: &Policy, base: &Path) -> Result<Vec<Spec>, String> {
        let mut specs = Vec::new();
        for entry in policy.servers() {
            let Some(source) = source_of(entry, base) else {
                continue;
            };
            if let ServerSource::File(_) = source {
                return Err(format!(
                    "server `{}` has only a recorded tool list (`file`); a gateway serves live \
                     servers: give its `command` or `url`",
                    entry.name()
                ));
            }
            specs.push(Spec::of(entry, source, base));
        }
        if specs.is_empty() {
            return Err(
                "the policy's [servers] name no live server (`command` or `url`)".to_owned(),
            );
        }
        Ok(specs)
    }

    fn of(entry: &ServerEntry, source: ServerSource, base: &Path) -> Spec {
        Spec {
            name: entry.name().to_owned(),
            source,
            env: entry.env().to_vec(),
            trusted: entry.trusted().unwrap_or(false),
            lock: entry.lock().map(|l| base.join(l)),
            prefix: entry.prefix(),
        }
    }

    fn server(&self) -> Server {
        if self.trusted {
            Server::trusted(&self.name)
        } else {
            Server::untrusted(&self.name)
        }
    }

    /// The server's lockfile, read now.
    pub(super) fn read_lock(&self) -> Result<Option<Lockfile>, String> {
        let Some(path) = &self.lock else {
            return Ok(None);
        };
        let lock = Lockfile::load(path)
            .map_err(|e| format!("server `{}`: {e}", self.name))?
            .ok_or_else(|| {
                format!(
                    "server `{}`: {}: no such lockfile",
                    self.name,
                    path.display()
                )
            })?;
        Ok(Some(lock))
    }
}

/// What the servers' requests to the client are decided with: the client's role (over stdio),
/// the trail, and the client once it connected (shared by every server).
#[derive(Clone)]
pub(super) struct Gate {
    pub(super) role: Option<String>,
    pub(super) dispatch: std::sync::Arc<capability::audit::AuditedDispatch>,
    pub(super) front: std::sync::Arc<std::sync::OnceLock<::rmcp::Peer<::rmcp::RoleServer>>>,
    /// The `--audit` target: the approval ledger when `[approvals]` names none.
    pub(super) audit: std::sync::Arc<str>,
    /// The log level each client asked for (`logging/setLevel`).
    pub(super) levels: super::relay::Levels,
}

impl Gate {
    fn requests(&self, server: &str, policy: &Policy) -> std::sync::Arc<ServerRequests> {
        std::sync::Arc::new(ServerRequests::of(
            server,
            super::GATEWAY_NAME,
            policy,
            self.role.as_deref(),
            self.dispatch.clone(),
            self.front.clone(),
        ))
    }
}

/// One server of the running fleet.
pub(super) struct Member {
    pub(super) spec: Spec,
    pub(super) server: Server,
    pub(super) lock: Option<Lockfile>,
    pub(super) connection: Connection,
    /// The gate of its requests to the client.
    pub(super) requests: std::sync::Arc<ServerRequests>,
    pub(super) tools: Vec<Tool>,
    /// Its resources, templates and prompts.
    pub(super) items: Listed,
    /// While it is down: when to start it again, and the wait after that.
    pub(super) retry: Option<(Instant, Duration)>,
}

impl Member {
    /// Starts (or reaches) the server of `spec`, and lists it.
    pub(super) async fn start(
        spec: Spec,
        changed: mpsc::UnboundedSender<String>,
        gate: &Gate,
        policy: &Policy,
    ) -> Result<Member, String> {
        let fail = |why: String| format!("server `{}`: {why}", spec.name);
        let lock = spec.read_lock()?;
        let server = spec.server();
        let requests = gate.requests(&spec.name, policy);
        let starting = async {
            let connection = connect(
                &spec.name,
                &spec.source,
                &spec.env,
                changed,
                Some(requests.clone()),
                gate.levels.clone(),
            )
            .await?;
            let tools = list(&connection.peer(), &server).await?;
            let items = list_items(&connection.peer(), &spec.name).await;
            Ok::<_, String>((connection, tools, items))
        };
        let (connection, tools, items) = tokio::time::timeout(START_TIMEOUT, starting)
            .await
            .map_err(|_| {
                fail(format!(
                    "did not connect and list its tools within {} s",
                    START_TIMEOUT.as_secs()
                ))
            })?
            .map_err(fail)?;
        Ok(Member {
            spec,
            server,
            lock,
            connection,
            requests,
            tools,
            items,
            retry: None,
        })
    }

    /// Whether the connection to the server has ended (it exited, or stopped answering).
    pub(super) fn is_down(&self) -> bool {
        self.connection.peer().is_transport_closed()
    }
}

/// What [`snapshot`] reads of a server: its own, or a running one's with a lockfile read again.
pub(super) struct View<'a> {
    pub(super) spec: &'a Spec,
    pub(super) server: &'a Server,
    pub(super) lock: Option<&'a Lockfile>,
    pub(super) tools: &'a [Tool],
    pub(super) items: &'a Listed,
    pub(super) peer: ::rmcp::Peer<::rmcp::RoleClient>,
    pub(super) lane: Option<std::sync::Arc<super::lane::Lane>>,
    pub(super) reach: Option<std::sync::Arc<super::reach::Reach>>,
    pub(super) progress: crate::proxy::ProgressRelay,
    pub(super) calls: super::relay::Calls,
    pub(super) legacy: Option<std::sync::Arc<super::legacy::Legacy>>,
}

impl Member {
    pub(super) fn view(&self) -> View<'_> {
        View {
            spec: &self.spec,
            server: &self.server,
            lock: self.lock.as_ref(),
            tools: &self.tools,
            items: &self.items,
            peer: self.connection.peer(),
            lane: self.connection.lane.clone(),
            reach: self.connection.reach.clone(),
            progress: self.connection.progress(),
            calls: self.connection.calls(),
            legacy: self.connection.legacy.clone(),
        }
    }
}

/// What the clients are served from: `members` under `policy` (whose roles must include the
/// stdio client's `role`).
pub(super) fn snapshot<'a>(
    members: impl IntoIterator<Item = View<'a>>,
    policy: &Policy,
    role: Option<&str>,
) -> Result<Snapshot, String> {
    let mut listings = Vec::new();
    let mut tools = HashMap::new();
    let mut peers = HashMap::new();
    let mut lanes = HashMap::new();
    let mut reaches = HashMap::new();
    let mut progress = HashMap::new();
    let mut calls = HashMap::new();
    let mut legacy = HashMap::new();
    let mut items = Vec::new();
    for member in members {
        items.push((
            member.spec.name.clone(),
            member.spec.prefix.clone(),
            member.items.clone(),
        ));
        let values: Vec<Value> = member
            .tools
            .iter()
            .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
            .collect();
        let listing = Listing::read(member.server, &values, member.lock)
            .map_err(|e| format!("server `{}`: {e}", member.spec.name))?;
        listings.push((listing, member.spec.prefix.clone()));
        for tool in member.tools {
            tools.insert(
                (member.spec.name.clone(), tool.name.to_string()),
                tool.clone(),
            );
        }
        peers.insert(member.spec.name.clone(), member.peer);
        progress.insert(member.spec.name.clone(), member.progress);
        calls.insert(member.spec.name.clone(), member.calls);
        if let Some(session) = member.legacy {
            legacy.insert(member.spec.name.clone(), session);
        }
        if let Some(lane) = member.lane {
            lanes.insert(member.spec.name.clone(), lane);
        }
        if let Some(reach) = member.reach {
            reaches.insert(member.spec.name.clone(), reach);
        }
    }
    let fleet = Fleet::new(listings).map_err(|e| e.to_string())?;
    if let Some(role) = role
        && !policy.roles().any(|r| r == role)
    {
        return Err(format!("role `{role}` is not in the policy"));
    }
    Ok(Snapshot {
        fleet,
        items: Items::new(items),
        tools,
        peers,
        progress,
        calls,
        legacy,
        lanes,
        reaches,
        policy: std::sync::Arc::new(policy.clone()),
        policy_version: policy.version().map(str::to_owned),
        approvals: None,
    })
}

/// The names of `members`, for messages.
pub(super) fn names(members: &[Member]) -> String {
    members
        .iter()
        .map(|m| m.spec.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn report_collisions(snapshot: &Snapshot) {
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
pub(super) async fn tell(
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

pub(super) async fn rebuild(
    gateway: &Gateway,
    members: &[Member],
    policy: &Policy,
    role: Option<&str>,
    client: Option<&::rmcp::Peer<::rmcp::RoleServer>>,
    kinds: &[Changed],
) {
    match snapshot(members.iter().map(Member::view), policy, role) {
        Ok(mut next) => {
            next.approvals = gateway.current().approvals.clone();
            // Said again only when what is withheld changed (a list change says nothing new).
            let before = gateway.current();
            if before.fleet.collisions() != next.fleet.collisions()
                || before.items.collisions() != next.items.collisions()
            {
                report_collisions(&next);
            }
            gateway.swap(next);
            tell(gateway, client, kinds).await;
        }
        Err(why) => super::note(format_args!("the listing was kept: {why}")),
    }
}

/// Starts again each server that is down and due; the names of those that came back (to be
/// said once they serve: once the snapshot holding them is swapped in).
pub(super) async fn restart_down(
    members: &mut [Member],
    changed: &mpsc::UnboundedSender<String>,
    gate: &Gate,
    policy: &Policy,
) -> Vec<String> {
    let mut back = Vec::new();
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
                back.push(member.spec.name.clone());
                *member = started;
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
