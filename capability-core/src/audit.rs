//! Audited dispatch: every tool call decided, recorded, run and recorded again, on a
//! tamper-evident trail; and the per-session budget of an agent loop.

use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dispatch::{Denial, DenyReason, ToolContext};
use crate::{Capability, CapabilityManifest};

/// The `prev` of the first record of a trail.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What happened to a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Authorized, and run.
    Allowed,
    /// Not authorized: it did not run.
    Denied,
    /// Not run: the session is over its budget or degraded; fall back to the non-agentic path.
    Degraded,
    /// Authorized, but not run: the audit record could not be written (fail-closed).
    AuditFailed,
}

/// One line of the audit trail.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// Position in the trail, from 1.
    pub seq: u64,
    /// When the call was decided, UTC, RFC 3339 with milliseconds.
    pub time: String,
    /// The agent.
    pub agent: String,
    /// The agent's role.
    pub role: String,
    /// The session.
    pub session: String,
    /// The workflow step, if the caller names one.
    pub step: Option<String>,
    /// The tool's provider.
    pub provider: Option<String>,
    /// The tool.
    pub tool: String,
    /// The tool's descriptor hash.
    pub descriptor_hash: String,
    /// The version of the policy that decided, if it has one.
    pub policy_version: Option<String>,
    /// What happened.
    pub verdict: Verdict,
    /// Why (denial reasons, degrade reason, audit failure), as text.
    pub reasons: Vec<String>,
    /// The input, with the tool's sensitive fields replaced by their digest.
    pub input: Value,
    /// SHA-256 of the input's canonical JSON (before redaction).
    pub input_digest: String,
    /// Size of the input's canonical JSON, in bytes.
    pub input_size: u64,
    /// SHA-256 of the output's canonical JSON, when the tool ran and succeeded.
    pub output_digest: Option<String>,
    /// Size of the output's canonical JSON, in bytes.
    pub output_size: Option<u64>,
    /// How long the tool ran, in microseconds (none when it did not run).
    pub latency_us: Option<u64>,
    /// Whether the tool succeeded (none when it did not run).
    pub success: Option<bool>,
    /// The tool's error, when it failed.
    pub error: Option<String>,
    /// The `hash` of the previous record ([`GENESIS`] for the first).
    pub prev: String,
    /// SHA-256 of this record's canonical JSON without `hash`.
    pub hash: String,
}

impl AuditRecord {
    /// The hash this record should carry: SHA-256 of its canonical JSON without `hash`.
    pub fn compute_hash(&self) -> String {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(object) = value.as_object_mut() {
            object.remove("hash");
        }
        capability_rules::sha256_hex(crate::to_canonical_json(&value).as_bytes())
    }

    /// The record as one line of canonical JSON (no newline).
    pub fn to_line(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        crate::to_canonical_json(&value)
    }

    /// Sets `hash` and returns the line, converting the record to JSON once.
    fn seal(&mut self) -> String {
        let mut value = serde_json::to_value(&*self).unwrap_or(Value::Null);
        if let Some(object) = value.as_object_mut() {
            object.remove("hash");
        }
        self.hash = capability_rules::sha256_hex(crate::to_canonical_json(&value).as_bytes());
        if let Some(object) = value.as_object_mut() {
            object.insert("hash".to_owned(), Value::String(self.hash.clone()));
        }
        crate::to_canonical_json(&value)
    }
}

/// Where audit records go.
pub trait AuditSink: Send + Sync {
    /// Appends one record, completing its `seq`, `prev` and `hash`. An error means the record
    /// is not yet durable: it is kept and retried by [`ready`](Self::ready), unless
    /// [`discard_pending`](Self::discard_pending) drops it.
    fn append(&self, record: AuditRecord) -> Result<AuditRecord, AuditError>;

    /// Whether the sink can take records now: retries what is pending. The dispatcher asks
    /// before every call it is about to run, so a failing trail stops calls (fail-closed).
    fn ready(&self) -> Result<(), AuditError> {
        Ok(())
    }

    /// Drops the records that could not be written and returns how many; the trail goes on
    /// from the last record written, so it stays valid (with those records missing).
    fn discard_pending(&self) -> u64 {
        0
    }
}

/// A sink that keeps the records in memory: for tests and short-lived programs.
#[derive(Debug, Default)]
pub struct MemorySink {
    records: Mutex<Vec<AuditRecord>>,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> Self {
        MemorySink::default()
    }

    /// A copy of every record so far.
    pub fn records(&self) -> Vec<AuditRecord> {
        lock(&self.records).clone()
    }
}

impl AuditSink for MemorySink {
    fn append(&self, mut record: AuditRecord) -> Result<AuditRecord, AuditError> {
        let mut records = lock(&self.records);
        record.seq = records.len() as u64 + 1;
        record.prev = records
            .last()
            .map_or_else(|| GENESIS.to_owned(), |r| r.hash.clone());
        record.hash = record.compute_hash();
        records.push(record.clone());
        Ok(record)
    }
}

/// When a [`JsonlSink`] hands its lines to the operating system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Each record is written with one `write` call as soon as it is appended: a process that
    /// is killed loses at most the record being written. The default.
    EveryRecord,
    /// Records are buffered and written every `n` records (and on drop): faster, and a killed
    /// process loses up to `n` records.
    Every(u32),
}

/// A JSON Lines file sink: one record per line, hash-chained (each record carries the hash of
/// the previous one), so an edited, removed or reordered record is detected by
/// [`verify_jsonl`].
#[derive(Debug)]
pub struct JsonlSink {
    path: PathBuf,
    policy: FlushPolicy,
    state: Mutex<FileState>,
}

#[derive(Debug)]
struct FileState {
    file: File,
    /// Lines appended but not yet written.
    buffer: Vec<u8>,
    pending: u32,
    /// The last record appended (written or pending).
    seq: u64,
    prev: String,
    /// The last record written.
    written_seq: u64,
    written_prev: String,
    failed: bool,
}

impl JsonlSink {
    /// Opens (or creates) a trail for appending. An existing trail is verified first, and a
    /// broken one is refused: appending would hide where it broke.
    pub fn open(path: impl AsRef<Path>, policy: FlushPolicy) -> Result<JsonlSink, AuditError> {
        let path = path.as_ref().to_path_buf();
        let io = |e: std::io::Error| AuditError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let (seq, prev) = match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() && meta.len() > 0 => {
                let report = verify_jsonl(&path)?;
                if let Some(problem) = report.problem {
                    return Err(AuditError::Broken {
                        path: path.display().to_string(),
                        problem,
                    });
                }
                (report.records, report.last_hash)
            }
            _ => (0, GENESIS.to_owned()),
        };
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        file.seek(SeekFrom::End(0)).map_err(io)?;
        Ok(JsonlSink {
            path,
            policy,
            state: Mutex::new(FileState {
                file,
                buffer: Vec::new(),
                pending: 0,
                seq,
                prev: prev.clone(),
                written_seq: seq,
                written_prev: prev,
                failed: false,
            }),
        })
    }

    /// Writes buffered records out.
    pub fn flush(&self) -> Result<(), AuditError> {
        let mut state = lock(&self.state);
        self.write_out(&mut state)
    }

    fn write_out(&self, state: &mut FileState) -> Result<(), AuditError> {
        if state.buffer.is_empty() {
            return Ok(());
        }
        let file_len = state.file.metadata().map(|m| m.len()).ok();
        match state
            .file
            .write_all(&state.buffer)
            .and_then(|()| state.file.flush())
        {
            Ok(()) => {
                state.buffer.clear();
                state.pending = 0;
                state.written_seq = state.seq;
                state.written_prev = state.prev.clone();
                state.failed = false;
                Ok(())
            }
            Err(error) => {
                // Take back a partial write, so a retry does not leave half a line behind.
                if let Some(len) = file_len {
                    let _ = state.file.set_len(len);
                }
                state.failed = true;
                Err(AuditError::Io {
                    path: self.path.display().to_string(),
                    message: error.to_string(),
                })
            }
        }
    }
}

impl AuditSink for JsonlSink {
    fn append(&self, mut record: AuditRecord) -> Result<AuditRecord, AuditError> {
        let mut state = lock(&self.state);
        record.seq = state.seq + 1;
        record.prev = state.prev.clone();
        let mut line = record.seal().into_bytes();
        line.push(b'\n');
        state.buffer.extend_from_slice(&line);
        state.pending += 1;
        state.seq = record.seq;
        state.prev = record.hash.clone();
        let due = state.failed
            || match self.policy {
                FlushPolicy::EveryRecord => true,
                FlushPolicy::Every(n) => state.pending >= n.max(1),
            };
        if due {
            self.write_out(&mut state)?;
        }
        Ok(record)
    }

    fn ready(&self) -> Result<(), AuditError> {
        let mut state = lock(&self.state);
        if state.failed {
            self.write_out(&mut state)
        } else {
            Ok(())
        }
    }

    fn discard_pending(&self) -> u64 {
        let mut state = lock(&self.state);
        let dropped = state.seq - state.written_seq;
        state.buffer.clear();
        state.pending = 0;
        state.seq = state.written_seq;
        state.prev = state.written_prev.clone();
        state.failed = false;
        dropped
    }
}

impl Drop for JsonlSink {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        let _ = self.write_out(&mut state);
    }
}

/// What [`verify_jsonl`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Intact records before the first problem (all of them when there is none).
    pub records: u64,
    /// The hash of the last intact record.
    pub last_hash: String,
    /// The first problem, if any.
    pub problem: Option<TrailProblem>,
}

/// The first broken place of a trail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrailProblem {
    /// The line (from 1).
    pub line: u64,
    /// What is wrong with it.
    pub kind: ProblemKind,
}

/// How a trail is broken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// The last line is incomplete: a write was cut short (a crash). Every record before it is
    /// intact.
    TornTail,
    /// The line is not an audit record.
    Malformed(String),
    /// The record's hash does not match its content: it was edited.
    Edited,
    /// The record does not follow the previous one: a record was removed, inserted or moved.
    ChainBroken {
        /// The `seq` the line should have.
        expected_seq: u64,
        /// The `seq` it has.
        found_seq: u64,
    },
}

impl fmt::Display for TrailProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ProblemKind::TornTail => write!(
                f,
                "line {}: torn tail: the last record was cut short while being written; every \
                 record before it is intact",
                self.line
            ),
            ProblemKind::Malformed(why) => {
                write!(f, "line {}: not an audit record: {why}", self.line)
            }
            ProblemKind::Edited => write!(
                f,
                "line {}: the record was edited: its hash does not match its content",
                self.line
            ),
            ProblemKind::ChainBroken {
                expected_seq,
                found_seq,
            } => write!(
                f,
                "line {}: the chain is broken: expected record {expected_seq} after the previous \
                 one, found record {found_seq} (a record was removed, inserted or moved)",
                self.line
            ),
        }
    }
}

/// Checks a JSON Lines trail: every record's hash, and the chain from each to the next. Stops
/// at the first problem and says where.
pub fn verify_jsonl(path: impl AsRef<Path>) -> Result<VerifyReport, AuditError> {
    let path = path.as_ref();
    let io = |e: std::io::Error| AuditError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let file = File::open(path).map_err(io)?;
    let mut reader = BufReader::new(file);
    let mut records = 0u64;
    let mut last_hash = GENESIS.to_owned();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(io)?;
        if read == 0 {
            break;
        }
        number += 1;
        let complete = line.last() == Some(&b'\n');
        let text = String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(&line)).into_owned();
        let problem = |kind| {
            Ok(VerifyReport {
                records,
                last_hash: last_hash.clone(),
                problem: Some(TrailProblem { line: number, kind }),
            })
        };
        let record: AuditRecord = match serde_json::from_str(&text) {
            Ok(record) => record,
            Err(_) if !complete => return problem(ProblemKind::TornTail),
            Err(error) => return problem(ProblemKind::Malformed(error.to_string())),
        };
        if !complete {
            return problem(ProblemKind::TornTail);
        }
        if record.hash != record.compute_hash() {
            return problem(ProblemKind::Edited);
        }
        if record.seq != records + 1 || record.prev != last_hash {
            return problem(ProblemKind::ChainBroken {
                expected_seq: records + 1,
                found_seq: record.seq,
            });
        }
        records += 1;
        last_hash = record.hash;
    }
    Ok(VerifyReport {
        records,
        last_hash,
        problem: None,
    })
}

/// Reads every intact record of a trail (stopping at the first problem).
pub fn read_jsonl(path: impl AsRef<Path>) -> Result<(Vec<AuditRecord>, VerifyReport), AuditError> {
    let path = path.as_ref();
    let report = verify_jsonl(path)?;
    let text = std::fs::read_to_string(path).map_err(|e| AuditError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let records = text
        .lines()
        .take(report.records as usize)
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    Ok((records, report))
}

/// An audit trail that could not be written or read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditError {
    /// The file could not be opened, read or written (full disk, read-only file, ...).
    Io {
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// An existing trail is broken: appending to it is refused.
    Broken {
        /// The file.
        path: String,
        /// Where it broke.
        problem: TrailProblem,
    },
}

impl fmt::Display for AuditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditError::Io { path, message } => {
                write!(f, "cannot write the audit trail {path}: {message}")
            }
            AuditError::Broken { path, problem } => write!(
                f,
                "the audit trail {path} is broken ({problem}); verify it with `capability audit \
                 verify` and start a new file"
            ),
        }
    }
}

impl std::error::Error for AuditError {}

/// What to do when a record cannot be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnAuditFailure {
    /// Deny the call (fail-closed). The default.
    Deny,
    /// Run the call anyway and count the lost record ([`AuditedDispatch::lost_records`]).
    AllowAndCount,
}

/// The budget of one agent session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Tool-use iterations allowed in a session.
    pub max_calls: u32,
    /// Denied calls tolerated before the session degrades (0: the first denial degrades it).
    pub max_denials: u32,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_calls: 25,
            max_denials: 0,
        }
    }
}

/// Why a session must fall back to its non-agentic path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum DegradeReason {
    /// The session used its tool-call budget.
    BudgetExhausted {
        /// The budget.
        max_calls: u32,
    },
    /// A call was denied for lack of permission.
    Denied {
        /// Why, as text.
        denial: String,
    },
    /// Too many denials.
    TooManyDenials {
        /// The denials tolerated.
        max_denials: u32,
    },
    /// The session degraded earlier and has not been reset by its owner.
    AlreadyDegraded,
}

impl fmt::Display for DegradeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DegradeReason::BudgetExhausted { max_calls } => write!(
                f,
                "the session used its budget of {max_calls} tool calls; fall back to the \
                 non-agentic path (pre-gathered evidence, rules, playbooks)"
            ),
            DegradeReason::Denied { denial } => write!(
                f,
                "{denial}; fall back to the non-agentic path instead of retrying"
            ),
            DegradeReason::TooManyDenials { max_denials } => write!(
                f,
                "more than {max_denials} denied calls; fall back to the non-agentic path"
            ),
            DegradeReason::AlreadyDegraded => f.write_str(
                "the session is degraded until its owner resets it; use the non-agentic path",
            ),
        }
    }
}

/// The result of an audited call.
#[derive(Debug)]
pub enum Outcome<O, E> {
    /// The tool ran and returned this.
    Done(O),
    /// The tool ran and failed.
    Failed(E),
    /// Not authorized; the tool did not run. (Returned when the budget tolerates denials;
    /// otherwise a denial degrades the session: [`Outcome::Degrade`].)
    Denied(Denial),
    /// The session must fall back to its non-agentic path; the tool did not run.
    Degrade(DegradeReason),
    /// The record could not be written, so the tool did not run (fail-closed).
    AuditFailed(AuditError),
}

impl<O, E> Outcome<O, E> {
    /// Whether the tool ran and succeeded.
    pub fn is_done(&self) -> bool {
        matches!(self, Outcome::Done(_))
    }
}

#[derive(Debug, Default)]
struct SessionState {
    calls: u32,
    denials: u32,
    degraded: bool,
}

/// Who is calling: the agent and, optionally, the workflow step. The role and session come
/// from the [`ToolContext`].
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
/// use capability::{Caller, Ceiling, CapabilityManifest, AuditedDispatch, MemorySink, Outcome, ToolContext};
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
        ctx: &ToolContext,
        caller: Caller<'_>,
        input: &Value,
        run: impl FnOnce() -> Result<O, E>,
    ) -> Outcome<O, E> {
        self.call(ctx, caller, T::manifest(), input, run)
    }

    /// Decides, records, runs (only if allowed and recorded) and records the outcome.
    pub fn call<O: Serialize, E: fmt::Display>(
        &self,
        ctx: &ToolContext,
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
        ctx: &ToolContext,
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
        ctx: &ToolContext,
        caller: Caller<'_>,
        tool: &CapabilityManifest,
        input: &Value,
    ) -> Result<Pending, Early> {
        let canonical = crate::to_canonical_json(input);
        let mut redacted = input.clone();
        (self.redactor)(tool, &mut redacted);
        let mut record = AuditRecord {
            seq: 0,
            time: utc_now(),
            agent: caller.agent.to_owned(),
            role: ctx.role().to_owned(),
            session: ctx.session().to_owned(),
            step: caller.step.map(str::to_owned),
            provider: tool.provider().map(str::to_owned),
            tool: tool.name().to_owned(),
            descriptor_hash: tool.descriptor_hash().to_owned(),
            policy_version: self.policy_version.clone(),
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
                let canonical = crate::to_canonical_json(&value);
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

/// The default redaction: each sensitive top-level field of an object input is replaced by
/// `"sha256:<digest of its canonical JSON>"`.
pub fn redact_sensitive(tool: &CapabilityManifest, input: &mut Value) {
    let Some(object) = input.as_object_mut() else {
        return;
    };
    for field in tool.sensitive_fields() {
        if let Some(value) = object.get_mut(field.as_str()) {
            let digest = capability_rules::sha256_hex(crate::to_canonical_json(value).as_bytes());
            *value = Value::String(format!("sha256:{digest}"));
        }
    }
}

fn emit_trace(record: &AuditRecord) {
    tracing::event!(
        target: "capability::audit",
        tracing::Level::INFO,
        seq = record.seq,
        agent = %record.agent,
        role = %record.role,
        session = %record.session,
        step = record.step.as_deref(),
        provider = record.provider.as_deref(),
        tool = %record.tool,
        descriptor_hash = %record.descriptor_hash,
        policy_version = record.policy_version.as_deref(),
        verdict = ?record.verdict,
        reasons = ?record.reasons,
        input_digest = %record.input_digest,
        input_size = record.input_size,
        output_digest = record.output_digest.as_deref(),
        output_size = record.output_size,
        latency_us = record.latency_us,
        success = record.success,
        error = record.error.as_deref(),
        "tool call"
    );
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another thread while holding the lock leaves the data usable: every update
    // here is a whole-value assignment or a push.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The current time, UTC, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn utc_now() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    format_utc(since.as_secs(), since.subsec_millis())
}

fn format_utc(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting() {
        assert_eq!(format_utc(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_utc(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(format_utc(1_795_999_999, 999), "2026-11-30T00:53:19.999Z");
        assert_eq!(format_utc(4_102_444_800, 0), "2100-01-01T00:00:00.000Z");
    }
}
