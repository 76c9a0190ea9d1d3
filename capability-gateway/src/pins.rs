//! A lockfile as the policy governs it: whether a server's wording drift is accepted (its
//! `[servers]` entry's `accept_wording_drift`), and which re-pins are taken (each signature
//! checked with the Ed25519 keys of the policy's `[approvals] approvers`, through
//! `capability::gate`). Every reader of a lockfile in the engine and on the command line goes
//! through [`governed`], so `capability verify`, `capability check`, the proxy and the gateway
//! judge drift alike; and [`record_accepted`] writes what was shown though changed to the trail.

use capability::Policy;
use capability::audit::{AuditedDispatch, Caller, Reason, Subject};
use capability::gate::{PublicKey, SecretKey};
use capability::mcp::{DriftStatus, Lockfile, Review, Server};
use serde_json::{Value, json};

/// `lock` with `policy`'s consent to `server`'s wording drift, and its re-pins checked against
/// the policy's approvers (a re-pin by anyone else, or whose signature does not verify, is
/// refused; without `[approvals]` every re-pin is).
pub fn governed(mut lock: Lockfile, policy: &Policy, server: &str) -> Lockfile {
    let accept = policy
        .servers()
        .iter()
        .find(|entry| entry.name() == server)
        .is_some_and(|entry| entry.accepts_wording_drift());
    lock.accept_wording_drift(server, accept);
    let approvers: Vec<(String, String)> = policy
        .approvals()
        .map(|a| {
            a.approvers()
                .map(|(name, key)| (name.to_owned(), key.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    lock.check_repins(
        |name| {
            approvers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, key)| key.clone())
        },
        |key, message, signature| {
            PublicKey::from_text(key).is_ok_and(|k| k.verify_repin(message, signature))
        },
    );
    lock
}

/// Records each tool of `review` shown although its descriptor is not the one pinned (an
/// accepted rewording, a re-pin): a `tracing` event of target `capability_gateway`, and a
/// notice `pin/accepted` in the trail with the fields changed, old and new. A notice that
/// cannot be written is said as an event.
pub fn record_accepted(review: &Review, dispatch: &AuditedDispatch) {
    let session = format!("pins:{}", review.server());
    let subject = Subject::new("(gateway)", &session);
    for tool in review.accepted_drift() {
        let name = tool.manifest().name();
        let changes: Vec<_> = tool
            .drift()
            .map(|d| d.changes().to_vec())
            .unwrap_or_default()
            .into_iter()
            .map(|c| json!({"field": c.pointer, "old": c.old, "new": c.new}))
            .collect();
        let (method, why) = match tool.status() {
            DriftStatus::Repinned { approver } => (
                "pin/repinned",
                format!("shown as re-pinned by approver `{approver}`"),
            ),
            _ => (
                "pin/accepted",
                "shown: a rewording the policy accepts (`accept_wording_drift`)".to_owned(),
            ),
        };
        tracing::info!(
            target: "capability_gateway",
            server = review.server(),
            tool = name,
            status = %tool.status(),
            diff = %json!(changes),
            "drift accepted: {why}"
        );
        let input = json!({
            "server": review.server(),
            "tool": name,
            "status": tool.status().to_string(),
            "descriptor_hash": tool.manifest().descriptor_hash(),
            "changes": changes,
        });
        let reason = Reason::note("drift_accepted", why);
        if let Err(error) = dispatch.notice(
            &subject,
            Caller::new("gateway"),
            method,
            name,
            &input,
            reason,
        ) {
            tracing::warn!(
                target: "capability_gateway",
                server = review.server(),
                tool = name,
                "the accepted drift could not be recorded in the trail: {error}"
            );
        }
    }
}

/// Re-pins (`capability pin --approve`), signed with `key`, every tool of `review` that is
/// pinned and hidden because its descriptor changed: each re-pin binds the descriptor in
/// `tools` the review was made of. The approver is the one `policy` names with `key`'s public
/// half; a key the policy does not name is refused, since no reader would take its re-pins.
/// Returns the approver's name and the tools re-pinned, in the server's order.
pub fn repin_changed(
    lock: &mut Lockfile,
    review: &Review,
    tools: &[Value],
    policy: Option<&Policy>,
    key: &SecretKey,
) -> Result<(String, Vec<String>), String> {
    let public = key.public_key().to_string();
    let approver = policy
        .and_then(Policy::approvals)
        .and_then(|a| {
            a.approvers()
                .find(|(_, k)| k.eq_ignore_ascii_case(&public))
                .map(|(name, _)| name.to_owned())
        })
        .ok_or_else(|| {
            format!(
                "the key's public half {public} is not one of the approvers the policy names in \
                 `[approvals] approvers` (give `--policy`): no reader would take its re-pins"
            )
        })?;
    let server = Server::untrusted(review.server());
    let mut done = Vec::new();
    for reviewed in review.hidden_by_drift() {
        if !reviewed.status().is_change() {
            continue;
        }
        let name = reviewed.manifest().name();
        let Some(tool) = tools.iter().find(|t| t["name"] == name) else {
            continue;
        };
        // The message always begins with the re-pin domain, which is all `sign_repin` checks.
        lock.repin(&server, tool, &approver, &public, |message| {
            key.sign_repin(message).unwrap_or_default()
        })
        .map_err(|e| e.to_string())?;
        done.push(name.to_owned());
    }
    Ok((approver, done))
}

/// The lockfile at `path` (`None` when there is none), governed by `policy` when there is one
/// ([`governed`]); without a policy, no wording drift is accepted and every re-pin is refused.
pub fn load(
    path: &std::path::Path,
    policy: Option<&Policy>,
    server: &str,
) -> Result<Option<Lockfile>, String> {
    let lock = Lockfile::load(path).map_err(|e| e.to_string())?;
    Ok(lock.map(|lock| match policy {
        Some(policy) => governed(lock, policy, server),
        None => lock,
    }))
}

/// `capability pin --review`: the review as a person reads it, and the exit status (1 when
/// drift hides a tool, a pinned one is gone, or the server is not pinned). With `key`
/// (`--approve --key FILE`), also writes to `path` the lockfile `lock` with the changed tools
/// re-pinned ([`repin_changed`]), signed with the approver's secret key read from that file,
/// and says so (status 0).
pub fn review(
    review: &Review,
    lock: &Lockfile,
    tools: &[Value],
    policy: Option<&Policy>,
    key: Option<&std::path::Path>,
    path: &std::path::Path,
) -> Result<(String, u8), String> {
    let report = review.report().to_string();
    let Some(key) = key else {
        return Ok((report, u8::from(review.hides() || !review.is_pinned())));
    };
    let text = std::fs::read_to_string(key)
        .map_err(|e| format!("cannot read the key file `{}`: {e}", key.display()))?;
    let key = SecretKey::from_text(&text).map_err(|e| format!("`{}`: {e}", key.display()))?;
    let mut lock = lock.clone();
    let (approver, done) = repin_changed(&mut lock, review, tools, policy, &key)?;
    crate::files::replace_file(path, lock.to_toml_string().as_bytes())
        .map_err(|e| e.to_string())?;
    let said = format!(
        "{report}\n\nre-pinned {} tools of server `{}` in {}, signed by approver `{approver}`: \
         {}. Each is taken only while the server serves exactly the descriptor shown above.",
        done.len(),
        review.server(),
        path.display(),
        crate::escape::escape(&done.join(", "))
    );
    Ok((said, 0))
}
