//! The gated write path of `capability`: agents propose, the gate disposes.
//!
//! Use it through the facade crate `capability`. An agent builds a [`Proposal`] for a mutating
//! tool; a human signs it with a [`SecretKey`] ([`Approval`], Ed25519, `capability approve`);
//! the [`WriteGate`], made for one audience and holding only the approvers' [`PublicKey`]s,
//! checks the signature, the binding to its audience, the tool's full type, the exact arguments
//! and the tool descriptor, the expiry and that the approval is used once, and returns an
//! [`Approved`], which [`Execute::execute`] takes by value. The approved value is rebuilt from
//! the signed canonical JSON: what executes is what was signed.
//! [`AuthorityGrant`]s delegate narrower authority to sub-agents, revocably.

//!
#![doc = include_str!("../../docs/write-path.md")]
#![forbid(unsafe_code)]

mod args;
mod clock;
mod error;
mod gate;
mod grant;
mod key;
mod ledger;
mod plan;
mod proposal;
mod session;

pub use clock::{CLOCK_TOLERANCE_SECS, Clock, SystemClock};
pub use error::GateError;
pub use gate::{Approved, ApprovedCall, CallTarget, Check, MAX_VALIDITY_SECS, Rejected, WriteGate};
pub use grant::{
    Attenuation, AuthorityGrant, GrantContext, GrantError, MemoryRevocations, PolicyDecision,
    RevocationStore,
};
pub use key::{PublicKey, SecretKey};
pub use ledger::{ApprovalLedger, Consumed, MemoryLedger, StoreError};
pub use plan::{GrantUse, GrantedCall, MAX_GRANT_CALLS, PlanGrant};
pub use proposal::{Approval, PROPOSAL_VERSION, Proposal, ProposalFile, args_digest};
pub use session::{AdvisorSession, Execute, Run, SessionError};
