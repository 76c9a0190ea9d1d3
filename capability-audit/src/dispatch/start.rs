//! The start of a call: its record made, the budget and the decider asked, and for a call that
//! may run, the records kept from failed appends written and then its intent.

use std::sync::atomic::Ordering;

use capability_core::authz::{Authorize, Denial, DenyReason};

use super::{AuditedDispatch, Early, Pending, Request, Subject, not_written};
use crate::budget::SessionState;
use crate::trace::{CallSpan, emit_trace};
use crate::*;
use serde_json::Value;

use super::Caller;

impl AuditedDispatch {
    /// The record of a call, before its verdict: `true` with it when its input nests too deep
    /// to be recorded or decided (its input is then not kept).
    pub(super) fn record(
        &self,
        subject: &Subject<'_>,
        caller: Caller<'_>,
        request: &Request<'_>,
        call_id: String,
        key: &DigestKey,
    ) -> (AuditRecord, bool) {
        let too_deep =
            capability_core::json::depth(request.input, capability_core::json::MAX_DEPTH)
                > capability_core::json::MAX_DEPTH;
        // Keyed, like the sensitive fields: an unkeyed digest of the whole input would let
        // anyone holding the trail confirm a guessed value of one of them.
        let ((input_digest, input_size), input) = if too_deep {
            ((key.digest(b""), 0), Value::Null)
        } else {
            let digested = crate::scratch::with_text(|canonical| {
                capability_core::json::write_canonical_json(canonical, request.input);
                (key.digest(canonical.as_bytes()), canonical.len() as u64)
            });
            let mut redacted = request.input.clone();
            if let capability_core::authz::Action::CallTool(tool) = request.action {
                (self.redactor)(tool, key, &mut redacted);
            }
            (digested, redacted)
        };
        let record = AuditRecord {
            writer: String::new(),
            seq: 0,
            time: utc_now(),
            agent: caller.agent.to_owned(),
            call_id: Some(call_id),
            phase: None,
            method: request.method.map(str::to_owned),
            principal: caller.principal.cloned(),
            role: subject.role.to_owned(),
            session: subject.session.to_owned(),
            step: caller.step.map(str::to_owned),
            incident_id: caller.incident.map(str::to_owned),
            provider: request.action.server().map(str::to_owned),
            tool: request.action.target().to_owned(),
            descriptor_hash: request.descriptor_hash().to_owned(),
            policy_version: self
                .policy_version
                .clone()
                .or_else(|| subject.policy_version.map(str::to_owned)),
            verdict: Verdict::Allowed,
            reasons: caller.consent.map(Reason::consent).into_iter().collect(),
            input,
            input_digest,
            input_size,
            output_digest: None,
            output_size: None,
            latency_us: None,
            success: None,
            error: None,
            prev: String::new(),
            hash: String::new(),
        };
        (record, too_deep)
    }

    /// Decides, and for a call that may run writes its intent. `Ok` carries the outcome to
    /// complete (none when the sink has no digest key, under `AllowAndCount`).
    pub(super) fn before(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        request: &Request<'_>,
        call_id: String,
        span: &CallSpan,
    ) -> Result<Option<Pending>, Early> {
        let subject = Subject::of(ctx);
        let key = match self.sink.digest_key() {
            Ok(key) => key,
            Err(error) => return self.unkeyed(ctx, request, error),
        };
        let (mut record, too_deep) = self.record(&subject, caller, request, call_id, key);
        if too_deep {
            let reason = DenyReason::Undecidable {
                why: format!(
                    "its input nests deeper than {} levels",
                    capability_core::json::MAX_DEPTH
                ),
            };
            record.verdict = Verdict::Denied;
            record.reasons = vec![Reason::deny(&reason)];
            self.write(record, span);
            return Err(Early::Denied(Denial::for_action(
                ctx.principal(),
                ctx.session(),
                &request.action,
                vec![reason],
            )));
        }
        if let Some(error) = caller.invalid() {
            // Refused before it is decided (so it does not count against the budget); the
            // record says why, without the id it could not store.
            record.incident_id = None;
            record.verdict = Verdict::AuditFailed;
            record.reasons = vec![Reason::invalid_request(error.to_string())];
            self.write(record, span);
            return Err(Early::AuditFailed(error));
        }
        if let Some(early) = self.decide(ctx, request) {
            match &early {
                Early::Denied(denial) => {
                    record.verdict = Verdict::Denied;
                    record.reasons = denial.reasons().iter().map(Reason::deny).collect();
                }
                Early::Degrade(reason) => {
                    record.verdict = Verdict::Degraded;
                    if let DegradeReason::Denied { reasons, .. } = reason {
                        record.reasons = reasons.iter().map(Reason::deny).collect();
                    }
                    record.reasons.push(Reason::degrade(reason));
                }
                Early::AuditFailed(_) => {}
            }
            // Not running the call does not depend on its record being written.
            self.write(record, span);
            return Err(early);
        }
        if self.on_failure == OnAuditFailure::Deny {
            // Every record kept from a failed append goes first: nothing runs before them.
            let blocked = self
                .backlog
                .drain(self.sink.as_ref(), key)
                .map_err(|error| {
                    format!(
                        "an earlier record could not be written ({error}); nothing runs until \
                         it is"
                    )
                })
                .and_then(|()| self.sink.ready().map_err(|error| error.to_string()));
            if let Err(why) = blocked {
                record.verdict = Verdict::AuditFailed;
                record.reasons = vec![Reason::audit_failed(why.clone())];
                let error = self.backlog.last_error().unwrap_or(AuditError::Io {
                    path: String::new(),
                    message: why,
                });
                self.write(record, span);
                return Err(Early::AuditFailed(error));
            }
        }
        record.phase = Some(Phase::Intent);
        match self.sink.append_in_place(&mut record) {
            Ok(()) => {
                self.wrote(&record);
                span.record_seq(record.seq);
                emit_trace(&record);
            }
            Err(error) => {
                not_written(&record.session, &record.tool, &error);
                match self.on_failure {
                    OnAuditFailure::Deny => {
                        // The call does not run; the record of that waits to be written.
                        record.phase = None;
                        record.verdict = Verdict::AuditFailed;
                        record.reasons = vec![Reason::audit_failed(format!(
                            "its intent could not be written, so it did not run: {error}"
                        ))];
                        self.backlog.keep(record, &error);
                        return Err(Early::AuditFailed(error));
                    }
                    OnAuditFailure::AllowAndCount => {
                        self.lost.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        record.phase = Some(Phase::Outcome);
        Ok(Some(Pending { record }))
    }

    /// The sink has no digest key: no record can be made without exposing what the key
    /// protects, so the call goes as one whose record cannot be written (denied under
    /// [`OnAuditFailure::Deny`], run and counted as lost under `AllowAndCount`).
    fn unkeyed(
        &self,
        ctx: &(impl Authorize + ?Sized),
        request: &Request<'_>,
        error: AuditError,
    ) -> Result<Option<Pending>, Early> {
        let early = self.decide(ctx, request);
        not_written(ctx.session(), request.action.target(), &error);
        if self.on_failure == OnAuditFailure::AllowAndCount {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
        match early {
            Some(early) => Err(early),
            None if self.on_failure == OnAuditFailure::Deny => Err(Early::AuditFailed(error)),
            None => Ok(None),
        }
    }

    /// The session's budget and the decider: `None` when the call may run.
    fn decide(&self, ctx: &(impl Authorize + ?Sized), request: &Request<'_>) -> Option<Early> {
        let Some(budget) = self.budget else {
            // No budget: nothing counted, nothing kept per session.
            return self.decided(ctx, request).map(Early::Denied);
        };
        let mut sessions = lock(&self.sessions);
        // Looked up by reference first: the session's name is copied once, not every call.
        if let Some(state) = sessions.get_mut(ctx.session()) {
            return self.decide_in(budget, state, ctx, request);
        }
        let state = sessions.entry(ctx.session().to_owned()).or_default();
        self.decide_in(budget, state, ctx, request)
    }

    /// [`decide`](Self::decide) under the session's state.
    fn decide_in(
        &self,
        budget: Budget,
        state: &mut SessionState,
        ctx: &(impl Authorize + ?Sized),
        request: &Request<'_>,
    ) -> Option<Early> {
        if state.degraded {
            return Some(Early::Degrade(DegradeReason::AlreadyDegraded));
        }
        if state.calls >= budget.max_calls {
            state.degraded = true;
            return Some(Early::Degrade(DegradeReason::BudgetExhausted {
                max_calls: budget.max_calls,
            }));
        }
        state.calls += 1;
        let denial = self.decided(ctx, request)?;
        match self.over_budget(budget, state, denial.reasons(), || denial.to_string()) {
            Some(degrade) => Some(Early::Degrade(degrade)),
            None => Some(Early::Denied(denial)),
        }
    }

    /// The decider's answer: `None` when the call may run, else its denial.
    fn decided(&self, ctx: &(impl Authorize + ?Sized), request: &Request<'_>) -> Option<Denial> {
        let decision = ctx.decide_action(&request.action);
        if decision.is_allowed() {
            return None;
        }
        Some(Denial::for_action(
            ctx.principal(),
            ctx.session(),
            &request.action,
            decision.into_reasons(),
        ))
    }

    /// Counts a refused call against its session; the degrade if it degraded the session (or
    /// the session was degraded already).
    pub(super) fn count_refusal(
        &self,
        session: &str,
        reasons: &[DenyReason],
    ) -> Option<DegradeReason> {
        let no_role = reasons
            .iter()
            .all(|r| matches!(r, DenyReason::NoRole | DenyReason::UnknownRole { .. }));
        let budget = self.budget.filter(|_| !no_role)?;
        let mut sessions = lock(&self.sessions);
        let state = sessions.entry(session.to_owned()).or_default();
        if state.degraded {
            return Some(DegradeReason::AlreadyDegraded);
        }
        self.over_budget(budget, state, reasons, || {
            let text: Vec<String> = reasons.iter().map(ToString::to_string).collect();
            text.join("; ")
        })
    }

    /// Counts a denial; how the session degrades, when this denial is one too many.
    fn over_budget(
        &self,
        budget: Budget,
        state: &mut SessionState,
        reasons: &[DenyReason],
        denial: impl FnOnce() -> String,
    ) -> Option<DegradeReason> {
        state.denials += 1;
        let lacks_permission = reasons
            .iter()
            .any(|r| !matches!(r, DenyReason::UnknownRole { .. } | DenyReason::NoRole));
        if state.denials <= budget.max_denials || !lacks_permission {
            return None;
        }
        state.degraded = true;
        Some(if budget.max_denials == 0 {
            DegradeReason::Denied {
                denial: denial(),
                reasons: reasons.to_vec(),
            }
        } else {
            DegradeReason::TooManyDenials {
                max_denials: budget.max_denials,
            }
        })
    }
}
