//! The gated write path of `capability`: agents propose, the gate disposes.
//!
//! Use it through the facade crate `capability`. An agent builds a [`Proposal`] for a mutating
//! tool; a human signs it ([`Approval`], Ed25519, `capability approve`); the [`WriteGate`],
//! holding only the approvers' public keys, checks the signature, the binding to the exact
//! arguments and tool descriptor, the expiry and that the approval is used once, and returns an
//! [`Approved`], which [`Execute::execute`] takes by value. [`AuthorityGrant`]s delegate
//! narrower authority to sub-agents, revocably.

#![forbid(unsafe_code)]

mod clock;
mod error;
mod gate;
mod grant;
mod proposal;

pub use clock::{CLOCK_TOLERANCE_SECS, Clock, SystemClock};
pub use ed25519_dalek::{SigningKey, VerifyingKey};
pub use error::GateError;
pub use gate::{AdvisorSession, Approved, Check, Execute, Rejected, Run, WriteGate};
pub use grant::{
    Attenuation, AuthorityGrant, GrantContext, GrantError, PolicyDecision, Revocations,
};
pub use proposal::{
    Approval, PROPOSAL_VERSION, Proposal, ProposalFile, generate_key, public_key_from_text,
    public_key_to_text, secret_key_from_text, secret_key_to_text,
};
