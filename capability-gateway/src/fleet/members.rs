//! The running fleet's servers: each started from its entry of the policy's `[servers]`, listed,
//! and put together (with the role's decider) into what the client is served from.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ::rmcp::model::Tool;
use serde_json::Value;
use tokio::sync::mpsc;

use capability::Policy;
use capability::mcp::{Fleet, Listing, Lockfile, Server};

use crate::GatewayError;
use crate::serve::clients::Changed;
use crate::serve::gateway::{Gateway, Snapshot};
use crate::serve::items::Items;
use crate::upstream::Listed;
use crate::upstream::requests::ServerRequests;
use crate::upstream::{Connection, connect, list_served_items};

/// The first wait before a server that died is started again; it doubles up to [`MAX_BACKOFF`].
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// How long a server has to connect and list its tools when it is started.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest wait between two starts of a server that keeps dying.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What a server is: its spec (`spec.rs`).
pub(crate) type Spec = crate::spec::ServerSpec;

/// What the servers' requests to the client are decided with: the client's role (over stdio),
/// the trail, and the client once it connected (shared by every server).
#[derive(Clone)]
pub(crate) struct Gate {
    pub(crate) role: Option<String>,
    pub(crate) dispatch: std::sync::Arc<capability::audit::AuditedDispatch>,
    pub(crate) front: std::sync::Arc<std::sync::OnceLock<::rmcp::Peer<::rmcp::RoleServer>>>,
    /// The `--audit` target: the approval ledger when `[approvals]` names none.
    pub(crate) audit: std::sync::Arc<str>,
    /// The log level each client asked for (`logging/setLevel`).
    pub(crate) levels: crate::upstream::relay::Levels,
    /// The engine's name, for the servers' errors and what they are told of their client.
    pub(crate) name: &'static str,
    /// What the sessions are named under (`Gateway::scope`), so that a server's request is
    /// decided in the stdio client's own `.../server-requests` session whichever path its call
    /// took.
    pub(crate) scope: std::sync::Arc<str>,
}

impl Gate {
    fn requests(&self, server: &str, policy: &Policy) -> std::sync::Arc<ServerRequests> {
        std::sync::Arc::new(ServerRequests::of(
            server,
            self.name,
            &self.scope,
            policy,
            self.role.as_deref(),
            self.dispatch.clone(),
            self.front.clone(),
        ))
    }
}

/// One server of the running fleet.
pub(crate) struct Member {
    pub(crate) spec: Spec,
    pub(crate) server: Server,
    pub(crate) lock: Option<Lockfile>,
    pub(crate) connection: Connection,
    /// The gate of its requests to the client.
    pub(crate) requests: std::sync::Arc<ServerRequests>,
    pub(crate) tools: Vec<Tool>,
    /// Its resources, templates and prompts.
    pub(crate) items: Listed,
    /// While it is down: when to start it again, and the wait after that.
    pub(crate) retry: Option<(Instant, Duration)>,
    /// Calls on the caller's behalf (its `exchange`), over a connection of each caller's own.
    pub(crate) delegated: Option<std::sync::Arc<crate::upstream::delegate::Delegated>>,
}

impl Member {
    /// Starts (or reaches) the server of `spec`, and lists it.
    pub(crate) async fn start(
        spec: Spec,
        changed: mpsc::UnboundedSender<String>,
        gate: &Gate,
        policy: &Policy,
    ) -> Result<Member, GatewayError> {
        let fail = |why: String| GatewayError::Server(why).of_server(&spec.name);
        let lock = spec
            .read_lock(policy)
            .map_err(|why| GatewayError::Config(why).of_server(&spec.name))?;
        let server = spec.server();
        let requests = gate.requests(&spec.name, policy);
        let starting = async {
            let connection = connect(
                &spec.name,
                &spec.source,
                &spec.env,
                spec.token.as_ref(),
                changed,
                Some(requests.clone()),
                gate.levels.clone(),
            )
            .await?;
            let tools = connection
                .tools(&server)
                .await
                .map_err(GatewayError::Server)?;
            review(&server, lock.as_ref(), &tools, &gate.dispatch);
            let items =
                list_served_items(&connection.peer(), &spec.name, spec.resources, spec.prompts)
                    .await;
            Ok::<_, GatewayError>((connection, tools, items))
        };
        let (connection, tools, items) = tokio::time::timeout(START_TIMEOUT, starting)
            .await
            .map_err(|_| {
                fail(format!(
                    "did not connect and list its tools within {} s",
                    START_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|e| e.of_server(&spec.name))?;
        let delegated = match (&spec.exchange, &spec.source) {
            (Some(exchange), crate::spec::source::ServerSource::Url(url)) => {
                let issuer = policy.auth().map(|auth| auth.issuer()).ok_or_else(|| {
                    GatewayError::Config(
                        "`exchange` trades callers' OAuth access tokens: it needs the policy's \
                         `[auth]` (and a front over HTTP)"
                            .to_owned(),
                    )
                    .of_server(&spec.name)
                })?;
                Some(std::sync::Arc::new(
                    crate::upstream::delegate::Delegated::discover(exchange, issuer, url)
                        .await
                        .map_err(fail)?,
                ))
            }
            _ => None,
        };
        Ok(Member {
            spec,
            server,
            lock,
            connection,
            requests,
            tools,
            items,
            retry: None,
            delegated,
        })
    }

    /// Whether the connection to the server has ended (it exited, or stopped answering).
    pub(crate) fn is_down(&self) -> bool {
        // An HTTP server's connection stays open when the server goes: a failed request says
        // it is gone (`Exit` set by the call that failed).
        self.connection.peer().is_transport_closed() || self.connection.exit.get().is_some()
    }

    /// Why the server is down: how its process ended, or that its connection ended.
    pub(crate) fn why_down(&self) -> String {
        self.connection
            .exit
            .get()
            .unwrap_or_else(|| format!("the connection to server `{}` ended", self.spec.name))
    }

    /// Stops the server: a spawned one is killed and waited for.
    pub(crate) async fn stop(&mut self) {
        if let Some(process) = self.connection.process.as_mut() {
            process.stop().await;
        }
    }
}

/// What [`snapshot`] reads of a server: its own, or a running one's with a lockfile read again.
pub(crate) struct View<'a> {
    pub(crate) spec: &'a Spec,
    pub(crate) server: &'a Server,
    pub(crate) lock: Option<&'a Lockfile>,
    pub(crate) tools: &'a [Tool],
    pub(crate) items: &'a Listed,
    pub(crate) peer: ::rmcp::Peer<::rmcp::RoleClient>,
    pub(crate) lane: Option<std::sync::Arc<crate::upstream::stdio::Lane>>,
    pub(crate) reach: Option<std::sync::Arc<crate::upstream::http::Reach>>,
    pub(crate) progress: crate::upstream::progress::Relay,
    pub(crate) calls: crate::upstream::relay::Calls,
    pub(crate) legacy: Option<std::sync::Arc<crate::upstream::legacy::Legacy>>,
    pub(crate) delegated: Option<std::sync::Arc<crate::upstream::delegate::Delegated>>,
    /// How the server ended, once it did: a spawned server's process, an HTTP server's
    /// connection.
    pub(crate) exit: crate::process::Ended,
}

impl Member {
    pub(crate) fn view(&self) -> View<'_> {
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
            delegated: self.delegated.clone(),
            exit: match &self.spec.source {
                crate::spec::source::ServerSource::Url(url) => {
                    crate::process::Ended::Http(self.connection.exit.clone(), url.clone())
                }
                _ => crate::process::Ended::Spawned(self.connection.exit.clone()),
            },
        }
    }
}

/// What the clients are served from: `members` under `policy` (whose roles must include the
/// stdio client's `role`).
pub(crate) fn snapshot<'a>(
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
    let mut delegated = HashMap::new();
    let mut exits = HashMap::new();
    let mut items = Vec::new();
    let (mut resources, mut prompts) = (false, false);
    for member in members {
        resources |= member.spec.resources;
        prompts |= member.spec.prompts;
        // A server none of whose items are served takes no resource's or prompt's request.
        if member.spec.resources || member.spec.prompts {
            items.push((
                member.spec.name.clone(),
                member.spec.prefix.clone(),
                member.items.clone(),
            ));
        }
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
        exits.insert(member.spec.name.clone(), member.exit);
        if let Some(exchanging) = member.delegated {
            delegated.insert(member.spec.name.clone(), exchanging);
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
        delegated,
        exits,
        lanes,
        reaches,
        policy: std::sync::Arc::new(policy.clone()),
        policy_version: policy.version().map(str::to_owned),
        approvals: None,
        resources,
        prompts,
    })
}

/// The names of `members`, for messages.
pub(crate) fn names(members: &[Member]) -> String {
    members
        .iter()
        .map(|m| m.spec.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn report_collisions(snapshot: &Snapshot) {
    use crate::escape::escape;
    for collision in snapshot.fleet.collisions() {
        crate::note(format_args!(
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
        crate::note(format_args!(
            "{shared} `{}` is claimed by {}: withheld from every role",
            escape(&collision.shown),
            escape(&collision.by.join(", "))
        ));
    }
}

/// Tells the clients that these lists changed: the stdio client on its connection, the HTTP
/// front's clients on a task of their own.
pub(crate) async fn tell(
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

pub(crate) async fn rebuild(
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
        Err(why) => crate::note(format_args!("the listing was kept: {why}")),
    }
}

/// Starts again each server that is down and due; the names of those that came back (to be
/// said once they serve: once the snapshot holding them is swapped in).
pub(crate) async fn restart_down(
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
            crate::note(format_args!(
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
                crate::note(format_args!(
                    "{why}; trying again in {} ms",
                    next.as_millis()
                ));
                member.retry = Some((Instant::now() + next, next));
            }
        }
    }
    back
}

/// Says which of `server`'s tools drifted from its lockfile (they are hidden) and which pinned
/// ones it no longer lists: at start, and each time it lists again.
/// A tool shown though changed (an accepted rewording, a re-pin) is recorded in the trail.
pub(crate) fn review(
    server: &Server,
    lock: Option<&Lockfile>,
    tools: &[Tool],
    dispatch: &capability::audit::AuditedDispatch,
) {
    use crate::escape::escape;
    let Some(lock) = lock else { return };
    let json: Result<Vec<_>, _> = tools.iter().map(capability::rmcp::tool_json).collect();
    let review = json
        .map_err(|e| e.to_string())
        .and_then(|json| lock.review(server, &json).map_err(|e| e.to_string()));
    match review {
        Ok(review) => {
            crate::pins::record_accepted(&review, dispatch);
            for tool in review.hidden_by_drift() {
                crate::note(format_args!(
                    "drift: `{}/{}` {}; it is hidden until pinned again (`capability pin \
                     --review` shows the change)",
                    server.name(),
                    escape(tool.manifest().name()),
                    escape(&tool.status().to_string())
                ));
            }
            for name in review.removed() {
                crate::note(format_args!(
                    "drift: `{}/{}` is pinned but no longer listed",
                    server.name(),
                    escape(name)
                ));
            }
        }
        Err(error) => crate::note(format_args!(
            "server `{}`: its tools cannot be reviewed against its lockfile: {}",
            server.name(),
            escape(&error)
        )),
    }
}
