//! A lockfile as the policy governs it: whether a server's wording drift is accepted (its
//! `[servers]` entry's `accept_wording_drift`), and which re-pins are taken (each signature
//! checked with the Ed25519 keys of the policy's `[approvals] approvers`, through
//! `capability::gate`). Every reader of a lockfile in the engine and on the command line goes
//! through [`governed`], so `capability verify`, `capability check`, the proxy and the gateway
//! judge drift alike; and [`record_accepted`] writes what was shown though changed to the trail.

use capability::Policy;
use capability::audit::{AuditedDispatch, Caller, Reason, Subject};
use capability::gate::PublicKey;
use capability::mcp::{DriftStatus, Lockfile, Review};
use serde_json::json;

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
