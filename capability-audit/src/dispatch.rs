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

/// A redaction hook: given the tool and its input, hide what must not be stored. The default
/// replaces each of the tool's [sensitive fields](CapabilityManifest::sensitive_fields) by its
/// digest.
pub type Redactor = Arc<dyn Fn(&CapabilityManifest, &mut Value) + Send + Sync>;

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
    /// call that may run.
    fn before(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        tool: &CapabilityManifest,
        input: &Value,
    ) -> Result<Pending, Early> {
        let canonical = capability_core::json::to_canonical_json(input);
        let mut redacted = input.clone();
        (self.redactor)(tool, &mut redacted);
        let mut record = AuditRecord {
            seq: 0,
            time: utc_now(),
            agent: caller.agent.to_owned(),
            role: ctx.principal().to_owned(),
            session: ctx.session().to_owned(),
            step: caller.step.map(str::to_owned),
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
            input_digest: capability_rules::sha256_hex(canonical.as_bytes()),
            input_size: canonical.len() as u64,
            output_digest: None,
            output_size: None,
            latency_us: None,
            success: None,
            error: None,
            prev: String::new(),
            hash: String::new(),
        };
        let early = {
            let mut sessions = lock(&self.sessions);
            let state = sessions.entry(ctx.session().to_owned()).or_default();
            if state.degraded {
                Some(Early::Degrade(DegradeReason::AlreadyDegraded))
            } else if state.calls >= self.budget.max_calls {
                state.degraded = true;
                Some(Early::Degrade(DegradeReason::BudgetExhausted {
                    max_calls: self.budget.max_calls,
                }))
            } else {
                state.calls += 1;
                match ctx.authorize(tool) {
                    Ok(()) => None,
                    Err(denial) => {
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
                }
            }
        };
        match early {
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
                Ok(Pending { record })
            }
        }
    }

    fn after<O: Serialize, E: fmt::Display>(
        &self,
        pending: Pending,
        elapsed: Duration,
        result: Result<O, E>,
    ) -> Outcome<O, E> {
        let mut record = pending.record;
        record.latency_us = Some(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
        match &result {
            Ok(output) => {
                let value = serde_json::to_value(output).unwrap_or(Value::Null);
                let canonical = capability_core::json::to_canonical_json(&value);
                record.output_digest = Some(capability_rules::sha256_hex(canonical.as_bytes()));
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
        match result {
            Ok(output) => Outcome::Done(output),
            Err(error) => Outcome::Failed(error),
        }
    }

    fn write(&self, record: AuditRecord) -> Result<AuditRecord, AuditError> {
        let (session, tool) = (record.session.clone(), record.tool.clone());
        let written = self.sink.append(record);
        match &written {
            // The event carries the record as written: with its `seq` and `hash`.
            Ok(record) => emit_trace(record),
            Err(error) => {
                tracing::event!(
                    target: "capability::audit",
                    tracing::Level::ERROR,
                    session = %session,
                    tool = %tool,
                    error = %error,
                    "audit record not written"
                );
                if self.on_failure == OnAuditFailure::AllowAndCount {
                    let dropped = self.sink.discard_pending();
                    self.lost.fetch_add(dropped, Ordering::Relaxed);
                }
            }
        }
        written
    }
}

struct Pending {
    record: AuditRecord,
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
