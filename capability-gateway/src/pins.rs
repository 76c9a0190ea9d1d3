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
/// drift hides a tool, a pinned one is gone, or the server is not pinned). With `approve`
/// (`--approve --key FILE --audit TRAIL`), also re-pins the changed tools ([`repin_changed`]),
/// signed with the approver's secret key read from that file, records the re-pin in the trail
/// ([`record_repin`]), then writes to `path` the lockfile `lock` with the re-pins, and says so
/// (status 0). A trail that cannot take the record leaves the lockfile as it was.
pub fn review(
    review: &Review,
    lock: &Lockfile,
    tools: &[Value],
    policy: Option<&Policy>,
    approve: Option<(&std::path::Path, &str)>,
    path: &std::path::Path,
) -> Result<(String, u8), String> {
    let report = review.report().to_string();
    let Some((key, trail)) = approve else {
        return Ok((report, u8::from(review.hides() || !review.is_pinned())));
    };
    let text = std::fs::read_to_string(key)
        .map_err(|e| format!("cannot read the key file `{}`: {e}", key.display()))?;
    let key = SecretKey::from_text(&text).map_err(|e| format!("`{}`: {e}", key.display()))?;
    let mut lock = lock.clone();
    let (approver, done) = repin_changed(&mut lock, review, tools, policy, &key)?;
    if !done.is_empty() {
        let sink = crate::trail::open_for_record(trail, &format!("pin:{}", review.server()))?;
        let recorded = record_repin(&lock, review.server(), &approver, &done, &sink);
        let closed = sink.close();
        recorded.map_err(|e| format!("the re-pin could not be recorded in {trail}: {e}"))?;
        closed.map_err(|e| format!("the audit trail {trail} could not be closed: {e}"))?;
    }
    crate::files::replace_file(path, lock.to_toml_string().as_bytes())
        .map_err(|e| e.to_string())?;
    let said = format!(
        "{report}\n\nre-pinned {} tools of server `{}` in {}, signed by approver `{approver}`: \
         {}. Each is taken only while the server serves exactly the descriptor shown above.{}",
        done.len(),
        review.server(),
        path.display(),
        crate::escape::escape(&done.join(", ")),
        if done.is_empty() {
            String::new()
        } else {
            format!(" Recorded in {trail} as `pin/approved`.")
        }
    );
    Ok((said, 0))
}

/// Records in the trail that `approver` re-pinned the tools `done` of `server` in `lock`: a
/// notice `pin/approved` (its target the server) whose input names the approver and their
/// public key, and per tool the hash of the pin replaced (`from`), the descriptor hash
/// reviewed and taken (`hash`), and the approver's signature, chained like every record.
pub fn record_repin(
    lock: &Lockfile,
    server: &str,
    approver: &str,
    done: &[String],
    sink: &std::sync::Arc<dyn capability::audit::AuditSink>,
) -> Result<(), capability::audit::AuditError> {
    let pins = lock.server(server);
    let mut key = String::new();
    let tools: Vec<Value> = done
        .iter()
        .filter_map(|tool| {
            let pin = pins?.get(tool)?;
            let repin = pin.repin()?;
            repin.key().clone_into(&mut key);
            Some(
                json!({"tool": tool, "from": pin.hash(), "hash": repin.hash(),
                        "signature": repin.signature()}),
            )
        })
        .collect();
    let input = json!({"server": server, "approver": approver, "key": key, "tools": tools});
    let session = format!("pins:{server}");
    let why = format!(
        "re-pinned by approver `{approver}`, signed against the descriptors reviewed: {}",
        done.join(", ")
    );
    AuditedDispatch::new(sink.clone()).notice(
        &Subject::new("(pin)", &session),
        Caller::new(approver),
        "pin/approved",
        server,
        &input,
        Reason::note("repin_approved", why),
    )?;
    Ok(())
}

/// Records in `store` that `by` pinned these tools of `server` now (`capability pin --store`),
/// with the hashes the lockfile pins. The lockfile is already written: a failure says so.
pub fn record_in_store(
    store: &dyn capability_store::Store,
    server: &Server,
    tools: &[Value],
    by: &str,
    now: u64,
) -> Result<(), String> {
    let mut pins = Lockfile::default();
    pins.pin(server, tools).map_err(|e| e.to_string())?;
    let tools: Vec<capability_store::ToolHash> = pins
        .server(server.name())
        .into_iter()
        .flatten()
        .map(|(tool, locked)| capability_store::ToolHash {
            server: server.name().to_owned(),
            tool: tool.clone(),
            descriptor_hash: locked.hash().to_owned(),
        })
        .collect();
    store.pinned_tools(&tools, by, now).map_err(|e| {
        format!(
            "the lockfile is written, but the pins could not be recorded in {}: {e} (pin again \
             to record them)",
            store.describe()
        )
    })
}
