//! One tool call: shown or not, well-formed or not, it goes through the audited dispatch once
//! and gets one result.

use serde_json::{Value, json};

use capability_audit::{AuditedDispatch, Caller, DegradeReason, Outcome};
use capability_core::authz::{Authorize, Decision, DenyReason};
use capability_core::manifest::CapabilityManifest;

use super::{Shown, ToolExecutor};
use crate::model::{Arguments, ToolCall, ToolResult};

/// The longest tool name echoed back to the model or into a record's reasons.
const MAX_ECHOED_NAME: usize = 128;

/// What became of one tool call.
pub(super) struct Handled {
    /// The result the model gets.
    pub(super) result: ToolResult,
    /// The call ended the loop: the session degraded, or the call could not be audited.
    pub(super) stop: Option<Stop>,
}

/// Why a call ends the loop.
pub(super) enum Stop {
    /// The audited dispatch degraded the session.
    Degrade(DegradeReason),
    /// The call's record could not be written.
    AuditFailed(String),
}

/// Everything a call needs besides itself.
pub(super) struct Context<'a, D: ?Sized, X: ?Sized> {
    pub(super) dispatch: &'a AuditedDispatch,
    pub(super) shown: &'a Shown,
    pub(super) decider: &'a D,
    pub(super) caller: Caller<'a>,
    pub(super) executor: &'a X,
}

impl<D: Authorize + ?Sized, X: ToolExecutor + ?Sized> Context<'_, D, X> {
    /// Handles one call: exactly one audit record, exactly one result.
    pub(super) fn handle(&self, call: &ToolCall) -> Handled {
        match self.shown.manifest(&call.name) {
            Some(manifest) => self.shown_call(call, manifest),
            None => self.unshown_call(call),
        }
    }

    /// A call of a tool the model was shown: decided again by the dispatch, and run only with
    /// well-formed arguments.
    fn shown_call(&self, call: &ToolCall, manifest: &CapabilityManifest) -> Handled {
        let outcome = match &call.arguments {
            Arguments::Json(arguments) => {
                self.dispatch
                    .call(self.decider, self.caller, manifest, arguments, || {
                        self.executor.call(&call.name, arguments)
                    })
            }
            // Recorded (decided, not run: the record says why); the raw text is not stored.
            Arguments::Malformed { raw, error } => {
                let why = format!(
                    "malformed arguments ({} bytes, not stored): {error}; the tool was not run",
                    raw.len()
                );
                self.dispatch
                    .call(self.decider, self.caller, manifest, &Value::Null, || {
                        Err::<Value, String>(why)
                    })
            }
        };
        match outcome {
            Outcome::Done(output) => answer(call, output, false),
            Outcome::Failed(error) => answer(call, Value::String(error), true),
            Outcome::Denied(denial) => answer(call, Value::String(denial.to_string()), true),
            Outcome::Degrade(reason) => degraded(call, reason),
            Outcome::AuditFailed(error) => audit_failed(call, error.to_string()),
        }
    }

    /// A call of a tool the model was not shown (hidden from the role, or not listed at all):
    /// never run; recorded as a denial through the dispatch (so it counts against the session's
    /// budget like any denial); the model is told no such tool is available, in the same words
    /// whether or not the server lists it.
    fn unshown_call(&self, call: &ToolCall) -> Handled {
        let listed = self.shown.listed(&call.name);
        let manifest = match listed {
            Some(manifest) => manifest.clone(),
            None => match self.shown.stand_in(&call.name) {
                Some(manifest) => manifest,
                None => {
                    return audit_failed(
                        call,
                        "the call cannot be described for the audit trail".to_owned(),
                    );
                }
            },
        };
        let input = match &call.arguments {
            Arguments::Json(arguments) => arguments.clone(),
            Arguments::Malformed { .. } => Value::Null,
        };
        let decider = Unshown {
            inner: self.decider,
            listed: listed.is_some(),
        };
        let outcome = self
            .dispatch
            .call(&decider, self.caller, &manifest, &input, || {
                Err::<Value, String>("a tool the model was not shown is never run".to_owned())
            });
        // Whatever happened, the result says only that no such tool is available: even the
        // transcript of a degraded run does not tell the model the tool exists.
        let mut handled = answer(
            call,
            Value::String(format!(
                "no tool named `{}` is available",
                truncate(&call.name, MAX_ECHOED_NAME)
            )),
            true,
        );
        handled.stop = match outcome {
            Outcome::Denied(_) | Outcome::Done(_) | Outcome::Failed(_) => None,
            Outcome::Degrade(reason) => Some(Stop::Degrade(reason)),
            Outcome::AuditFailed(error) => Some(Stop::AuditFailed(error.to_string())),
        };
        handled
    }
}

/// The decider for a tool the model was not shown: it always denies, with the role's own
/// reasons when the role denies the tool, and otherwise (a tool hidden for drift or a duplicate
/// name, or one the server does not list) with [`DenyReason::Withheld`].
struct Unshown<'d, D: ?Sized> {
    inner: &'d D,
    listed: bool,
}

impl<D: Authorize + ?Sized> Authorize for Unshown<'_, D> {
    fn decide(&self, tool: &CapabilityManifest) -> Decision {
        let decision = if self.listed {
            self.inner.decide(tool)
        } else {
            Decision::default()
        };
        if !decision.is_allowed() {
            return decision;
        }
        Decision::deny(DenyReason::Withheld {
            why: if self.listed {
                "it was not shown to the model (its descriptor drifted from its pin, or its name \
                 is listed twice)"
                    .to_owned()
            } else {
                "the server does not list a tool with this name".to_owned()
            },
        })
    }

    fn principal(&self) -> &str {
        self.inner.principal()
    }

    fn session(&self) -> &str {
        self.inner.session()
    }

    fn policy_version(&self) -> Option<&str> {
        self.inner.policy_version()
    }
}

fn answer(call: &ToolCall, content: Value, is_error: bool) -> Handled {
    Handled {
        result: ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error,
        },
        stop: None,
    }
}

fn degraded(call: &ToolCall, reason: DegradeReason) -> Handled {
    let mut handled = answer(
        call,
        json!(format!("not run: the session degraded ({reason})")),
        true,
    );
    handled.stop = Some(Stop::Degrade(reason));
    handled
}

fn audit_failed(call: &ToolCall, error: String) -> Handled {
    let mut handled = answer(
        call,
        json!(format!("not run: the call could not be audited ({error})")),
        true,
    );
    handled.stop = Some(Stop::AuditFailed(error));
    handled
}

/// At most `max` characters of `text`.
pub(super) fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}
