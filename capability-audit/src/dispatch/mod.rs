//! Audited dispatch: every call decided and recorded, its intent on record before it runs.

mod backlog;
mod caller;
mod guard;
mod notice;
mod receipt;
mod request;
mod start;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::Instrument;

use serde::Serialize;
use serde_json::Value;

use capability_core::authz::{Authorize, Denial, DenyReason};
use capability_core::manifest::{Capability, CapabilityManifest};

use crate::budget::SessionState;
use crate::trace::{CallFields, CallSpan, call_span, emit_trace, end_span, new_call_id};
use crate::*;

use backlog::Backlog;
pub use caller::{Caller, MAX_INCIDENT_ID_CHARS};
use guard::CallGuard;
pub use guard::Started;
pub use request::{Request, Subject};

/// A redaction hook: given the tool, the sink's [digest key](AuditSink::digest_key) and the
/// input, hide what must not be stored. The default ([`redact_sensitive`]) replaces each of the
/// tool's [sensitive fields](CapabilityManifest::sensitive_fields) by its keyed digest
/// ([`DigestKey::digest_json`]); a hook of your own can call it and hide more.
pub type Redactor = Arc<dyn Fn(&CapabilityManifest, &DigestKey, &mut Value) + Send + Sync>;

/// The one entry point for a call: decide, record the intent, run, record the outcome.
///
/// **Nothing runs unrecorded.** A call that is allowed runs only once the record that it is
/// about to run (its *intent*, [`Phase::Intent`]) is written; its *outcome* follows, sharing
/// the intent's `call_id`. A process killed while the tool runs leaves the intent, and
/// `capability audit verify` reports the call as started, with no outcome recorded. The
/// dispatcher owns this rule, not the sink: a record whose append fails is kept, in order, and
/// every record kept must be written before anything runs again, so a sink that fails however
/// it likes (every other append, the disk filling mid-call) can refuse calls but never let one
/// run without its intent in the trail ([`OnAuditFailure::AllowAndCount`] trades that for
/// availability, and counts what it loses).
///
/// A call that runs leaves its outcome even when the tool panics (the panic goes on to the
/// caller) or its future is dropped mid-way: the outcome then says `success: false` and why.
/// A call refused before any decision (no role, a tool not listed, a bad name) is recorded
/// through [`refuse`](Self::refuse), the one refusal door. Each call runs inside a `tracing`
/// span named for OpenTelemetry ([`trace`]).
///
/// ```
/// use capability::CapabilityManifest;
/// use capability::audit::{Caller, AuditedDispatch, MemorySink, Outcome, Phase};
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
/// let out: Outcome<usize, String> = dispatch.call(&ctx, caller, &list, &json!({"ns": "prod"}), || {
///     assert_eq!(sink.records()[0].phase, Some(Phase::Intent), "on record before it runs");
///     Ok(3)
/// });
/// assert!(matches!(out, Outcome::Done(3)));
/// let records = sink.records();
/// assert_eq!(records[1].phase, Some(Phase::Outcome));
/// assert_eq!(records[0].call_id, records[1].call_id);
/// # Ok::<(), capability::ManifestError>(())
/// ```
pub struct AuditedDispatch {
    sink: Arc<dyn AuditSink>,
    /// The per-session budget; none by default.
    budget: Option<Budget>,
    on_failure: OnAuditFailure,
    policy_version: Option<String>,
    redactor: Redactor,
    sessions: Mutex<HashMap<String, SessionState>>,
    lost: AtomicU64,
    /// Records whose append failed, to be written before anything runs again.
    backlog: Backlog,
    /// The writer and `seq` of the last record written.
    last: Mutex<Option<(String, u64)>>,
}

impl fmt::Debug for AuditedDispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditedDispatch")
            .field("budget", &self.budget)
            .field("on_failure", &self.on_failure)
            .field("policy_version", &self.policy_version)
            .field("kept", &self.backlog.len())
            .finish_non_exhaustive()
    }
}

impl AuditedDispatch {
    /// A dispatcher writing to `sink`, fail-closed, with **no budget**: every call is decided
    /// on its own, however many came before it and however many were refused. That is what a
    /// server wants (a `GovernedServer`'s sessions are its clients', and no count of theirs
    /// should stop them: a refused call refuses only that call). An agent loop gives its
    /// sessions a budget: [`with_budget`](Self::with_budget)`(Budget::default())`, ADR-105's
    /// 25 calls, the first denial degrading the session.
    pub fn new(sink: Arc<dyn AuditSink>) -> Self {
        AuditedDispatch {
            sink,
            budget: None,
            on_failure: OnAuditFailure::Deny,
            policy_version: None,
            redactor: Arc::new(redact_sensitive),
            sessions: Mutex::new(HashMap::new()),
            lost: AtomicU64::new(0),
            backlog: Backlog::default(),
            last: Mutex::new(None),
        }
    }

    /// Sets the per-session budget ([`Budget`]): past it, or past its denials, a session
    /// degrades ([`Outcome::Degrade`]) until its owner [resets](Self::reset) it.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The per-session budget, if one was set ([`with_budget`](Self::with_budget)).
    pub fn budget(&self) -> Option<Budget> {
        self.budget
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

    /// Records kept because their append failed, waiting to be written (nothing runs until
    /// they are).
    pub fn kept_records(&self) -> usize {
        self.backlog.len()
    }

    /// The policy version recorded with every decision, if one was set
    /// ([`with_policy_version`](Self::with_policy_version)).
    pub fn policy_version(&self) -> Option<&str> {
        self.policy_version.as_deref()
    }

    /// The writer and `seq` of the last record this dispatcher wrote (of any call or session):
    /// read before and after a piece of work, the range of the trail that holds its records.
    pub fn last_written(&self) -> Option<(String, u64)> {
        lock(&self.last).clone()
    }

    fn wrote(&self, written: &AuditRecord) {
        let mut last = lock(&self.last);
        match &mut *last {
            Some((writer, seq)) if *writer == written.writer => *seq = written.seq,
            other => *other = Some((written.writer.clone(), written.seq)),
        }
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

    /// Decides, records the intent, runs (only if allowed and its intent written) and records
    /// the outcome.
    ///
    /// The tool runs inside the call's span. If it panics, its outcome is written (with
    /// `success: false`) and the panic goes on.
    pub fn call<O: Serialize, E: fmt::Display>(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        tool: &CapabilityManifest,
        input: &Value,
        run: impl FnOnce() -> Result<O, E>,
    ) -> Outcome<O, E> {
        self.act(ctx, caller, &Request::tool(tool, input), run)
    }

    /// The async twin of [`call`](Self::call). If the future is dropped while the tool runs
    /// (a timeout, a cancelled task), the call's outcome is written then, saying so.
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
        self.act_async(ctx, caller, &Request::tool(tool, input), run)
            .await
    }

    /// [`call`](Self::call) for any request: a tool call, a resource read, a prompt, a
    /// completion, a server's request, decided by the decider's
    /// [`decide_action`](Authorize::decide_action) and recorded with its MCP method.
    pub fn act<O: Serialize, E: fmt::Display>(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        request: &Request<'_>,
        run: impl FnOnce() -> Result<O, E>,
    ) -> Outcome<O, E> {
        let (span, call_id) = self.span(&Subject::of(ctx), caller, request);
        match span.in_scope(|| self.before(ctx, caller, request, call_id, &span)) {
            Err(early) => early.into_outcome(&span),
            Ok(pending) => {
                let guard = CallGuard::new(self, pending, span);
                let result = guard.span().in_scope(run);
                guard.finish(result)
            }
        }
    }

    /// The async twin of [`act`](Self::act).
    pub async fn act_async<O: Serialize, E: fmt::Display, F>(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        request: &Request<'_>,
        run: F,
    ) -> Outcome<O, E>
    where
        F: std::future::Future<Output = Result<O, E>>,
    {
        let (span, call_id) = self.span(&Subject::of(ctx), caller, request);
        match span.in_scope(|| self.before(ctx, caller, request, call_id, &span)) {
            Err(early) => early.into_outcome(&span),
            Ok(pending) => {
                let guard = CallGuard::new(self, pending, span);
                let result = run.instrument(guard.span().clone()).await;
                guard.finish(result)
            }
        }
    }

    /// The first half of [`act`](Self::act), for a call whose result comes back elsewhere (on
    /// another thread, in another task): decides, and for a call that may run writes its
    /// intent and returns it [`Started`]; the call may run once this returns `Ok`. Its outcome
    /// is written by [`Started::finish`], or, if the `Started` is dropped unfinished, as a call
    /// cancelled (or, while a thread panics, aborted by a panic), exactly as `act_async` writes
    /// it when its future is dropped. A call that may not run is `Err`, its outcome as `act`
    /// would return it (its record written).
    ///
    /// ```
    /// use capability::CapabilityManifest;
    /// use capability::audit::{AuditedDispatch, Caller, MemorySink, Outcome, Phase, Request};
    /// use capability::authz::{Action, Ceiling, ToolContext};
    /// use serde_json::json;
    /// use std::sync::Arc;
    ///
    /// let sink = Arc::new(MemorySink::new());
    /// let dispatch = Arc::new(AuditedDispatch::new(sink.clone()));
    /// let ctx = ToolContext::new("monitor", "s-1", Ceiling::ReadOnly);
    /// let list = CapabilityManifest::builder("list_pods").read_only(true).build()?;
    /// let input = json!({"ns": "prod"});
    /// let request = Request::mcp("tools/call", Action::CallTool(&list), &input);
    /// let Ok(started) = dispatch.start::<(), String>(&ctx, Caller::new("watcher"), &request) else {
    ///     panic!("allowed");
    /// };
    /// assert_eq!(sink.records()[0].phase, Some(Phase::Intent), "on record before it runs");
    /// // The answer comes back on another thread, which finishes the call.
    /// let out = std::thread::spawn(move || started.finish(Ok::<_, String>(3))).join().unwrap();
    /// assert!(matches!(out, Outcome::Done(3)));
    /// assert_eq!(sink.records()[1].phase, Some(Phase::Outcome));
    /// # Ok::<(), capability::ManifestError>(())
    /// ```
    pub fn start<O, E>(
        self: &Arc<Self>,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        request: &Request<'_>,
    ) -> Result<Started, Outcome<O, E>> {
        let (span, call_id) = self.span(&Subject::of(ctx), caller, request);
        match span.in_scope(|| self.before(ctx, caller, request, call_id, &span)) {
            Err(early) => Err(early.into_outcome(&span)),
            Ok(pending) => Ok(Started(CallGuard::new(self.clone(), pending, span))),
        }
    }

    /// The one refusal door: records a call refused before any decision was asked (a caller
    /// without a role, a tool the server does not list or that drifted from its pin, a bad
    /// name), with every reason, and counts it against the session's budget like a denial (a
    /// caller without a role has no budget to spend). Returns the degrade when this refusal
    /// degraded the session, or it was degraded already.
    ///
    /// ```
    /// use capability::audit::{AuditedDispatch, Caller, MemorySink, Request, Subject, Verdict};
    /// use capability::authz::{Action, DenyReason};
    /// use serde_json::json;
    /// use std::sync::Arc;
    ///
    /// let sink = Arc::new(MemorySink::new());
    /// let dispatch = AuditedDispatch::new(sink.clone());
    /// let nobody = Subject::new("(none)", "mcp:fs/(none)");
    /// let input = json!({"uri": "file:///etc/passwd"});
    /// let read = Request::mcp("resources/read", Action::Resource { server: "fs", uri: "file:///etc/passwd" }, &input);
    /// dispatch.refuse(&nobody, Caller::new("mcp-client"), &read, &[DenyReason::NoRole]);
    /// let record = &sink.records()[0];
    /// assert_eq!((record.verdict, record.tool.as_str()), (Verdict::Denied, "file:///etc/passwd"));
    /// assert_eq!(record.method.as_deref(), Some("resources/read"));
    /// assert_eq!(record.reasons[0].code(), "no_role");
    /// ```
    pub fn refuse(
        &self,
        subject: &Subject<'_>,
        caller: Caller<'_>,
        request: &Request<'_>,
        reasons: &[DenyReason],
    ) -> Option<DegradeReason> {
        let (span, call_id) = self.span(subject, caller, request);
        let _entered = span.enter();
        let degrade = self.count_refusal(subject.session, reasons);
        let verdict = if degrade.is_some() {
            Verdict::Degraded
        } else {
            Verdict::Denied
        };
        if let Ok(key) = self.sink.digest_key() {
            let (mut record, _) = self.record(subject, caller, request, call_id, key);
            record.incident_id = record.incident_id.filter(|_| caller.invalid().is_none());
            record.verdict = verdict;
            record.reasons = reasons.iter().map(Reason::deny).collect();
            record.reasons.extend(degrade.iter().map(Reason::degrade));
            self.write(record, &span);
        } else {
            not_written(subject.session, request.action.target(), &"no digest key");
        }
        end_span(
            &span,
            verdict,
            Some(if degrade.is_some() {
                "degraded"
            } else {
                "denied"
            }),
        );
        degrade
    }

    fn span(
        &self,
        subject: &Subject<'_>,
        caller: Caller<'_>,
        request: &Request<'_>,
    ) -> (CallSpan, String) {
        let call_id = new_call_id();
        let span = call_span(&CallFields {
            tool: request.action.target(),
            method: request.method,
            call_id: &call_id,
            provider: request.action.server(),
            descriptor_hash: request.descriptor_hash(),
            agent: caller.agent,
            role: subject.role,
            session: subject.session,
            principal: caller.principal.map(Principal::key),
            step: caller.step,
            incident: caller.incident,
            policy_version: self.policy_version.as_deref().or(subject.policy_version),
        });
        (span, call_id)
    }

    /// Appends a record of a call that does not run, or of an outcome: when it cannot be
    /// written, it is kept and written before anything runs again (under `Deny`), or counted
    /// as lost (under `AllowAndCount`).
    fn write(&self, record: AuditRecord, span: &CallSpan) {
        self.write_then(record, span, None);
    }

    /// [`write`](Self::write), filling `receipt` with the record's receipt once it is written.
    fn write_then(&self, record: AuditRecord, span: &CallSpan, receipt: receipt::Slot<'_>) {
        if self.on_failure == OnAuditFailure::Deny && !self.backlog.is_empty() {
            // Behind the records kept already, in order.
            let error = self.backlog.last_error().unwrap_or(AuditError::Io {
                path: String::new(),
                message: "earlier records are waiting to be written".to_owned(),
            });
            self.backlog.keep(record, &error);
            if let Ok(key) = self.sink.digest_key() {
                let _ = self.backlog.drain(self.sink.as_ref(), key);
            }
            return;
        }
        let mut record = record;
        match self.sink.append_in_place(&mut record) {
            Ok(()) => {
                self.wrote(&record);
                span.record_seq(record.seq);
                receipt::fill(receipt, &record);
                // The event carries the record as written: with its `seq` and `hash`.
                emit_trace(&record);
            }
            Err(error) => {
                not_written(&record.session, &record.tool, &error);
                match self.on_failure {
                    OnAuditFailure::Deny => self.backlog.keep(record, &error),
                    OnAuditFailure::AllowAndCount => {
                        self.lost.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}

fn not_written(session: &str, tool: &str, error: &dyn fmt::Display) {
    tracing::event!(
        target: "capability::audit",
        tracing::Level::ERROR,
        session = %session,
        tool = %tool,
        error = %error,
        "audit record not written"
    );
}

/// The outcome record of a call that runs (its output digest is made with the sink's key when
/// the call completes).
struct Pending {
    record: AuditRecord,
}

enum Early {
    Denied(Denial),
    Degrade(DegradeReason),
    AuditFailed(AuditError),
}

impl Early {
    /// The outcome of a call that did not run; its span says why.
    fn into_outcome<O, E>(self, span: &CallSpan) -> Outcome<O, E> {
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
