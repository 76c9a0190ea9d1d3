//! The gated write path of `capability`: agents propose, the gate disposes.
//!
//! Use it through the facade crate `capability`. An agent builds a [`Proposal`] for a mutating
//! tool; a human signs it with a [`SecretKey`] ([`Approval`], Ed25519, `capability approve`);
//! the [`WriteGate`], holding only the approvers' [`PublicKey`]s, checks the signature, the
//! binding to the exact arguments and tool descriptor, the expiry and that the approval is used
//! once, and returns an [`Approved`], which [`Execute::execute`] takes by value.
//! [`AuthorityGrant`]s delegate narrower authority to sub-agents, revocably.

#![forbid(unsafe_code)]

mod clock;
mod error;
mod gate;
mod grant;
mod key;
mod proposal;
mod session;

pub use clock::{CLOCK_TOLERANCE_SECS, Clock, SystemClock};
pub use error::GateError;
pub use gate::{Approved, Check, Rejected, WriteGate};
pub use grant::{
    Attenuation, AuthorityGrant, GrantContext, GrantError, PolicyDecision, Revocations,
};
pub use key::{PublicKey, SecretKey};
pub use proposal::{Approval, PROPOSAL_VERSION, Proposal, ProposalFile};
pub use session::{AdvisorSession, Execute, Run};
