//! How a loop run ends: a final answer, or a typed degrade.

use std::fmt;
use std::time::Instant;

use capability_audit::DegradeReason;

use crate::model::ModelError;

/// How a loop run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum LoopOutcome {
    /// The model gave its final answer (a turn without tool calls).
    Answer {
        /// The answer's text (empty when the model said nothing).
        text: String,
        /// Model turns made.
        iterations: u32,
        /// Tool calls handled (each with one audit record).
        tool_calls: u32,
    },
    /// The loop stopped without an answer: the caller falls back to its existing path
    /// (pre-gathered evidence, rules, playbooks). The loop never retries.
    Degraded {
        /// Why.
        degrade: Degrade,
        /// Model turns made.
        iterations: u32,
        /// Tool calls handled (each with one audit record).
        tool_calls: u32,
    },
}

impl LoopOutcome {
    /// The final answer's text, if the loop ended with one.
    pub fn answer(&self) -> Option<&str> {
        match self {
            LoopOutcome::Answer { text, .. } => Some(text),
            LoopOutcome::Degraded { .. } => None,
        }
    }

    /// The degrade, if the loop ended with one.
    pub fn degrade(&self) -> Option<&Degrade> {
        match self {
            LoopOutcome::Answer { .. } => None,
            LoopOutcome::Degraded { degrade, .. } => Some(degrade),
        }
    }

    /// Model turns made.
    pub fn iterations(&self) -> u32 {
        match self {
            LoopOutcome::Answer { iterations, .. } | LoopOutcome::Degraded { iterations, .. } => {
                *iterations
            }
        }
    }

    /// Tool calls handled.
    pub fn tool_calls(&self) -> u32 {
        match self {
            LoopOutcome::Answer { tool_calls, .. } | LoopOutcome::Degraded { tool_calls, .. } => {
                *tool_calls
            }
        }
    }
}

/// Why a loop run degraded. Every degrade means the same thing to the caller: fall back to the
/// existing path, do not retry.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Degrade {
    /// The model still asked for tools after `max` turns.
    IterationsExceeded {
        /// The loop's `max_iterations`.
        max: u32,
    },
    /// The model does not support tool use (said before any turn, or by the provider).
    NoToolSupport {
        /// The provider.
        provider: String,
    },
    /// The audited dispatch degraded the session: a denial beyond the session's budget, the
    /// call budget spent, or a session degraded earlier.
    Denied {
        /// The dispatch's reason.
        reason: DegradeReason,
    },
    /// A model turn failed. The provider's circuit breaker counts it.
    ProviderFailing {
        /// The provider.
        provider: String,
        /// What failed.
        error: ModelError,
    },
    /// The provider's circuit breaker is open: the model was not called.
    BreakerOpen {
        /// The provider.
        provider: String,
        /// When the breaker lets a probe through again.
        until: Instant,
    },
    /// A tool call's audit record could not be written, so the call did not run
    /// (fail-closed) and the loop stopped.
    AuditFailed {
        /// The audit error, as text.
        error: String,
    },
    /// The server's tool list could not be read (a tool that is not a valid MCP tool, a server
    /// name that is not a provider name).
    InvalidTools {
        /// What is wrong, as text.
        error: String,
    },
}

impl fmt::Display for Degrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Degrade::IterationsExceeded { max } => {
                write!(f, "no final answer within {max} model turns")
            }
            Degrade::NoToolSupport { provider } => {
                write!(f, "the model of `{provider}` does not support tool use")
            }
            Degrade::Denied { reason } => write!(f, "{reason}"),
            Degrade::ProviderFailing { provider, error } => {
                write!(f, "the provider `{provider}` failed: {error}")
            }
            Degrade::BreakerOpen { provider, .. } => write!(
                f,
                "the circuit breaker of `{provider}` is open; the model was not called"
            ),
            Degrade::AuditFailed { error } => {
                write!(
                    f,
                    "a tool call could not be audited ({error}); the loop stopped"
                )
            }
            Degrade::InvalidTools { error } => {
                write!(f, "the server's tool list cannot be read: {error}")
            }
        }
    }
}
