//! Audited dispatch: every tool call decided, recorded, run and recorded again.

mod caller;
mod guard;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::Instrument;

use serde::Serialize;
use serde_json::Value;

use capability_core::authz::{Authorize, Denial, DenyReason};
use capability_core::manifest::{Capability, CapabilityManifest};

use crate::budget::SessionState;
use crate::trace::{CallFields, call_span, emit_trace, end_span};
use crate::*;

pub use caller::{Caller, MAX_INCIDENT_ID_CHARS};
use guard::CallGuard;

/// A redaction hook: given the tool, the sink's [digest key](AuditSink::digest_key) and the
/// input, hide what must not be stored. The default ([`redact_sensitive`]) replaces each of the
/// tool's [sensitive fields](CapabilityManifest::sensitive_fields) by its keyed digest
/// ([`DigestKey::digest_json`]); a hook of your own can call it and hide more.
pub type Redactor = Arc<dyn Fn(&CapabilityManifest, &DigestKey, &mut Value) + Send + Sync>;

/// The one entry point for a tool call: decide, record, run, record the outcome.
///
/// Fail-closed by itself: once a record could not be written, every call is refused
/// ([`Outcome::AuditFailed`], the tool does not run) until a record is written again, whatever
/// the sink's [`ready`](AuditSink::ready) says (unless [`OnAuditFailure::AllowAndCount`]). A
/// call that runs leaves exactly one record even when the tool panics (the panic goes on to the
/// caller) or its future is dropped mid-way: the record then says `success: false` and why.
/// Each call runs inside a `tracing` span named for OpenTelemetry ([`trace`](crate::trace)).
///
/// ```
/// use capability::CapabilityManifest;
/// use capability::audit::{Caller, AuditedDispatch, MemorySink, Outcome};
/// use capability::authz::{Ceiling, ToolContext};
/// use serde_json::json;
/// use std::sync::Arc;
///
/// let sink = Arc::new(MemorySink::new());
/// let dispatch = AuditedDispatch::new(sink.clone());
/// let ctx = ToolContext::new("monitor", "s-1", Ceiling::ReadOnly);
/// let list = CapabilityManifest::builder("list_pods").read_only(true).build()?;
/// let caller = Caller::new("watcher").step("triage").incident("INC-2026-0042");
///
/// let out: Outcome<usize, String> = dispatch.call(&ctx, caller, &list, &json!({"ns": "prod"}), || Ok(3));
/// assert!(matches!(out, Outcome::Done(3)));
/// assert_eq!(sink.records().len(), 1);
/// # Ok::<(), capability::ManifestError>(())
/// ```
pub struct AuditedDispatch {
    sink: Arc<dyn AuditSink>,
    budget: Budget,
    on_failure: OnAuditFailure,
    policy_version: Option<String>,
    redactor: Redactor,
    sessions: Mutex<HashMap<String, SessionState>>,
    lost: AtomicU64,
    /// Set when an append failed (under `Deny`), cleared when one succeeds.
    failing: AtomicBool,
    /// The last append error, while `failing`.
    failure: Mutex<Option<AuditError>>,
}

impl fmt::Debug for AuditedDispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditedDispatch")
            .field("budget", &self.budget)
            .field("on_failure", &self.on_failure)
            .field("policy_version", &self.policy_version)
            .finish_non_exhaustive()
    }
}

impl AuditedDispatch {
    /// A dispatcher writing to `sink`, with the default budget and fail-closed auditing.
    pub fn new(sink: Arc<dyn AuditSink>) -> Self {
        AuditedDispatch {
            sink,
            budget: Budget::default(),
            on_failure: OnAuditFailure::Deny,
            policy_version: None,
            redactor: Arc::new(redact_sensitive),
            sessions: Mutex::new(HashMap::new()),
            lost: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            failure: Mutex::new(None),
        }
    }

    /// Sets the per-session budget.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Sets what happens when a record cannot be written.
    pub fn on_audit_failure(mut self, policy: OnAuditFailure) -> Self {
        self.on_failure = policy;
        self
    }

    /// Records this policy version with every decision.
    pub fn with_policy_version(mut self, version: impl Into<String>) -> Self {
        self.policy_version = Some(version.into());
        self
    }

    /// Replaces the redaction hook.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// Records dropped because they could not be written, while
    /// [`OnAuditFailure::AllowAndCount`] was in force.
    pub fn lost_records(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Whether a session is degraded.
    pub fn is_degraded(&self, session: &str) -> bool {
        lock(&self.sessions)
            .get(session)
            .is_some_and(|s| s.degraded)
    }

    /// The owner's reset: the session may call tools again, with a fresh budget.
    pub fn reset(&self, session: &str) {
        lock(&self.sessions).remove(session);
    }

    /// A typed tool's call.
    pub fn call_tool<T: Capability + ?Sized, O: Serialize, E: fmt::Display>(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        input: &Value,
        run: impl FnOnce() -> Result<O, E>,
    ) -> Outcome<O, E> {
        self.call(ctx, caller, T::manifest(), input, run)
    }

    /// Decides, records, runs (only if allowed and recorded) and records the outcome.
    ///
    /// The tool runs inside the call's span. If it panics, its record is written (with
    /// `success: false`) and the panic goes on.
    pub fn call<O: Serialize, E: fmt::Display>(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        tool: &CapabilityManifest,
        input: &Value,
        run: impl FnOnce() -> Result<O, E>,
    ) -> Outcome<O, E> {
        let span = self.span(ctx, caller, tool);
        match span.in_scope(|| self.before(ctx, caller, tool, input, &span)) {
            Err(early) => early.into_outcome(&span),
            Ok(pending) => {
                let guard = CallGuard::new(self, pending, span);
                let result = guard.span().in_scope(run);
                guard.finish(result)
            }
        }
    }

    /// The async twin of [`call`](Self::call). If the future is dropped while the tool runs
    /// (a timeout, a cancelled task), the call's record is written then, saying so.
    pub async fn call_async<O: Serialize, E: fmt::Display, F>(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        tool: &CapabilityManifest,
        input: &Value,
        run: F,
    ) -> Outcome<O, E>
    where
        F: std::future::Future<Output = Result<O, E>>,
    {
        let span = self.span(ctx, caller, tool);
        match span.in_scope(|| self.before(ctx, caller, tool, input, &span)) {
            Err(early) => early.into_outcome(&span),
            Ok(pending) => {
                let guard = CallGuard::new(self, pending, span);
                let result = run.instrument(guard.span().clone()).await;
                guard.finish(result)
            }
        }
    }

    fn span(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        tool: &CapabilityManifest,
    ) -> tracing::Span {
        call_span(&CallFields {
            tool: tool.name(),
            provider: tool.provider(),
            descriptor_hash: tool.descriptor_hash(),
            agent: caller.agent,
            role: ctx.principal(),
            session: ctx.session(),
            step: caller.step,
            incident: caller.incident,
            policy_version: self.policy_version.as_deref().or(ctx.policy_version()),
        })
    }

    /// Decides and, for a call that will not run, records it. `Ok` carries the record of a
    /// call that may run (none when the sink has no digest key).
    fn before(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        tool: &CapabilityManifest,
        input: &Value,
        span: &tracing::Span,
    ) -> Result<Option<Pending<'_>>, Early> {
        let key = match self.sink.digest_key() {
            Ok(key) => key,
            Err(error) => return self.unkeyed(ctx, tool, error),
        };
        let canonical = capability_core::json::to_canonical_json(input);
        let mut redacted = input.clone();
        (self.redactor)(tool, key, &mut redacted);
        let mut record = AuditRecord {
            writer: String::new(),
            seq: 0,
            time: utc_now(),
            agent: caller.agent.to_owned(),
            role: ctx.principal().to_owned(),
            session: ctx.session().to_owned(),
            step: caller.step.map(str::to_owned),
            incident_id: caller.incident.map(str::to_owned),
            provider: tool.provider().map(str::to_owned),
            tool: tool.name().to_owned(),
            descriptor_hash: tool.descriptor_hash().to_owned(),
            policy_version: self
                .policy_version
                .clone()
                .or_else(|| ctx.policy_version().map(str::to_owned)),
            verdict: Verdict::Allowed,
            reasons: Vec::new(),
            input: redacted,
            // Keyed, like the sensitive fields: an unkeyed digest of the whole input would let
            // anyone holding the trail confirm a guessed value of one of them.
            input_digest: key.digest(canonical.as_bytes()),
            input_size: canonical.len() as u64,
            output_digest: None,
            output_size: None,
            latency_us: None,
            success: None,
            error: None,
            prev: String::new(),
            hash: String::new(),
        };
        if let Some(error) = caller.invalid() {
            // Refused before it is decided (so it does not count against the budget); the
            // record says why, without the id it could not store.
            record.incident_id = None;
            record.verdict = Verdict::AuditFailed;
            record.reasons = vec![error.to_string()];
            let _ = self.write(record, span);
            return Err(Early::AuditFailed(error));
        }
        match self.decide(ctx, tool) {
            Some(early) => {
                match &early {
                    Early::Denied(denial) => {
                        record.verdict = Verdict::Denied;
                        record.reasons = denial.reasons().iter().map(|r| r.to_string()).collect();
                    }
                    Early::Degrade(reason) => {
                        record.verdict = Verdict::Degraded;
                        record.reasons = vec![reason.to_string()];
                    }
                    Early::AuditFailed(_) => {}
                }
                // Not running the call does not depend on the record being written.
                let _ = self.write(record, span);
                Err(early)
            }
            None => {
                // Fail-closed: a call runs only while its record can be written.
                if self.on_failure == OnAuditFailure::Deny
                    && let Err(error) = self.sink.ready()
                {
                    record.verdict = Verdict::AuditFailed;
                    record.reasons = vec![error.to_string()];
                    let _ = self.write(record, span);
                    return Err(Early::AuditFailed(error));
                }
                // Whatever the sink says, a failed append stops calls until one succeeds: this
                // call is refused, and its record is the attempt.
                if self.on_failure == OnAuditFailure::Deny
                    && let Some(earlier) = self.failure()
                {
                    record.verdict = Verdict::AuditFailed;
                    record.reasons = vec![format!(
                        "a record could not be written ({earlier}); calls are refused until \
                         one is written again"
                    )];
                    return Err(Early::AuditFailed(match self.write(record, span) {
                        Ok(_) => earlier,
                        Err(error) => error,
                    }));
                }
                Ok(Some(Pending { record, key }))
            }
        }
    }

    /// The sink has no digest key: no record can be made without exposing what the key
    /// protects, so the call goes as one whose record cannot be written (denied under
    /// [`OnAuditFailure::Deny`], run and counted as lost under `AllowAndCount`).
    fn unkeyed(
        &self,
        ctx: &(impl Authorize + ?Sized),
        tool: &CapabilityManifest,
        error: AuditError,
    ) -> Result<Option<Pending<'_>>, Early> {
        let early = self.decide(ctx, tool);
        not_written(ctx.session(), tool.name(), &error);
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
    fn decide(&self, ctx: &(impl Authorize + ?Sized), tool: &CapabilityManifest) -> Option<Early> {
        let mut sessions = lock(&self.sessions);
        let state = sessions.entry(ctx.session().to_owned()).or_default();
        if state.degraded {
            return Some(Early::Degrade(DegradeReason::AlreadyDegraded));
        }
        if state.calls >= self.budget.max_calls {
            state.degraded = true;
            return Some(Early::Degrade(DegradeReason::BudgetExhausted {
                max_calls: self.budget.max_calls,
            }));
        }
        state.calls += 1;
        let denial = ctx.authorize(tool).err()?;
        state.denials += 1;
        let lacks_permission = denial
            .reasons()
            .iter()
            .any(|r| !matches!(r, DenyReason::UnknownRole { .. }));
        if state.denials > self.budget.max_denials && lacks_permission {
            state.degraded = true;
            Some(Early::Degrade(if self.budget.max_denials == 0 {
                DegradeReason::Denied {
                    denial: denial.to_string(),
                }
            } else {
                DegradeReason::TooManyDenials {
                    max_denials: self.budget.max_denials,
                }
            }))
        } else {
            Some(Early::Denied(denial))
        }
    }

    /// The last append error, while appends fail.
    fn failure(&self) -> Option<AuditError> {
        if !self.failing.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.failure).clone()
    }

    /// Appends the record of the call whose span is `span`.
    fn write(&self, record: AuditRecord, span: &tracing::Span) -> Result<AuditRecord, AuditError> {
        let (session, tool) = (record.session.clone(), record.tool.clone());
        let written = self.sink.append(record);
        match &written {
            Ok(record) => {
                if self.failing.load(Ordering::Acquire) {
                    let mut failure = lock(&self.failure);
                    *failure = None;
                    self.failing.store(false, Ordering::Release);
                }
                span.record("capability.audit.seq", record.seq);
                // The event carries the record as written: with its `seq` and `hash`.
                emit_trace(record);
            }
            Err(error) => {
                not_written(&session, &tool, error);
                match self.on_failure {
                    OnAuditFailure::Deny => {
                        let mut failure = lock(&self.failure);
                        *failure = Some(error.clone());
                        self.failing.store(true, Ordering::Release);
                    }
                    OnAuditFailure::AllowAndCount => {
                        // At least this record is lost: a sink that keeps nothing pending
                        // (the default `discard_pending`) dropped it already.
                        let dropped = self.sink.discard_pending().max(1);
                        self.lost.fetch_add(dropped, Ordering::Relaxed);
                    }
                }
            }
        }
        written
    }
}

fn not_written(session: &str, tool: &str, error: &AuditError) {
    tracing::event!(
        target: "capability::audit",
        tracing::Level::ERROR,
        session = %session,
        tool = %tool,
        error = %error,
        "audit record not written"
    );
}

/// The record of a call that may run, and the key its output digest is made with.
struct Pending<'s> {
    record: AuditRecord,
    key: &'s DigestKey,
}

enum Early {
    Denied(Denial),
    Degrade(DegradeReason),
    AuditFailed(AuditError),
}

impl Early {
    /// The outcome of a call that did not run; its span says why.
    fn into_outcome<O, E>(self, span: &tracing::Span) -> Outcome<O, E> {
        let (verdict, error_type) = match &self {
            Early::Denied(_) => (Verdict::Denied, "denied"),
            Early::Degrade(_) => (Verdict::Degraded, "degraded"),
            Early::AuditFailed(_) => (Verdict::AuditFailed, "audit_failed"),
        };
        end_span(span, verdict, Some(error_type));
        match self {
            Early::Denied(denial) => Outcome::Denied(denial),
            Early::Degrade(reason) => Outcome::Degrade(reason),
            Early::AuditFailed(error) => Outcome::AuditFailed(error),
        }
    }
}
