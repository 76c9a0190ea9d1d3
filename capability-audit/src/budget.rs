//! The budget of an agent session, and what a caller does when it is spent: degrade.

use std::fmt;

use serde::{Deserialize, Serialize};

use capability_core::authz::Denial;

use crate::*;

/// What to do when a record cannot be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnAuditFailure {
    /// Deny the call (fail-closed). The default.
    Deny,
    /// Run the call anyway and count the lost record ([`AuditedDispatch::lost_records`]).
    AllowAndCount,
}

/// The budget of one agent session: set with
/// [`AuditedDispatch::with_budget`](crate::AuditedDispatch::with_budget) (a dispatcher has none
/// by default). `Budget::default()` is ADR-105's for an agent loop: 25 calls, and the first
/// denial degrades the session. A server that wants one gives its sessions room for denials
/// (`capability gateway` and `capability proxy`: 10,000 calls, 100 denials).
///
/// ```
/// use capability::CapabilityManifest;
/// use capability::audit::{AuditedDispatch, Budget, Caller, MemorySink, Outcome};
/// use capability::authz::{Ceiling, ToolContext};
/// use std::sync::Arc;
///
/// let restart = CapabilityManifest::builder("restart_pod").destructive(true).build()?;
/// let ctx = ToolContext::new("monitor", "s-1", Ceiling::ReadOnly);
/// let input = serde_json::json!({});
/// let call = |dispatch: &AuditedDispatch| -> Outcome<(), String> {
///     dispatch.call(&ctx, Caller::new("agent"), &restart, &input, || Ok(()))
/// };
/// // No budget (`new`): a refusal is a refusal, and the next call is decided again.
/// let server = AuditedDispatch::new(Arc::new(MemorySink::new()));
/// assert!(matches!(call(&server), Outcome::Denied(_)));
/// assert!(matches!(call(&server), Outcome::Denied(_)));
/// // An agent loop's budget: the first denial degrades the session.
/// let agent = AuditedDispatch::new(Arc::new(MemorySink::new())).with_budget(Budget::default());
/// assert!(matches!(call(&agent), Outcome::Degrade(_)));
/// assert!(agent.is_degraded("s-1"));
/// # Ok::<(), capability::ManifestError>(())
/// ```
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
        /// Why, as the decision's reasons.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasons: Vec<capability_core::authz::DenyReason>,
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
            DegradeReason::Denied { denial, .. } => write!(
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
pub(crate) struct SessionState {
    pub(crate) calls: u32,
    pub(crate) denials: u32,
    pub(crate) degraded: bool,
}
