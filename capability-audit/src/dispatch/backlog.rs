//! The records whose append failed, kept in order until they are written: nothing runs while
//! one waits.
//!
//! Bounded: beyond [`MAX_KEPT`] records, the records of calls that did not run are counted
//! instead of kept, and once the trail takes writes again one record says how many were not
//! recorded. The outcome of a call that ran is always kept (there are at most as many of those
//! as calls in flight, since nothing starts while records wait).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::trace::emit_trace;
use crate::*;

/// How many records of calls that did not run are kept at most.
pub(super) const MAX_KEPT: usize = 10_000;

#[derive(Debug, Default)]
pub(super) struct Backlog {
    waiting: AtomicBool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    records: VecDeque<AuditRecord>,
    /// Records of refused calls dropped beyond the bound.
    unrecorded: u64,
    /// Why the last append failed, while records wait.
    error: Option<AuditError>,
}

impl Backlog {
    /// Whether no record waits (one atomic load: the path of every call).
    pub(super) fn is_empty(&self) -> bool {
        !self.waiting.load(Ordering::Acquire)
    }

    pub(super) fn len(&self) -> usize {
        lock(&self.state).records.len()
    }

    pub(super) fn last_error(&self) -> Option<AuditError> {
        lock(&self.state).error.clone()
    }

    /// Keeps a record that could not be written (`error`), after those already kept.
    pub(super) fn keep(&self, record: AuditRecord, error: &AuditError) {
        let mut state = lock(&self.state);
        let ran = record.phase == Some(Phase::Outcome);
        if ran || state.records.len() < MAX_KEPT {
            state.records.push_back(record);
        } else {
            state.unrecorded += 1;
        }
        state.error = Some(error.clone());
        self.waiting.store(true, Ordering::Release);
    }

    /// Appends every kept record, in order; stops at the first that fails (it stays first).
    pub(super) fn drain(&self, sink: &dyn AuditSink, key: &DigestKey) -> Result<(), AuditError> {
        if self.is_empty() {
            return Ok(());
        }
        let mut state = lock(&self.state);
        while let Some(record) = state.records.front() {
            match sink.append(record.clone()) {
                Ok(written) => {
                    emit_trace(&written);
                    state.records.pop_front();
                }
                Err(error) => {
                    state.error = Some(error.clone());
                    return Err(error);
                }
            }
        }
        if state.unrecorded > 0 {
            let summary = unrecorded(state.unrecorded, key);
            match sink.append(summary) {
                Ok(written) => {
                    emit_trace(&written);
                    state.unrecorded = 0;
                }
                Err(error) => {
                    state.error = Some(error.clone());
                    return Err(error);
                }
            }
        }
        state.error = None;
        self.waiting.store(false, Ordering::Release);
        Ok(())
    }
}

/// The record saying that `n` refused calls were not recorded.
fn unrecorded(n: u64, key: &DigestKey) -> AuditRecord {
    AuditRecord {
        writer: String::new(),
        seq: 0,
        time: utc_now(),
        agent: "capability-audit".to_owned(),
        call_id: None,
        phase: None,
        method: None,
        principal: None,
        role: String::new(),
        session: String::new(),
        step: None,
        incident_id: None,
        provider: None,
        tool: "(unrecorded refusals)".to_owned(),
        descriptor_hash: String::new(),
        policy_version: None,
        verdict: Verdict::AuditFailed,
        reasons: vec![Reason::audit_failed(format!(
            "{n} refused calls were not recorded while the trail could not be written (more \
             than {MAX_KEPT} waited); none of them ran"
        ))],
        input: Value::Null,
        input_digest: key.digest(b"null"),
        input_size: 4,
        output_digest: None,
        output_size: None,
        latency_us: None,
        success: None,
        error: None,
        prev: String::new(),
        hash: String::new(),
    }
}
