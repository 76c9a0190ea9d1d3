//! Re-pins: an approver's signed acceptance of a changed descriptor, bound to the pin it
//! replaces and to the exact descriptor reviewed (its hash, its parts, its flags).
//!
//! The lockfile keeps the first pin and adds the re-pin beside it. A listing takes the re-pin
//! only when the server serves exactly the reviewed descriptor and the signature is that of an
//! approver the policy names; a server that changed again after the review stays hidden. No
//! cryptography is done here: whoever loads the lockfile checks the signatures with
//! [`Lockfile::check_repins`](super::Lockfile::check_repins) (the gateway and the command line
//! do, with the Ed25519 keys of the policy's `[approvals] approvers`), so this crate compiles no
//! crypto. A re-pin whose signature was not checked counts as refused.

use std::fmt;

use capability_core::manifest::HintKind;
use serde::Deserialize;

use super::parts::PartHashes;

/// What is signed first in every re-pin message, so that a re-pin's signature can never be
/// read as an approval, a grant or an audit checkpoint signed by the same key.
pub const REPIN_DOMAIN: &str = "capability re-pin v1";

/// A signed re-pin of one tool: the descriptor an approver reviewed and took, in place of the
/// pin beside it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repin {
    pub(super) hash: String,
    pub(super) parts: PartHashes,
    pub(super) read_only: bool,
    pub(super) destructive: bool,
    pub(super) idempotent: bool,
    pub(super) open_world: bool,
    pub(super) descriptor: String,
    pub(super) approver: String,
    pub(super) key: String,
    pub(super) signature: String,
    /// Whether the signature was checked, and what was found: never read from the file.
    #[serde(skip)]
    pub(super) check: RepinCheck,
}

/// What [`Lockfile::check_repins`](super::Lockfile::check_repins) found of a re-pin.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum RepinCheck {
    /// Not checked: no approvers' keys were given. It is refused.
    #[default]
    Unchecked,
    /// The signature is that of the approver the policy names with this key.
    Verified,
    /// Refused: why.
    Refused(String),
}

impl Repin {
    /// The descriptor hash the approver took.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The approver's name, as the policy names it.
    pub fn approver(&self) -> &str {
        &self.approver
    }

    /// The approver's public key, as 64 hex digits.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The approver's Ed25519 signature of [`Repin::message`], as 128 hex digits.
    pub fn signature(&self) -> &str {
        &self.signature
    }

    /// What checking its signature found.
    pub fn check(&self) -> &RepinCheck {
        &self.check
    }

    /// The recorded value of one effective flag of the re-pinned descriptor.
    pub fn flag(&self, kind: HintKind) -> bool {
        match kind {
            HintKind::ReadOnly => self.read_only,
            HintKind::Destructive => self.destructive,
            HintKind::Idempotent => self.idempotent,
            HintKind::OpenWorld => self.open_world,
        }
    }

    /// The bytes the approver signed: the domain, the server and tool, the pin replaced (its
    /// hash), and the descriptor taken (its hash, its part hashes, its flags).
    pub fn message(&self, server: &str, tool: &str, from: &str) -> Vec<u8> {
        let p = &self.parts;
        format!(
            "{REPIN_DOMAIN}\nserver: {server}\ntool: {tool}\nfrom: {from}\nhash: {}\n\
             parts: {} {} {} {}\nflags: read_only={} destructive={} idempotent={} \
             open_world={}\n",
            self.hash,
            p.title,
            p.description,
            p.schema,
            p.annotations,
            self.read_only,
            self.destructive,
            self.idempotent,
            self.open_world
        )
        .into_bytes()
    }
}

impl fmt::Display for RepinCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RepinCheck::Unchecked => f.write_str(
                "its signature was not checked (no approvers' keys: name them in the policy's \
                 `[approvals] approvers`)",
            ),
            RepinCheck::Verified => f.write_str("signed by an approver of the policy"),
            RepinCheck::Refused(why) => f.write_str(why),
        }
    }
}
