//! The held path of a call (`approvals.rs`): whether a call is held for a human's approval,
//! and the consent it carries or the refusal (a proposal) it gets.

use ::rmcp::model::CallToolRequestParams;
use ::rmcp::service::RequestContext;
use ::rmcp::{ErrorData, RoleServer};
use serde_json::{Map, Value, json};

use capability::audit::{Consent, ConsentKind};
use capability::authz::DenyReason;
use capability::authz::{Effect, Hold};
use capability::gate::{Approval, CallTarget, GrantedCall};

use crate::serve::approvals::{APPROVAL_META, Approvals, Held, propose, read_approval};
use crate::serve::asked::answered_input;
use crate::serve::called::Route;
use crate::serve::gateway::{Gateway, Snapshot};
use crate::serve::who::Who;

/// What a held tool's description starts with in a listing.
const HELD_NOTE: &str = "[Needs a human's approval of each call: a call without one \
    is answered with a proposal to sign (`capability approve`), then retried.] ";

/// What a tool the client's human may confirm starts with in a listing.
const CONFIRM_NOTE: &str = "[Each call is confirmed by the user first (the gateway asks \
    through elicitation).] ";

/// How long the gateway waits for the client's human to confirm a call.
const CONFIRM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

impl Gateway {
    /// Says in a held tool's listed description that each call needs an approval.
    pub(crate) fn say_held(
        &self,
        snapshot: &Snapshot,
        who: &Who,
        (server, tool): &(String, String),
        listed: &mut ::rmcp::model::Tool,
    ) {
        let note = match snapshot.policy.hold(who.role(), Some(server), tool) {
            Some(Hold::Signature) => HELD_NOTE,
            Some(Hold::Confirmation) => CONFIRM_NOTE,
            None => return,
        };
        let said = listed.description.as_deref().unwrap_or_default();
        listed.description = Some(format!("{note}{said}").into());
    }

    /// A call's consent, when it is held (`None` when it is not), and the input to decide and
    /// record: for a held call, the signed arguments, also written into `forwarded` (and the
    /// gateway's own `_meta` keys taken out of it).
    #[allow(clippy::too_many_arguments)] // the call, as the handler has it; called once
    pub(crate) async fn consented(
        &self,
        snapshot: &Snapshot,
        who: &Who,
        shown: &str,
        route: &Route<'_>,
        input: Value,
        context: &RequestContext<RoleServer>,
        forwarded: &mut CallToolRequestParams,
    ) -> Result<(Option<Consent>, Value), ErrorData> {
        let Some(hold) = self.holds(snapshot, who, route) else {
            return Ok((None, input));
        };
        // rmcp hands the request's `_meta` over in the context; the server gets none of the
        // gateway's own keys (an approval, a rationale).
        let mut meta = context.meta.0.0.clone();
        if let Some(sent) = &mut forwarded.meta {
            meta.extend(sent.0.0.clone());
            crate::serve::approvals::strip_meta(&mut sent.0.0);
        }
        // A client of 2026-07-28 answers the input-required result a proposal was: the
        // approval it gives goes where a `_meta` one would; the server hears none of it.
        if let Err(why) = answered_input(forwarded, &mut meta) {
            let reasons = [DenyReason::ApprovalRefused { why }];
            return Err(self.refuse_held(snapshot, who, shown, route, &input, &reasons, None));
        }
        if hold == Hold::Confirmation
            && let Some(consent) = self
                .confirmed(snapshot, who, shown, route, &input, context)
                .await?
        {
            return Ok((Some(consent), input));
        }
        let (consent, args) = self.consent(snapshot, who, shown, route, &input, Some(&meta))?;
        forwarded.arguments = args.as_object().cloned();
        Ok((Some(consent), args))
    }

    /// Whether `who`'s call of `route` is held for a human's approval: a role's `approve`
    /// pattern catches it, and the role is allowed the tool (an approval never lifts a
    /// denial, which the one decision records as such).
    pub(crate) fn holds(&self, snapshot: &Snapshot, who: &Who, route: &Route<'_>) -> Option<Hold> {
        snapshot
            .policy
            .hold(who.role(), Some(route.server), route.tool)
            .filter(|_| route.ctx().decide(route.manifest).is_allowed())
    }

    /// Asks the client's human to confirm a call (MCP elicitation): the consent when they
    /// accept; `None` when the client cannot ask (no form elicitation), so a signed approval
    /// is asked for instead; the refusal, recorded, when they decline, cancel or do not answer.
    async fn confirmed(
        &self,
        snapshot: &Snapshot,
        who: &Who,
        shown: &str,
        route: &Route<'_>,
        input: &Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Consent>, ErrorData> {
        use ::rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
        if !context
            .peer
            .supported_elicitation_modes()
            .contains(&::rmcp::service::ElicitationMode::Form)
        {
            return Ok(None);
        }
        let args = serde_json::to_string_pretty(input).unwrap_or_default();
        let message = format!(
            "{} asks to run `{}` on `{}` (shown as `{shown}`) with these arguments:\n{args}\n\
             Allow this one call?",
            who.proposer(),
            route.tool,
            route.server,
        );
        let schema = ElicitationSchema::builder()
            .required_bool("allow")
            .build()
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let asked = context
            .peer
            .create_elicitation_with_timeout(
                ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message,
                    requested_schema: schema,
                },
                Some(CONFIRM_TIMEOUT),
            )
            .await;
        let why = match asked {
            Ok(answer)
                if answer.action == ElicitationAction::Accept
                    && answer
                        .content
                        .as_ref()
                        .and_then(|c| c.get("allow"))
                        .and_then(Value::as_bool)
                        == Some(true) =>
            {
                return Ok(Some(Consent {
                    kind: ConsentKind::Elicited,
                    id: format!("elicitation:{}", context.id),
                    by: format!("the client of {}", who.proposer()),
                    approval: None,
                }));
            }
            Ok(answer) if answer.action == ElicitationAction::Accept => {
                "the client's human did not allow it".to_owned()
            }
            Ok(answer) => format!("the client's human answered {:?}", answer.action).to_lowercase(),
            Err(error) => format!("the client's human could not be asked: {error}"),
        };
        let reasons = [DenyReason::ApprovalRefused { why }];
        Err(self.refuse_held(snapshot, who, shown, route, input, &reasons, None))
    }

    /// Records a held call's refusal; the client's error, with `data` added to its data.
    #[allow(clippy::too_many_arguments)] // the call as the held path has it
    fn refuse_held(
        &self,
        snapshot: &Snapshot,
        who: &Who,
        shown: &str,
        route: &Route<'_>,
        input: &Value,
        reasons: &[DenyReason],
        data: Option<Value>,
    ) -> ErrorData {
        let call = capability::audit::Request::mcp(
            "tools/call",
            capability::authz::Action::CallTool(route.manifest),
            input,
        );
        let why = self.refuse(snapshot, who, &call, reasons);
        let mut error = self.refused_item("tool", shown, &why);
        if let (Some(Value::Object(data)), Some(Value::Object(more))) = (&mut error.data, data) {
            data.extend(more);
        }
        error
    }

    /// The consent a held call carries, with the arguments to forward (the canonical JSON the
    /// approver signed); or its refusal, recorded: a proposal when it carries no approval,
    /// the reason when its approval does not hold.
    pub(crate) fn consent(
        &self,
        snapshot: &Snapshot,
        who: &Who,
        shown: &str,
        route: &Route<'_>,
        input: &Value,
        meta: Option<&Map<String, Value>>,
    ) -> Result<(Consent, Value), ErrorData> {
        let refuse = |reasons: Vec<DenyReason>, data: Option<Value>| {
            self.refuse_held(snapshot, who, shown, route, input, &reasons, data)
        };
        let Some(approvals) = snapshot.approvals.as_deref() else {
            let why = "the policy holds it for approval, but the gateway has no approvals \
                       configured";
            return Err(refuse(
                vec![DenyReason::ApprovalRefused {
                    why: why.to_owned(),
                }],
                None,
            ));
        };
        let canonical = capability::json::to_canonical_json(input);
        let held = Held {
            server: route.server,
            tool: route.tool,
            tool_type: format!("mcp:{}/{}", route.server, route.tool),
            descriptor_hash: route.manifest.descriptor_hash(),
            args_digest: capability::gate::args_digest(input),
            canonical,
            proposer: who.proposer(),
        };
        let id = held.id(&approvals.audience);
        let carried = meta.and_then(|m| m.get(APPROVAL_META));
        let (approval, from_file) = match carried {
            // By id: an approval file of the proposals directory.
            Some(Value::String(approval_id)) => match approvals.approval_by_id(approval_id) {
                Some(found) => (found.0, Some(found.1)),
                None => {
                    let why = format!(
                        "no approval `{approval_id}` is in the gateway's proposals directory"
                    );
                    return Err(refuse(vec![DenyReason::ApprovalRefused { why }], None));
                }
            },
            Some(value) => match Approval::from_json(&value.to_string()) {
                Ok(approval) => (approval, None),
                Err(e) => {
                    let why = format!("`_meta[\"{APPROVAL_META}\"]` is not an approval: {e}");
                    return Err(refuse(vec![DenyReason::ApprovalRefused { why }], None));
                }
            },
            None => match approvals.approval_path(&id).filter(|p| p.exists()) {
                Some(path) => match read_approval(&path) {
                    Ok(approval) => (approval, Some(path)),
                    Err(e) => {
                        let why = format!("`{}`: {e}", path.display());
                        return Err(refuse(vec![DenyReason::ApprovalRefused { why }], None));
                    }
                },
                None => {
                    // Rejected on the approvals page: the retry is told, once.
                    if let Some(why) = approvals.rejection(&id) {
                        let reasons = vec![DenyReason::ApprovalRefused { why }];
                        return Err(refuse(reasons, Some(json!({ "proposal_id": id }))));
                    }
                    let mut reasons = Vec::new();
                    match granted(snapshot, approvals, who, route) {
                        Ok(Some(consent)) => {
                            let args = serde_json::from_str(&held.canonical)
                                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                            return Ok((consent, args));
                        }
                        Ok(None) => {}
                        Err(why) => reasons.push(DenyReason::ApprovalRefused { why }),
                    }
                    let (file, path) = propose(approvals, &held, &id, meta)?;
                    let data = json!({
                        "proposal_id": id,
                        "proposal": file,
                        "proposal_file": path.map(|p| p.display().to_string()),
                    });
                    reasons.push(DenyReason::ApprovalRequired { proposal: id });
                    return Err(refuse(reasons, Some(data)));
                }
            },
        };
        let target = CallTarget {
            tool: held.tool,
            tool_type: &held.tool_type,
            descriptor_hash: held.descriptor_hash,
            args_digest: &held.args_digest,
            proposer: &held.proposer,
        };
        match approvals.gate.approve_call(&target, &approval) {
            Ok(approved) => {
                // Used: the next identical call is a new proposal, not this one's replay.
                if let Some(path) = from_file {
                    let _ = std::fs::remove_file(path);
                }
                approvals.used(&id, &approved.approval_id);
                let args = serde_json::from_str(&held.canonical)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                Ok((
                    Consent {
                        kind: ConsentKind::Signed,
                        id: approved.approval_id,
                        by: approved.approver,
                        // The signed approval whole: the call's records show who approved
                        // exactly which arguments, checkable with the approver's key alone.
                        approval: serde_json::to_value(&approval).ok(),
                    },
                    args,
                ))
            }
            Err(error) => Err(refuse(
                vec![DenyReason::ApprovalRefused {
                    why: error.to_string(),
                }],
                Some(json!({ "proposal_id": id })),
            )),
        }
    }
}

/// The consent of a plan grant covering the call (each use counted in the shared ledger), if
/// one does; or why the grants that cover it do not hold (used up, revoked, expired, not
/// genuinely signed).
fn granted(
    snapshot: &Snapshot,
    approvals: &Approvals,
    who: &Who,
    route: &Route<'_>,
) -> Result<Option<Consent>, String> {
    let effective = snapshot.policy.effective_manifest(route.manifest);
    let principal = who.proposer();
    let call = GrantedCall {
        principal: &principal,
        provider: route.server,
        tool: route.tool,
        effect: Effect::of(effective.read_only(), effective.destructive()),
        scopes: effective.required_scopes(),
    };
    let mut refused = None;
    for grant in approvals.plan_grants().iter().filter(|g| g.covers(&call)) {
        match approvals
            .gate
            .use_grant(grant, &call, &*approvals.revocations)
        {
            Ok(used) => {
                return Ok(Some(Consent {
                    kind: ConsentKind::Granted,
                    id: used.grant_id,
                    by: used.issuer,
                    approval: None,
                }));
            }
            Err(error) => refused = Some(format!("grant {}: {error}", grant.id)),
        }
    }
    refused.map_or(Ok(None), Err)
}
