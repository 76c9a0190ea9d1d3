//! Audited dispatch: every tool call decided, recorded, run and recorded again.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use capability_core::authz::{Authorize, Denial, DenyReason};
use capability_core::manifest::{Capability, CapabilityManifest};

use crate::budget::SessionState;
use crate::trace::emit_trace;
use crate::*;

/// Who is calling: the agent and, optionally, the workflow step. The role and session come
/// from the decider ([`Authorize`]).
#[derive(Clone, Copy, Debug)]
pub struct Caller<'a> {
    /// The agent.
    pub agent: &'a str,
    /// The workflow step.
    pub step: Option<&'a str>,
}

/// A redaction hook: given the tool, the sink's [digest key](AuditSink::digest_key) and the
/// input, hide what must not be stored. The default ([`redact_sensitive`]) replaces each of the
/// tool's [sensitive fields](CapabilityManifest::sensitive_fields) by its keyed digest
/// ([`DigestKey::digest_json`]); a hook of your own can call it and hide more.
pub type Redactor = Arc<dyn Fn(&CapabilityManifest, &DigestKey, &mut Value) + Send + Sync>;

/// The one entry point for a tool call: decide, record, run, record the outcome.
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
/// let caller = Caller { agent: "watcher", step: Some("triage") };
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
    pub fn call<O: Serialize, E: fmt::Display>(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        tool: &CapabilityManifest,
        input: &Value,
        run: impl FnOnce() -> Result<O, E>,
    ) -> Outcome<O, E> {
        match self.before(ctx, caller, tool, input) {
            Err(outcome) => outcome.into_outcome(),
            Ok(pending) => {
                let start = Instant::now();
                let result = run();
                self.after(pending, start.elapsed(), result)
            }
        }
    }

    /// The async twin of [`call`](Self::call).
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
        match self.before(ctx, caller, tool, input) {
            Err(outcome) => outcome.into_outcome(),
            Ok(pending) => {
                let start = Instant::now();
                let result = run.await;
                self.after(pending, start.elapsed(), result)
            }
        }
    }

    /// Decides and, for a call that will not run, records it. `Ok` carries the record of a
    /// call that may run (none when the sink has no digest key).
    fn before(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        tool: &CapabilityManifest,
        input: &Value,
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
            incident_id: None,
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
                let _ = self.write(record);
                Err(early)
            }
            None => {
                // Fail-closed: a call runs only while its record can be written.
                if self.on_failure == OnAuditFailure::Deny
                    && let Err(error) = self.sink.ready()
                {
                    record.verdict = Verdict::AuditFailed;
                    record.reasons = vec![error.to_string()];
                    let _ = self.write(record);
                    return Err(Early::AuditFailed(error));
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

    fn after<O: Serialize, E: fmt::Display>(
        &self,
        pending: Option<Pending<'_>>,
        elapsed: Duration,
        result: Result<O, E>,
    ) -> Outcome<O, E> {
        if let Some(pending) = pending {
            self.record_outcome(pending, elapsed, &result);
        }
        match result {
            Ok(output) => Outcome::Done(output),
            Err(error) => Outcome::Failed(error),
        }
    }

    fn record_outcome<O: Serialize, E: fmt::Display>(
        &self,
        pending: Pending<'_>,
        elapsed: Duration,
        result: &Result<O, E>,
    ) {
        let Pending { mut record, key } = pending;
        record.latency_us = Some(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
        match result {
            Ok(output) => {
                let value = serde_json::to_value(output).unwrap_or(Value::Null);
                let canonical = capability_core::json::to_canonical_json(&value);
                // Keyed too: an output can carry what a sensitive field holds (a token, a row).
                record.output_digest = Some(key.digest(canonical.as_bytes()));
                record.output_size = Some(canonical.len() as u64);
                record.success = Some(true);
            }
            Err(error) => {
                record.success = Some(false);
                record.error = Some(error.to_string());
            }
        }
        // The call has happened. Under `Deny`, a record that cannot be written stays pending
        // in the sink and is written as soon as it can be; until then no other call runs.
        let _ = self.write(record);
    }

    fn write(&self, record: AuditRecord) -> Result<AuditRecord, AuditError> {
        let (session, tool) = (record.session.clone(), record.tool.clone());
        let written = self.sink.append(record);
        match &written {
            // The event carries the record as written: with its `seq` and `hash`.
            Ok(record) => emit_trace(record),
            Err(error) => {
                not_written(&session, &tool, error);
                if self.on_failure == OnAuditFailure::AllowAndCount {
                    let dropped = self.sink.discard_pending();
                    self.lost.fetch_add(dropped, Ordering::Relaxed);
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
    fn into_outcome<O, E>(self) -> Outcome<O, E> {
        match self {
            Early::Denied(denial) => Outcome::Denied(denial),
            Early::Degrade(reason) => Outcome::Degrade(reason),
            Early::AuditFailed(error) => Outcome::AuditFailed(error),
        }
    }
}
