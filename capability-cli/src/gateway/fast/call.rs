//! A call on the lane from the moment it is written to its server to its end: the client's
//! answer written, then its outcome recorded and its spans ended, on the thread that heard
//! how it ended.

use std::sync::{Arc, Mutex, PoisonError};

use ::rmcp::ErrorData;

use capability::audit::Started;
use capability::mcp::telemetry::{Ending, Operation};

use super::super::handler::{answered, refused};
use super::super::lane::Ended;
use super::{InFlight, answer_line, end};
use crate::proxy::Outbox;

/// A call on the lane, until it ends: what its end is written to, and what it finishes.
pub(super) struct Call {
    /// The client's id, as it wrote it.
    pub(super) id: String,
    pub(super) shown: String,
    pub(super) lane_id: u64,
    pub(super) out: Outbox,
    pub(super) in_flight: Arc<Mutex<InFlight>>,
    pub(super) started: Started,
    pub(super) operation: Operation,
    pub(super) leg: Operation,
    /// The room the call holds until its answer is written.
    pub(super) _held: crate::proxy::Held,
    /// Counts the call open until its end has run to its last line.
    pub(super) open: super::OpenCall,
}

impl Call {
    /// The call ended (on the thread that heard it): the client has its answer, then its
    /// outcome is recorded. A result is the client's as soon as it is read (the call has
    /// happened; an outcome that cannot be written is kept and stops the next call until it
    /// is, it never withholds a result); an error is answered once its outcome is recorded.
    pub(super) fn end(self, ended: Ended) {
        let Call {
            id,
            shown,
            lane_id,
            out,
            in_flight,
            started,
            operation,
            leg,
            _held,
            open,
        } = self;
        {
            // Unless a later call took the client's id over.
            let mut calls = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
            if calls.get(&id).is_some_and(|(_, owner)| *owner == lane_id) {
                calls.remove(&id);
            }
        }
        match ended {
            Ended::Answered(result) => {
                let tool_error = end(leg, Ok(&result));
                let _ = out.write_now(&answer_line(&id, Ok(&result)));
                drop(_held);
                drop(started.finish::<_, String>(Ok(result)));
                operation.end(if tool_error {
                    Ending::ToolError
                } else {
                    Ending::Done
                });
            }
            Ended::Failed(why) => {
                end(leg, Err(()));
                let outcome = started.finish::<(), String>(Err(why));
                let error = match answered(outcome, |why| refused(&shown, why)) {
                    Ok(()) => ErrorData::internal_error("the call failed", None),
                    Err(error) => error,
                };
                operation.end(Ending::Error {
                    code: error.code.0,
                    message: &error.message,
                });
                let _ = out.write_now(&answer_line(&id, Err(error)));
            }
            // No answer: the record says cancelled, and so do the spans.
            Ended::Cancelled => {
                drop(leg);
                drop(started);
                operation.end(Ending::Failed("cancelled"));
            }
        }
        // Only now is the call's end whole: the gateway may close the trail.
        drop(open);
    }
}
