//! The guard of a running call: whatever happens to the call, its outcome is written once.
//!
//! The call's outcome record lives in a [`CallGuard`] while the tool runs (its intent is in the
//! trail already). Completed normally, the guard writes the outcome. Dropped before that (the
//! tool panicked, or the call's future was dropped), it writes the outcome of an aborted call:
//! `success: false` and an `error` saying which. The panic itself goes on unchanged. An outcome
//! that cannot be written is kept by the dispatcher, and nothing runs until it is written.
//! [`Started`] is the same guard owning its dispatcher, for a call finished elsewhere.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use tracing::Span;

use super::{AuditedDispatch, Pending};
use crate::trace::{CallSpan, end_span};
use crate::*;

/// The `error` of the record of a call whose tool panicked.
const PANICKED: &str = "aborted: the tool panicked; the call may have acted before it did";
/// The `error` of the record of a call whose future was dropped.
const CANCELLED: &str =
    "aborted: the call was cancelled (its future was dropped); the call may have acted before";

/// A call that may run: the record to write once, whatever happens. `D` is how it holds its
/// dispatcher: borrowed for the duration of `act`, owned by a [`Started`].
pub(super) struct CallGuard<D: Deref<Target = AuditedDispatch>> {
    dispatch: D,
    /// `None` once written (or when there is no record to write: an unkeyed sink under
    /// `AllowAndCount`).
    pending: Option<Pending>,
    start: Instant,
    span: CallSpan,
    done: bool,
}

impl<D: Deref<Target = AuditedDispatch>> CallGuard<D> {
    /// Starts the clock of a call about to run.
    pub(super) fn new(dispatch: D, pending: Option<Pending>, span: CallSpan) -> Self {
        CallGuard {
            dispatch,
            pending,
            start: Instant::now(),
            span,
            done: false,
        }
    }

    /// The call's span: the tool runs in it.
    pub(super) fn span(&self) -> &Span {
        &self.span
    }

    /// The tool returned: records the outcome.
    pub(super) fn finish<O: Serialize, E: fmt::Display>(
        self,
        result: Result<O, E>,
    ) -> Outcome<O, E> {
        self.finish_then(result, None)
    }

    /// [`finish`](Self::finish), filling `receipt` with the outcome record's receipt once it is
    /// written.
    pub(super) fn finish_then<O: Serialize, E: fmt::Display>(
        mut self,
        result: Result<O, E>,
        receipt: Option<&mut Option<crate::tlog::Receipt>>,
    ) -> Outcome<O, E> {
        self.done = true;
        let elapsed = self.start.elapsed();
        if let Some(pending) = self.pending.take() {
            let key = self.dispatch.sink.digest_key().ok();
            let record = completed(pending, key, elapsed, &result);
            // The call has happened. Under `Deny`, an outcome that cannot be written is kept,
            // and stops the next calls until it is written.
            self.span
                .in_scope(|| self.dispatch.write_then(record, &self.span, receipt));
        }
        let error_type = result.is_err().then_some("tool_error");
        end_span(&self.span, Verdict::Allowed, error_type);
        match result {
            Ok(output) => Outcome::Done(output),
            Err(error) => Outcome::Failed(error),
        }
    }
}

/// A call decided and its intent written ([`AuditedDispatch::start`]), running: its outcome
/// is written once, by [`finish`](Started::finish), or when it is dropped unfinished (then as
/// cancelled, or aborted by a panic). It owns what it needs, so it can be sent to the thread
/// or task that hears the call's result.
pub struct Started(pub(super) CallGuard<Arc<AuditedDispatch>>);

impl Started {
    /// The call's span (`execute_tool`): what runs it, and its children, belong inside.
    pub fn span(&self) -> &Span {
        self.0.span()
    }

    /// The call returned `result`: its outcome is written (a result's keyed digest, an error's
    /// text), and the outcome returned as [`AuditedDispatch::act`] returns it.
    pub fn finish<O: Serialize, E: fmt::Display>(self, result: Result<O, E>) -> Outcome<O, E> {
        self.0.finish(result)
    }

    /// [`finish`](Self::finish), and the receipt of the call's outcome record
    /// ([`tlog::Receipt`]: what a client that asked for one gets in the result's `_meta`);
    /// `None` when the record could not be written (it is kept, and written later).
    pub fn finish_with_receipt<O: Serialize, E: fmt::Display>(
        self,
        result: Result<O, E>,
    ) -> (Outcome<O, E>, Option<crate::tlog::Receipt>) {
        let mut receipt = None;
        let outcome = self.0.finish_then(result, Some(&mut receipt));
        (outcome, receipt)
    }
}

impl fmt::Debug for Started {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Started")
            .field("started", &self.0.start)
            .finish_non_exhaustive()
    }
}

impl<D: Deref<Target = AuditedDispatch>> Drop for CallGuard<D> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (error, error_type) = if std::thread::panicking() {
            (PANICKED, "panic")
        } else {
            (CANCELLED, "cancelled")
        };
        end_span(&self.span, Verdict::Allowed, Some(error_type));
        if let Some(pending) = self.pending.take() {
            let mut record = pending.record;
            record.latency_us = Some(micros(self.start.elapsed()));
            record.success = Some(false);
            record.error = Some(error.to_owned());
            self.span
                .in_scope(|| self.dispatch.write(record, &self.span));
        }
    }
}

/// The record of a call that returned.
fn completed<O: Serialize, E: fmt::Display>(
    pending: Pending,
    key: Option<&DigestKey>,
    elapsed: Duration,
    result: &Result<O, E>,
) -> AuditRecord {
    let Pending { mut record } = pending;
    record.latency_us = Some(micros(elapsed));
    match result {
        Ok(output) => {
            // Keyed too: an output can carry what a sensitive field holds (a token, a row).
            // The key the intent was made with (the sink keeps one for its life).
            let digested = key
                .ok_or_else(|| "the sink has no digest key".to_owned())
                .and_then(|key| {
                    canonical_output(output, |canonical| {
                        (key.digest(canonical.as_bytes()), canonical.len() as u64)
                    })
                });
            match digested {
                Ok((digest, size)) => {
                    record.output_digest = Some(digest);
                    record.output_size = Some(size);
                }
                Err(why) => record.reasons.push(Reason::invalid_request(format!(
                    "the output is not digested: {why}"
                ))),
            }
            record.success = Some(true);
        }
        Err(error) => {
            record.success = Some(false);
            record.error = Some(error.to_string());
        }
    }
    record
}

/// `digest` of the canonical JSON of an output, serialized with its nesting bounded by
/// [`MAX_DEPTH`](capability_core::json::MAX_DEPTH) (an output nested deeper is an error, found
/// before serialization recurses any deeper), then read back and written canonically.
fn canonical_output<O: Serialize, R>(
    output: &O,
    digest: impl FnOnce(&str) -> R,
) -> Result<R, String> {
    let value: Value = crate::scratch::with_bytes(|bytes| {
        let mut serializer = serde_json::Serializer::with_formatter(&mut *bytes, Bounded(0));
        output
            .serialize(&mut serializer)
            .map_err(|e| e.to_string())?;
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    })?;
    Ok(crate::scratch::with_text(|canonical| {
        capability_core::json::write_canonical_json(canonical, &value);
        digest(canonical)
    }))
}

/// serde_json's compact formatter, refusing to open an array or object past the depth limit.
struct Bounded(usize);

impl Bounded {
    fn open(&mut self) -> std::io::Result<()> {
        self.0 += 1;
        if self.0 > capability_core::json::MAX_DEPTH {
            return Err(std::io::Error::other(format!(
                "it nests deeper than {} levels",
                capability_core::json::MAX_DEPTH
            )));
        }
        Ok(())
    }
}

impl serde_json::ser::Formatter for Bounded {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.open()?;
        writer.write_all(b"[")
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0 -= 1;
        writer.write_all(b"]")
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.open()?;
        writer.write_all(b"{")
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0 -= 1;
        writer.write_all(b"}")
    }
}

fn micros(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX)
}
