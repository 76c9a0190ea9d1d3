//! Calls that started and have no outcome: an intent in the trail with no outcome after it.

use std::collections::HashMap;
use std::fmt;

use crate::*;

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
