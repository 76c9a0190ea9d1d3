//! Records of what is not a call: nothing is decided and nothing runs, but the trail must say
//! it happened (an agent loop answered from its cache instead of calling the model and tools).

use serde_json::Value;

use capability_core::authz::Action;
use capability_core::manifest::CapabilityManifest;

use super::{AuditedDispatch, Caller, Request, Subject};
use crate::trace::new_call_id;
use crate::{AuditError, AuditRecord, Reason};

/// The record's tool when `target` is not a valid tool name.
const FALLBACK_TARGET: &str = "event";

impl AuditedDispatch {
    /// Records an event that is not a call: `method` (for example `agent/cached`) on `target`
    /// (the record's tool), with `input` (recorded as given, not redacted: put nothing secret
    /// in it) and `reason`. Verdict `allowed`, no phase, no descriptor hash.
    ///
    /// Unlike a call's record it is not kept for later: when it cannot be written now (or
    /// records kept earlier still wait), the error is returned, and the caller must not act
    /// as if it were on record.
    ///
    /// ```
    /// use capability::audit::{AuditedDispatch, Caller, MemorySink, Reason, Subject};
    /// use serde_json::json;
    /// use std::sync::Arc;
    ///
    /// let sink = Arc::new(MemorySink::new());
    /// let dispatch = AuditedDispatch::new(sink.clone());
    /// let written = dispatch.notice(
    ///     &Subject::new("monitor", "loop:INC-7"), Caller::new("watcher").incident("INC-7"),
    ///     "agent/cached", "agent_loop", &json!({"key": "INC-7"}), Reason::text("answered from the cache"),
    /// )?;
    /// assert_eq!(sink.records()[0].method.as_deref(), Some("agent/cached"));
    /// assert_eq!(dispatch.last_written(), Some((written.writer, written.seq)));
    /// # Ok::<(), capability::audit::AuditError>(())
    /// ```
    pub fn notice(
        &self,
        subject: &Subject<'_>,
        caller: Caller<'_>,
        method: &str,
        target: &str,
        input: &Value,
        reason: Reason,
    ) -> Result<AuditRecord, AuditError> {
        let key = self.sink.digest_key()?;
        if !self.backlog.is_empty() {
            self.backlog.drain(self.sink.as_ref(), key)?;
        }
        let stand_in = CapabilityManifest::builder(target)
            .build()
            .or_else(|_| CapabilityManifest::builder(FALLBACK_TARGET).build())
            .map_err(|error| AuditError::Io {
                path: String::new(),
                message: error.to_string(),
            })?;
        let request = Request::mcp(method, Action::CallTool(&stand_in), input);
        let (mut record, _) = self.record(subject, caller, &request, new_call_id(), key);
        target.clone_into(&mut record.tool);
        record.descriptor_hash.clear();
        record.provider = None;
        record.input = input.clone();
        record.reasons = vec![reason];
        let written = self.sink.append(record)?;
        self.wrote(&written);
        Ok(written)
    }
}
