//! A call on the lane from the moment it is written to its server to its end: the client's
//! answer written, then its outcome recorded and its spans ended, on the thread that heard
//! how it ended.

use std::sync::{Arc, Mutex, PoisonError};

use ::rmcp::ErrorData;

use capability::audit::Started;
use capability::mcp::telemetry::{Ending, Operation};

use crate::lane::{InFlight, answer_line, end};
use crate::serve::refusal::{answered, refused_by};
use crate::upstream::stdio::Ended;
use crate::wire::outbox::Outbox;

/// A call on the lane, until it ends: what its end is written to, and what it finishes.
pub(crate) struct Call {
    /// The client's id, as it wrote it.
    pub(crate) id: String,
    pub(crate) shown: String,
    /// Who refuses (the engine's name).
    pub(crate) by: &'static str,
    pub(crate) lane_id: u64,
    pub(crate) out: Outbox,
    pub(crate) in_flight: Arc<Mutex<InFlight>>,
    pub(crate) started: Started,
    pub(crate) operation: Operation,
    pub(crate) leg: Operation,
    /// The room the call holds until its answer is written.
    pub(crate) _held: crate::wire::outbox::Held,
    /// Counts the call open until its end has run to its last line.
    pub(crate) open: crate::lane::OpenCall,
    /// Whether the client's result says `resultType` (a client of 2026-07-28, a server of
    /// 2025-11-25: `bridged.rs`).
    pub(crate) complete: bool,
}

impl Call {
    /// The call ended (on the thread that heard it): the client has its answer and the outcome
    /// is recorded, in the order [`settle`] says.
    pub(crate) fn end(self, ended: Ended) {
        let Call {
            id,
            shown,
            by,
            lane_id,
            out,
            in_flight,
            started,
            operation,
            leg,
            _held,
            open,
            complete,
        } = self;
        {
            // Unless a later call took the client's id over.
            let mut calls = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
            if calls.get(&id).is_some_and(|(_, owner)| *owner == lane_id) {
                calls.remove(&id);
            }
        }
        let (answer, record) = settle(ended, (&id, complete), by, &shown, started, operation, leg);
        if let Some(answer) = answer {
            let _ = out.write_now(&answer);
        }
        drop(_held);
        if let Some(record) = record {
            record.record();
        }
        // Only now is the call's end whole: the gateway may close the trail.
        drop(open);
    }
}

/// A result's outcome, recorded once the client has the result.
pub(crate) struct Record {
    started: Started,
    operation: Operation,
    result: Box<serde_json::value::RawValue>,
    tool_error: bool,
}

impl Record {
    pub(crate) fn record(self) {
        drop(self.started.finish::<_, String>(Ok(self.result)));
        self.operation.end(if self.tool_error {
            Ending::ToolError
        } else {
            Ending::Done
        });
    }
}

/// How a call on a lane (stdio's or HTTP's) ended, for its client and its record: the answer
/// to give the client (the JSON-RPC message and its newline, under the client's `id`, its result
/// marked `resultType` when `complete` says so; none when cancelled), and, for a
/// result, its outcome to record once the answer is given. A result is the client's as soon as
/// it is read (the call has happened; an outcome that cannot be written is kept and stops the
/// next call until it is, it never withholds a result); an error is answered once its outcome
/// is recorded; a cancelled call's record and spans say cancelled.
pub(crate) fn settle(
    ended: Ended,
    (id, complete): (&str, bool),
    by: &str,
    shown: &str,
    started: Started,
    operation: Operation,
    leg: Operation,
) -> (Option<Vec<u8>>, Option<Record>) {
    match ended {
        Ended::Answered(result) => {
            let tool_error = end(leg, Ok(&result));
            let answer = if complete {
                answer_line(id, Ok(&super::bridged::completed(&result)))
            } else {
                answer_line(id, Ok(&result))
            };
            let record = Record {
                started,
                operation,
                result,
                tool_error,
            };
            (Some(answer), Some(record))
        }
        Ended::Failed(why) => {
            end(leg, Err(()));
            let outcome = started.finish::<(), String>(Err(why));
            let error = match answered(outcome, |why| refused_by(by, "tool", shown, why)) {
                Ok(()) => ErrorData::internal_error("the call failed", None),
                Err(error) => error,
            };
            operation.end(Ending::Error {
                code: error.code.0,
                message: &error.message,
            });
            (Some(answer_line(id, Err(error))), None)
        }
        Ended::Cancelled => {
            drop(leg);
            drop(started);
            operation.end(Ending::Failed("cancelled"));
            (None, None)
        }
    }
}
