//! Why the gate refused a proposal, or a proposal, approval or key file could not be read.

use std::fmt;

use crate::ledger::StoreError;

/// Why the gate refused, or a file could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateError {
    /// No approval was given.
    Unsigned,
    /// The approver is not one the gate trusts.
    UnknownApprover(String),
    /// The signature is not the approver's.
    BadSignature(String),
    /// The approval is for another tool.
    OtherTool {
        /// The approved tool.
        approved: String,
        /// The proposed tool.
        proposed: String,
    },
    /// The approval (or the proposal) is for another audience than this gate's.
    OtherAudience {
        /// The audience it is for.
        audience: String,
        /// This gate's audience.
        gate: String,
    },
    /// The approval is for another type of tool (same name, another module or other generic
    /// arguments).
    OtherType {
        /// The approved type.
        approved: String,
        /// The proposed type.
        proposed: String,
    },
    /// The approval was given to another proposer than the caller who presents it: an approval
    /// runs only for whoever made the proposal it signs.
    OtherProposer {
        /// The proposer the approval was signed for.
        approved: String,
        /// Who presents it.
        caller: String,
    },
    /// The approval binds no proposer: it was signed by a `capability` from before approvals
    /// bound their proposer, so whoever learnt it could run it.
    NoProposer(String),
    /// The arguments differ from the approved ones.
    ArgumentsChanged,
    /// The tool's descriptor changed since the approval.
    DescriptorChanged,
    /// The approval has expired.
    Expired {
        /// When it expired.
        expired_at: u64,
        /// Now.
        now: u64,
    },
    /// The approval says it was issued later than now (beyond the clock tolerance).
    IssuedInFuture {
        /// When it says it was issued.
        issued_at: u64,
        /// Now.
        now: u64,
    },
    /// The approval is valid for longer than the gate allows.
    TooLong {
        /// Its validity, in seconds.
        validity: u64,
        /// The gate's maximum.
        max: u64,
    },
    /// The arguments cannot be signed faithfully: they do not survive a round trip through
    /// JSON.
    Unsignable {
        /// Where in the arguments (`$.field[0].inner`).
        path: String,
        /// Why.
        why: String,
    },
    /// The approval was used already.
    Replay(String),
    /// The approval ledger could not be reached: the approval is refused and not used up.
    LedgerUnavailable(StoreError),
    /// The clock stepped back further than the tolerance: time checks cannot be trusted.
    ClockWentBack {
        /// Now.
        now: u64,
        /// The latest time seen.
        latest: u64,
    },
    /// A validation or preflight check refused.
    CheckFailed {
        /// `validation` or `preflight`.
        kind: &'static str,
        /// The check.
        check: String,
        /// Its reason.
        reason: String,
    },
    /// A proposal, approval or key could not be read.
    Malformed {
        /// What.
        what: String,
        /// Why.
        why: String,
    },
}

impl fmt::Display for GateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateError::Unsigned => f.write_str(
                "not approved: no signed approval; a human must sign the proposal \
                 (`capability approve`)",
            ),
            GateError::UnknownApprover(who) => {
                write!(
                    f,
                    "not approved: `{who}` is not an approver this gate trusts"
                )
            }
            GateError::BadSignature(who) => write!(
                f,
                "not approved: the signature is not `{who}`'s (forged or altered approval)"
            ),
            GateError::OtherTool { approved, proposed } => write!(
                f,
                "not approved: the approval is for `{approved}`, the proposal for `{proposed}`"
            ),
            GateError::OtherAudience { audience, gate } => write!(
                f,
                "not approved: the approval is for audience `{audience}`, this gate is for \
                 `{gate}`"
            ),
            GateError::OtherType { approved, proposed } => write!(
                f,
                "not approved: the approval is for type `{approved}`, the proposal for \
                 `{proposed}`"
            ),
            GateError::IssuedInFuture { issued_at, now } => write!(
                f,
                "not approved: the approval says it was issued at {issued_at}, later than now \
                 ({now}); check the approver's clock"
            ),
            GateError::TooLong { validity, max } => write!(
                f,
                "not approved: the approval is valid for {validity} s, longer than this gate's \
                 maximum of {max} s; sign it again with a shorter `--expires-in`"
            ),
            GateError::Unsignable { path, why } => {
                write!(f, "cannot propose these arguments: `{path}`: {why}")
            }
            GateError::OtherProposer { approved, caller } => write!(
                f,
                "not approved: the approval was given to the proposer `{approved}`, and `{caller}` \
                 presents it; an approval runs only for whoever made the proposal"
            ),
            GateError::NoProposer(id) => write!(
                f,
                "not approved: approval {id} does not bind its proposer (it was signed by an \
                 older `capability approve`, before approvals named who may use them); have the \
                 proposal signed again"
            ),
            GateError::ArgumentsChanged => f.write_str(
                "not approved: the arguments differ from the approved ones; sign the new proposal",
            ),
            GateError::DescriptorChanged => f.write_str(
                "not approved: the tool's descriptor changed since the approval; review it again",
            ),
            GateError::Expired { expired_at, now } => write!(
                f,
                "not approved: the approval expired at {expired_at} (now {now})"
            ),
            GateError::Replay(id) => {
                write!(f, "not approved: approval {id} was used already (replay)")
            }
            GateError::LedgerUnavailable(error) => write!(
                f,
                "not approved: the approval ledger cannot be reached, so a replay cannot be \
                 ruled out ({error}); the approval was not used up"
            ),
            GateError::ClockWentBack { now, latest } => write!(
                f,
                "not approved: the clock went back from {latest} to {now}; time checks cannot \
                 be trusted until it is right"
            ),
            GateError::CheckFailed {
                kind,
                check,
                reason,
            } => write!(f, "not approved: {kind} check `{check}` refused: {reason}"),
            GateError::Malformed { what, why } => write!(f, "cannot read {what}: {why}"),
        }
    }
}

impl std::error::Error for GateError {}
