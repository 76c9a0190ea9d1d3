//! The records of a trail as calls: each outcome joined to its intent ([`join_calls`]), and the
//! calls that started and have no outcome ([`unfinished_calls`]).

use std::collections::HashMap;
use std::fmt;

use crate::*;

/// One call as the trail holds it: its first record (the intent of a call that ran; the one
/// record of a call that did not run, or of an event such as a reload) and, for a call that
/// ran, its outcome once it is recorded.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The intent, or the call's one record.
    pub first: &'a AuditRecord,
    /// The outcome joined to the intent (same writer and call id), if there is one.
    pub outcome: Option<&'a AuditRecord>,
}

/// The reason code of a call held for a human's approval that came without one.
const HELD: &str = "approval_required";

impl<'a> Call<'a> {
    /// The record that says how the call ended: its outcome, else its first record.
    pub fn end(&self) -> &'a AuditRecord {
        self.outcome.unwrap_or(self.first)
    }

    /// An intent without an outcome: started, and no outcome recorded.
    pub fn started_only(&self) -> bool {
        self.first.phase == Some(Phase::Intent) && self.outcome.is_none()
    }

    /// `recorded`, `started, no outcome recorded`, or `outcome without its intent`.
    pub fn status(&self) -> &'static str {
        if self.started_only() {
            "started, no outcome recorded"
        } else if self.outcome.is_some() || self.first.phase.is_none() {
            "recorded"
        } else {
            "outcome without its intent"
        }
    }

    /// The reasons of its records, each once (an outcome repeats its intent's consent).
    pub fn reasons(&self) -> Vec<&'a Reason> {
        let mut reasons: Vec<&'a Reason> = self.first.reasons.iter().collect();
        for reason in self.outcome.map_or(&[][..], |o| o.reasons.as_slice()) {
            if !reasons.contains(&reason) {
                reasons.push(reason);
            }
        }
        reasons
    }

    /// The human's consent that let it run (a signed approval, a grant, an elicited answer).
    pub fn consent(&self) -> Option<Consent> {
        self.reasons().iter().find_map(|r| r.as_consent())
    }

    /// Refused because it needs a human's approval and came without one (a proposal was made).
    pub fn held(&self) -> bool {
        self.first.reasons.iter().any(|r| r.code() == HELD)
    }

    /// It ran and failed (or was aborted).
    pub fn failed(&self) -> bool {
        self.end().success == Some(false)
    }

    /// A record of an event, not of a call: nothing was decided or run (a policy reload, a
    /// session's log level, an agent loop answered from its cache;
    /// [`AuditedDispatch::notice`]).
    pub fn is_event(&self) -> bool {
        let r = self.first;
        r.phase.is_none()
            && r.verdict == Verdict::Allowed
            && r.descriptor_hash.is_empty()
            && r.success.is_none()
            && r.latency_us.is_none()
    }
}

/// The records as calls, in the order of their first records: each outcome joined to the
/// intent before it of the same writer and call id. An outcome with no intent before it is a
/// call of its own ([`Call::status`] says so).
pub fn join_calls(records: &[AuditRecord]) -> Vec<Call<'_>> {
    let mut calls: Vec<Call<'_>> = Vec::new();
    let mut open: HashMap<(&str, &str), usize> = HashMap::new();
    for record in records {
        let key = record
            .call_id
            .as_deref()
            .map(|id| (record.writer.as_str(), id));
        match (record.phase, key) {
            (Some(Phase::Outcome), Some(key)) if open.contains_key(&key) => {
                if let Some(i) = open.remove(&key) {
                    calls[i].outcome = Some(record);
                }
            }
            (Some(Phase::Intent), Some(key)) => {
                open.insert(key, calls.len());
                calls.push(Call {
                    first: record,
                    outcome: None,
                });
            }
            _ => calls.push(Call {
                first: record,
                outcome: None,
            }),
        }
    }
    calls
}

/// A call whose intent is in the trail and whose outcome is not: it started (the tool or the
/// server may have acted) and no outcome was recorded. Its writer was killed while it ran, or
/// it is still running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unfinished {
    /// The writer of the intent.
    pub writer: String,
    /// The intent's `seq`.
    pub seq: u64,
    /// The call's id.
    pub call_id: String,
    /// What was called.
    pub tool: String,
    /// The session.
    pub session: String,
    /// When the intent was written.
    pub time: String,
}

impl serde::Serialize for Unfinished {
    /// Its fields, and `status`: `started, no outcome recorded`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("Unfinished", 7)?;
        s.serialize_field("writer", &self.writer)?;
        s.serialize_field("seq", &self.seq)?;
        s.serialize_field("call_id", &self.call_id)?;
        s.serialize_field("tool", &self.tool)?;
        s.serialize_field("session", &self.session)?;
        s.serialize_field("time", &self.time)?;
        s.serialize_field("status", "started, no outcome recorded")?;
        s.end()
    }
}

impl fmt::Display for Unfinished {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "record {}: started, no outcome recorded: `{}` (call {}, session `{}`, at {})",
            self.seq, self.tool, self.call_id, self.session, self.time
        )
    }
}

/// The calls of `records` (any order, any writers) that have an intent and no outcome, by
/// writer and `seq`.
///
/// ```
/// use capability::audit::{unfinished_calls, AuditRecord, Phase};
/// # fn record(seq: u64, phase: Phase, call: &str) -> AuditRecord {
/// #   let mut r: AuditRecord = serde_json::from_value(serde_json::json!({
/// #   "seq": seq, "time": "t", "agent": "a", "role": "r", "session": "s", "step": null,
/// #   "provider": null, "tool": "restart_pod", "descriptor_hash": "", "policy_version": null,
/// #   "verdict": "allowed", "reasons": [], "input": null, "input_digest": "", "input_size": 0,
/// #   "output_digest": null, "output_size": null, "latency_us": null, "success": null,
/// #   "error": null, "prev": "", "hash": ""})).unwrap();
/// #   r.phase = Some(phase); r.call_id = Some(call.into()); r }
/// let records = [record(1, Phase::Intent, "c1"), record(2, Phase::Outcome, "c1"),
///                record(3, Phase::Intent, "c2")];
/// let open = unfinished_calls(&records);
/// assert_eq!(open.len(), 1);
/// assert_eq!((open[0].seq, open[0].call_id.as_str()), (3, "c2"));
/// ```
pub fn unfinished_calls<'a>(records: impl IntoIterator<Item = &'a AuditRecord>) -> Vec<Unfinished> {
    let mut open: HashMap<(&'a str, &'a str), &'a AuditRecord> = HashMap::new();
    for record in records {
        let Some(call_id) = record.call_id.as_deref() else {
            continue;
        };
        match record.phase {
            Some(Phase::Intent) => {
                open.insert((record.writer.as_str(), call_id), record);
            }
            Some(Phase::Outcome) => {
                open.remove(&(record.writer.as_str(), call_id));
            }
            None => {}
        }
    }
    let mut unfinished: Vec<Unfinished> = open
        .into_values()
        .map(|r| Unfinished {
            writer: r.writer.clone(),
            seq: r.seq,
            call_id: r.call_id.clone().unwrap_or_default(),
            tool: r.tool.clone(),
            session: r.session.clone(),
            time: r.time.clone(),
        })
        .collect();
    unfinished.sort_by(|a, b| (&a.writer, a.seq).cmp(&(&b.writer, b.seq)));
    unfinished
}
