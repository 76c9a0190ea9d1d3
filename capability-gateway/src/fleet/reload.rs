//! Reloading the gateway: on `SIGHUP`, or with `--watch` when the policy file or a lockfile
//! changes and has then stayed the same for [`SETTLE`]. The new policy and fleet (and over HTTP
//! the edge's credentials and limits) are read, fetched and started first; only when all of it
//! holds, and the policy file still holds what was read, is it swapped in, at once. Each
//! reload, done or refused, is an audit record (`gateway/reload`) carrying the policy version.

use std::path::Path;

use serde_json::json;
use tokio::sync::mpsc;

use capability::Policy;
use capability::audit::{Caller, Reason, Subject};
use capability::mcp::Lockfile;

use crate::fleet::members::{Gate, Member, View, names, report_collisions, snapshot, tell};
use crate::serve::clients::Changed;
use crate::serve::gateway::{Gateway, Snapshot};

/// What a reload reads and changes.
pub(crate) struct Reloading<'a> {
    pub(crate) path: &'a Path,
    pub(crate) base: &'a Path,
    pub(crate) role: Option<&'a str>,
    pub(crate) changed: mpsc::UnboundedSender<String>,
    pub(crate) http: Option<crate::front::http::HttpFront>,
    pub(crate) gateway: Gateway,
    pub(crate) client: Option<::rmcp::Peer<::rmcp::RoleServer>>,
    pub(crate) gate: Gate,
    /// The policy file and lockfiles as last read (or last tried).
    pub(crate) stamp: Stamp,
    /// A change seen and not yet settled (`--watch`): the files as they were, and since when.
    pub(crate) pending: Option<(Stamp, std::time::Instant)>,
    pub(crate) policy: Policy,
    pub(crate) members: Vec<Member>,
    /// Where the servers come from (the policy's `[servers]`, read again; or given).
    pub(crate) servers: &'a crate::spec::Servers,
}

/// How long the policy file and the lockfiles must stay the same before `--watch` reloads them:
/// a file rewritten in place in several writes is not read between two of them.
pub(crate) const SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

impl Reloading<'_> {
    /// Whether the policy file or a lockfile changed since it was last read or tried, and has
    /// stayed as it is now for [`SETTLE`] (`--watch`): a change still being written waits.
    pub(crate) fn files_settled(&mut self) -> bool {
        let now = Stamp::of(self.path, &self.members);
        if now == self.stamp {
            self.pending = None;
            return false;
        }
        match &self.pending {
            Some((seen, since)) if *seen == now => since.elapsed() >= SETTLE,
            _ => {
                self.pending = Some((now, std::time::Instant::now()));
                false
            }
        }
    }
}

/// What tells a file's change: its length, modification time, inode and the SHA-256 of its
/// bytes (two writes within one tick of the file system's clock, of one length, still differ),
/// for the policy file and each server's lockfile (`None` for one that cannot be read).
#[derive(Debug, PartialEq)]
pub(crate) struct Stamp(Vec<Option<(u64, std::time::SystemTime, u64, String)>>);

impl Stamp {
    pub(crate) fn of(policy: &Path, members: &[Member]) -> Stamp {
        let one = |path: &Path| {
            let meta = std::fs::metadata(path).ok()?;
            #[cfg(unix)]
            let inode = std::os::unix::fs::MetadataExt::ino(&meta);
            #[cfg(not(unix))]
            let inode = 0;
            let digest = capability_rules::sha256_hex(&std::fs::read(path).ok()?);
            Some((meta.len(), meta.modified().ok()?, inode, digest))
        };
        let locks = members.iter().filter_map(|m| m.spec.lock.as_deref());
        Stamp(std::iter::once(policy).chain(locks).map(one).collect())
    }
}

/// Reloads (on `SIGHUP`, or `why`): swapped in whole, or refused and said; on record either way.
pub(crate) async fn reload_now(state: &mut Reloading<'_>, why: &str) {
    let attempted = Stamp::of(state.path, &state.members);
    let done = reload(
        state.path,
        state.base,
        state.servers,
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
            record_reload(&state.gateway, &state.policy, state.role, Ok(names.clone()));
            crate::note(format_args!("{why}: reloaded: serving {names}"));
            tell(&state.gateway, state.client.as_ref(), &Changed::ALL).await;
        }
        Err(refused) => {
            crate::note(format_args!(
                "{why}: not reloaded, what runs keeps running: {refused}"
            ));
            record_reload(&state.gateway, &state.policy, state.role, Err(refused));
        }
    }
    // Not tried again until a file changes again: the policy file as it was before it was read
    // (a change while reloading is seen at the next look), the lockfiles of the servers now.
    let mut now = Stamp::of(state.path, &state.members);
    if let (Some(slot), Some(before)) = (now.0.first_mut(), attempted.0.into_iter().next()) {
        *slot = before;
    }
    state.stamp = now;
    state.pending = None;
}

/// Reloads: the new policy and fleet, all of it read, started and put together first (the
/// servers whose entry did not change are kept, their lockfiles read again, the others
/// started); only then is `running` replaced (the servers no longer named are stopped). On an
/// error nothing running has changed.
#[allow(clippy::too_many_arguments)] // what a reload reads and changes
async fn reload(
    path: &Path,
    base: &Path,
    servers: &crate::spec::Servers,
    role: Option<&str>,
    running: &mut Vec<Member>,
    changed: &mpsc::UnboundedSender<String>,
    gate: &Gate,
    http: Option<&crate::front::http::HttpFront>,
) -> Result<(Policy, Snapshot, Option<capability_http::EdgeConfig>), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the policy file `{}`: {e}", path.display()))?;
    let policy = Policy::from_toml_str(&text).map_err(|e| e.in_file(path).to_string())?;
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
    for spec in servers.specs(&policy, base)? {
        match running.iter().position(|m| m.spec == spec && !m.is_down()) {
            Some(i) => plans.push(Plan::Keep(i, spec.read_lock(&policy)?)),
            None => plans.push(Plan::Start(Box::new(
                Member::start(spec, changed.clone(), gate, &policy)
                    .await
                    .map_err(|e| e.to_string())?,
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
    let mut next = snapshot(views, &policy, role)?;
    next.approvals = crate::serve::approvals::Approvals::open(&policy, base, Some(&gate.audit))?;
    // The HTTP edge's credentials and limits, read from the new file too.
    let edge = match http {
        Some(front) => Some(front.config(&policy).await?),
        None => None,
    };
    // Read whole, it must still be what the file holds: a file caught while it is written (it
    // parsed, but more was coming) is not applied; it is read again once it has settled.
    if std::fs::read(path).ok().as_deref() != Some(text.as_bytes()) {
        return Err(format!(
            "the policy file `{}` changed while it was read; it is read again once it has \
             settled (write it to another name and rename it over, so it changes at once)",
            path.display()
        ));
    }
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
    gateway: &Gateway,
    policy: &Policy,
    role: Option<&str>,
    done: Result<String, String>,
) {
    let dispatch = &gateway.dispatch;
    let role = role.unwrap_or("(gateway)");
    let session = format!("mcp:{}/{role}", gateway.scope);
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
        crate::note(format_args!("the reload could not be recorded: {error}"));
    }
}
