//! The page's data and actions: the proposals waiting (`GET api/proposals`), an approval
//! signed in the browser (`POST api/approve`), a rejection (`POST api/reject`). Each needs a
//! caller whose role `[approvals] page_roles` lists; each action, and each refusal, is a
//! notice on the trail.

use std::sync::Arc;

use capability::audit::{Reason, Subject};
use capability::gate::{Approval, Clock, MAX_VALIDITY_SECS, SystemClock};
use capability_http::{Authenticated, EdgeResponse};
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{error, json};
use crate::serve::approvals::Approvals;
use crate::serve::approving::{Undone, Waiting};
use crate::serve::gateway::{Gateway, Snapshot};
use crate::serve::who::Who;

/// What `POST api/approve` takes: the proposal's id and the approval signed for it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Given {
    proposal: String,
    approval: Value,
}

/// What `POST api/reject` takes: the proposal's id and why.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Rejected {
    proposal: String,
    #[serde(default)]
    reason: String,
}

/// The caller, when it may use the page: who it is, the snapshot it is served from and the
/// gateway's approvals; else the answer (recorded when it is a refusal of a known caller).
struct Approver {
    who: Who,
    snapshot: Arc<Snapshot>,
    approvals: Arc<Approvals>,
}

fn approver(
    gateway: &Gateway,
    caller: Option<&Authenticated>,
    method: &str,
) -> Result<Approver, Box<EdgeResponse>> {
    let Some(caller) = caller else {
        return Err(Box::new(error(
            StatusCode::UNAUTHORIZED,
            "give the page your token: it is sent as `Authorization: Bearer <token>`",
        )));
    };
    let snapshot = gateway.current();
    let who = gateway.http_caller(&snapshot, Some(caller), None);
    let (Some(settings), Some(approvals)) =
        (snapshot.policy.approvals(), snapshot.approvals.clone())
    else {
        return Err(Box::new(error(
            StatusCode::NOT_FOUND,
            "this gateway holds no calls for approval (its policy has no `[approvals]`)",
        )));
    };
    let role = caller.role.as_deref().unwrap_or("(none)");
    if !settings.may_use_page(role) {
        let why = format!(
            "role `{role}` may not use the approvals page: `[approvals] page_roles` lists the \
             roles that may"
        );
        let _ = record(
            gateway,
            &snapshot,
            &who,
            method,
            "approvals",
            &json!({}),
            Reason::note("refused", why.clone()),
        );
        return Err(Box::new(error(StatusCode::FORBIDDEN, &why)));
    }
    Ok(Approver {
        who,
        snapshot,
        approvals,
    })
}

/// A notice on the trail, as the caller: whether it was written.
fn record(
    gateway: &Gateway,
    snapshot: &Snapshot,
    who: &Who,
    method: &str,
    target: &str,
    input: &Value,
    reason: Reason,
) -> Result<(), String> {
    let subject =
        Subject::new(who.role(), who.session()).policy_version(snapshot.policy_version.as_deref());
    gateway
        .dispatch
        .notice(&subject, who.caller(), method, target, input, reason)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// `GET api/proposals`: the proposals waiting, with what the browser needs to sign one (the
/// audience, the approvers' public keys, the longest validity the gate takes).
pub(super) fn list(gateway: &Gateway, caller: Option<&Authenticated>) -> EdgeResponse {
    let page = match approver(gateway, caller, "approvals/list") {
        Ok(page) => page,
        Err(refused) => return *refused,
    };
    let Some(settings) = page.snapshot.policy.approvals() else {
        return error(StatusCode::NOT_FOUND, "no `[approvals]`");
    };
    let waiting = match page.approvals.waiting() {
        Ok(waiting) => waiting,
        Err(why) => return error(StatusCode::INTERNAL_SERVER_ERROR, &why),
    };
    let proposals: Vec<Value> = waiting.iter().map(shown).collect();
    let approvers: Vec<Value> = settings
        .approvers()
        .map(|(name, key)| json!({ "name": name, "public_key": key }))
        .collect();
    json(
        StatusCode::OK,
        &json!({
            "audience": settings.audience(),
            "now": SystemClock.now(),
            "max_validity_secs": settings.max_validity_secs().unwrap_or(MAX_VALIDITY_SECS),
            "approvers": approvers,
            "you": { "role": page.who.role(), "principal": page.who.proposer() },
            "proposals": proposals,
        }),
    )
}

/// A waiting proposal as the page shows it.
fn shown(waiting: &Waiting) -> Value {
    let kept = &waiting.kept;
    json!({
        "id": kept.id,
        "server": kept.server,
        "tool": kept.tool,
        "proposer": kept.proposer,
        "created_at": kept.created_at,
        "expires_at": kept.expires_at,
        "proposal": waiting.file,
        "approved": waiting.approval.as_ref().map(|a| json!({
            "id": a.id, "approver": a.approver, "expires_at": a.expires_at,
        })),
    })
}

/// `POST api/approve`: an approval signed in the browser, checked by the gate and kept for the
/// call's retry.
pub(super) fn approve(
    gateway: &Gateway,
    caller: Option<&Authenticated>,
    body: &[u8],
) -> EdgeResponse {
    const METHOD: &str = "approvals/approve";
    let page = match approver(gateway, caller, METHOD) {
        Ok(page) => page,
        Err(refused) => return *refused,
    };
    let refuse = |status: StatusCode, target: &str, input: &Value, why: String| {
        let _ = record(
            gateway,
            &page.snapshot,
            &page.who,
            METHOD,
            target,
            input,
            Reason::note("refused", why.clone()),
        );
        error(status, &why)
    };
    let given = match read::<Given>(body) {
        Ok(given) => given,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, "approvals", &json!({}), why),
    };
    let input = json!({ "proposal": given.proposal, "approval": given.approval });
    let approval = match Approval::from_json(&given.approval.to_string()) {
        Ok(approval) => approval,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "approvals",
                &input,
                format!("not an approval: {e}"),
            );
        }
    };
    let waiting = match page.approvals.take(&given.proposal, &approval) {
        Ok(waiting) => waiting,
        Err(undone) => {
            let (status, why) = status_of(undone);
            return refuse(status, &approval.tool, &input, why);
        }
    };
    let said = format!(
        "{} approved proposal {} of {} (approval {}, valid until {}) through the approvals page",
        approval.approver,
        given.proposal,
        waiting.kept.proposer,
        approval.id,
        capability::audit::time::utc_at(approval.expires_at),
    );
    if let Err(e) = record(
        gateway,
        &page.snapshot,
        &page.who,
        METHOD,
        &waiting.kept.tool,
        &input,
        Reason::note("approved", said),
    ) {
        // Not on record: not kept either.
        if let Some(path) = page.approvals.approval_path(&given.proposal) {
            let _ = std::fs::remove_file(path);
        }
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the approval could not be recorded, so it is not kept: {e}"),
        );
    }
    json(
        StatusCode::CREATED,
        &json!({
            "proposal": given.proposal,
            "approval": approval.id,
            "approver": approval.approver,
            "expires_at": approval.expires_at,
        }),
    )
}

/// `POST api/reject`: the proposal forgotten, its retry told why.
pub(super) fn reject(
    gateway: &Gateway,
    caller: Option<&Authenticated>,
    body: &[u8],
) -> EdgeResponse {
    const METHOD: &str = "approvals/reject";
    let page = match approver(gateway, caller, METHOD) {
        Ok(page) => page,
        Err(refused) => return *refused,
    };
    let rejected = match read::<Rejected>(body) {
        Ok(rejected) => rejected,
        Err(why) => return error(StatusCode::BAD_REQUEST, &why),
    };
    let input = json!({ "proposal": rejected.proposal, "reason": rejected.reason });
    let by = page.who.proposer();
    let waiting = match page
        .approvals
        .reject(&rejected.proposal, &by, &rejected.reason)
    {
        Ok(waiting) => waiting,
        Err(undone) => {
            let (status, why) = status_of(undone);
            return error(status, &why);
        }
    };
    let said = format!(
        "{by} rejected proposal {} of {} through the approvals page: {}",
        rejected.proposal, waiting.kept.proposer, rejected.reason
    );
    if let Err(e) = record(
        gateway,
        &page.snapshot,
        &page.who,
        METHOD,
        &waiting.kept.tool,
        &input,
        Reason::note("rejected", said),
    ) {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the proposal is rejected, but the rejection could not be recorded: {e}"),
        );
    }
    json(
        StatusCode::OK,
        &json!({ "proposal": rejected.proposal, "rejected": true }),
    )
}

/// A JSON body (a key written twice anywhere refused).
fn read<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let text = std::str::from_utf8(body).map_err(|_| "the body is not UTF-8".to_owned())?;
    capability::json::no_duplicate_keys(text).map_err(|e| format!("the body: {e}"))?;
    serde_json::from_str(text).map_err(|e| format!("the body: {e}"))
}

fn status_of(undone: Undone) -> (StatusCode, String) {
    match undone {
        Undone::NotWaiting(why) => (StatusCode::NOT_FOUND, why),
        Undone::Refused(why) => (
            StatusCode::BAD_REQUEST,
            format!("the approval does not hold: {why}"),
        ),
        Undone::Kept(why) => (StatusCode::CONFLICT, why),
        Undone::Failed(why) => (StatusCode::INTERNAL_SERVER_ERROR, why),
    }
}
