//! Proposals, and the signed approvals a human gives them.

use std::fmt;

use capability_core::Capability;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::{Clock, SystemClock};
use crate::error::GateError;
use crate::key::{PublicKey, SecretKey};

/// A request to run a mutating tool, built by an agent (an advisor included). Building one
/// runs nothing; only a [`WriteGate`](crate::WriteGate) turns it into an
/// [`Approved`](crate::Approved).
pub struct Proposal<T: Capability> {
    pub(crate) args: T,
    pub(crate) file: ProposalFile,
}

impl<T: Capability> Proposal<T> {
    /// Proposes running `T` with these arguments.
    pub fn new(
        args: T,
        proposer: impl Into<String>,
        rationale: impl Into<String>,
    ) -> Result<Proposal<T>, GateError>
    where
        T: Serialize,
    {
        let value = serde_json::to_value(&args).map_err(|e| GateError::Malformed {
            what: "the proposal's arguments".to_owned(),
            why: e.to_string(),
        })?;
        let manifest = T::manifest();
        Ok(Proposal {
            file: ProposalFile {
                version: PROPOSAL_VERSION,
                tool: manifest.name().to_owned(),
                provider: manifest.provider().map(str::to_owned),
                descriptor_hash: manifest.descriptor_hash().to_owned(),
                args_digest: digest(&value),
                args: value,
                proposer: proposer.into(),
                rationale: rationale.into(),
                created_at: SystemClock.now(),
            },
            args,
        })
    }

    /// The arguments.
    pub fn args(&self) -> &T {
        &self.args
    }

    /// What a human reviews and signs: the proposal as data.
    pub fn file(&self) -> &ProposalFile {
        &self.file
    }

    /// The proposal file as pretty JSON, for a human to review and sign with
    /// `capability approve`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.file).unwrap_or_default()
    }
}

impl<T: Capability> fmt::Debug for Proposal<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proposal")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// The version of proposal and approval files.
pub const PROPOSAL_VERSION: u32 = 1;

/// A proposal as data: what a human reviews, and what an approval is bound to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposalFile {
    /// [`PROPOSAL_VERSION`].
    pub version: u32,
    /// The tool.
    pub tool: String,
    /// Its provider.
    pub provider: Option<String>,
    /// The tool's descriptor hash when the proposal was made.
    pub descriptor_hash: String,
    /// SHA-256 of the arguments' canonical JSON.
    pub args_digest: String,
    /// The arguments.
    pub args: Value,
    /// Who proposed it.
    pub proposer: String,
    /// Why.
    pub rationale: String,
    /// When, in seconds since the Unix epoch.
    pub created_at: u64,
}

impl ProposalFile {
    /// Reads a proposal file, checking that its digest matches its arguments.
    pub fn from_json(text: &str) -> Result<ProposalFile, GateError> {
        let file: ProposalFile = serde_json::from_str(text).map_err(|e| GateError::Malformed {
            what: "the proposal file".to_owned(),
            why: e.to_string(),
        })?;
        if file.version != PROPOSAL_VERSION {
            return Err(GateError::Malformed {
                what: "the proposal file".to_owned(),
                why: format!(
                    "version {} is not supported (expected {PROPOSAL_VERSION})",
                    file.version
                ),
            });
        }
        if digest(&file.args) != file.args_digest {
            return Err(GateError::Malformed {
                what: "the proposal file".to_owned(),
                why: "`args_digest` does not match `args`: the arguments were edited".to_owned(),
            });
        }
        Ok(file)
    }
}

/// A human's signed approval of one proposal: bound to its arguments' digest, the tool's
/// descriptor hash, the approver, an expiry and a unique id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// Unique: an approval is used once.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The tool's descriptor hash.
    pub descriptor_hash: String,
    /// SHA-256 of the approved arguments' canonical JSON.
    pub args_digest: String,
    /// Who approved, as the gate knows them.
    pub approver: String,
    /// Valid until, in seconds since the Unix epoch.
    pub expires_at: u64,
    /// Ed25519 signature (hex) over [`Approval::signed_bytes`].
    pub signature: String,
}

impl Approval {
    /// Signs a proposal file: what `capability approve` does.
    pub fn sign(
        proposal: &ProposalFile,
        approver: impl Into<String>,
        key: &SecretKey,
        expires_at: u64,
    ) -> Result<Approval, GateError> {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).map_err(|e| GateError::Malformed {
            what: "the approval id".to_owned(),
            why: format!("no randomness available: {e}"),
        })?;
        let mut approval = Approval {
            id: capability_rules::hex::encode(&id),
            tool: proposal.tool.clone(),
            descriptor_hash: proposal.descriptor_hash.clone(),
            args_digest: proposal.args_digest.clone(),
            approver: approver.into(),
            expires_at,
            signature: String::new(),
        };
        approval.signature = key.sign_hex(&approval.signed_bytes());
        Ok(approval)
    }

    /// What the signature covers: a domain tag and the canonical JSON of every other field.
    pub fn signed_bytes(&self) -> Vec<u8> {
        let fields = serde_json::json!({
            "id": self.id,
            "tool": self.tool,
            "descriptor_hash": self.descriptor_hash,
            "args_digest": self.args_digest,
            "approver": self.approver,
            "expires_at": self.expires_at,
        });
        let mut bytes = b"capability approval v1\n".to_vec();
        bytes.extend_from_slice(capability_core::json::to_canonical_json(&fields).as_bytes());
        bytes
    }

    /// Whether the signature is this approver's.
    pub(crate) fn verify(&self, key: &PublicKey) -> bool {
        key.verify_hex(&self.signed_bytes(), &self.signature)
    }

    /// Reads an approval file.
    pub fn from_json(text: &str) -> Result<Approval, GateError> {
        serde_json::from_str(text).map_err(|e| GateError::Malformed {
            what: "the approval file".to_owned(),
            why: e.to_string(),
        })
    }

    /// The approval as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

pub(crate) fn digest(value: &Value) -> String {
    capability_rules::sha256_hex(capability_core::json::to_canonical_json(value).as_bytes())
}
