//! Calls that return a receipt with their outcome ([`tlog::Receipt`]): for a client that asked
//! for one (`"capability/receipt": true` in the request's `_meta`,
//! [`tlog::RECEIPT_META_KEY`]), so that it can fetch the proof of the call's outcome record
//! once the writer's next checkpoint covers it.

use std::fmt;

use serde::Serialize;
use tracing::Instrument;

use capability_core::authz::Authorize;

use super::guard::CallGuard;
use super::{AuditedDispatch, Caller, Request, Subject};
use crate::{AuditRecord, Outcome, tlog};

/// Where a written record's receipt goes, when one is wanted.
pub(super) type Slot<'a> = Option<&'a mut Option<tlog::Receipt>>;

/// Fills `slot` (when given) with the receipt of `record`, just written.
pub(super) fn fill(slot: Slot<'_>, record: &AuditRecord) {
    if let Some(slot) = slot {
        *slot = tlog::Receipt::of(record).ok();
    }
}

impl AuditedDispatch {
    /// [`act_async`](Self::act_async), and the receipt of the call's outcome record when
    /// `receipt` is asked for and the call ran (a refused call has no outcome record; an
    /// outcome that could not be written yet has no receipt).
    ///
    /// ```
    /// use capability::CapabilityManifest;
    /// use capability::audit::{AuditedDispatch, Caller, MemorySink, Request};
    /// use capability::authz::{Action, Ceiling, ToolContext};
    /// use serde_json::json;
    /// use std::sync::Arc;
    ///
    /// let sink = Arc::new(MemorySink::new());
    /// let dispatch = AuditedDispatch::new(sink.clone());
    /// let ctx = ToolContext::new("monitor", "s-1", Ceiling::ReadOnly);
    /// let list = CapabilityManifest::builder("list_pods").read_only(true).build()?;
    /// let input = json!({"ns": "prod"});
    /// let request = Request::mcp("tools/call", Action::CallTool(&list), &input);
    /// let run = async { Ok::<_, String>(3) };
    /// let (_, receipt) = futures_lite_block_on(
    ///     dispatch.act_async_with_receipt(&ctx, Caller::new("watcher"), &request, run, true));
    /// let receipt = receipt.expect("a receipt");
    /// assert_eq!((receipt.seq, receipt.index), (2, 1), "the outcome, after the intent");
    /// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let waker = std::task::Waker::noop();
    /// #     let mut cx = std::task::Context::from_waker(&waker);
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop {
    /// #         if let std::task::Poll::Ready(out) = f.as_mut().poll(&mut cx) { return out; }
    /// #     }
    /// # }
    /// # Ok::<(), capability::ManifestError>(())
    /// ```
    pub async fn act_async_with_receipt<O: Serialize, E: fmt::Display, F>(
        &self,
        ctx: &(impl Authorize + ?Sized),
        caller: Caller<'_>,
        request: &Request<'_>,
        run: F,
        receipt: bool,
    ) -> (Outcome<O, E>, Option<tlog::Receipt>)
    where
        F: std::future::Future<Output = Result<O, E>>,
    {
        let (span, call_id) = self.span(&Subject::of(ctx), caller, request);
        match span.in_scope(|| self.before(ctx, caller, request, call_id, &span)) {
            Err(early) => (early.into_outcome(&span), None),
            Ok(pending) => {
                let guard = CallGuard::new(self, pending, span);
                let result = run.instrument(guard.span().clone()).await;
                let mut written = None;
                let outcome = guard.finish_then(result, receipt.then_some(&mut written));
                (outcome, written)
            }
        }
    }
}
