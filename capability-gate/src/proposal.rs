//! Proposals, and the signed approvals a human gives them.

use std::fmt;

use capability_core::Capability;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::{Clock, SystemClock};
use crate::error::GateError;
use crate::key::{PublicKey, SecretKey};

/// A request to run a mutating tool, built by an agent (an advisor included). Building one
/// runs nothing; only a [`WriteGate`](crate::WriteGate) turns it into an
/// [`Approved`](crate::Approved).
///
/// It keeps the arguments as data only (the [`ProposalFile`]): the value given to
/// [`Proposal::new`] is dropped, and what executes is rebuilt by the gate from exactly the
/// signed canonical JSON. Changing that value after the proposal is made (through a `RefCell`, a
/// shared handle) changes nothing that runs.
pub struct Proposal<T: Capability> {
    pub(crate) file: ProposalFile,
    tool: PhantomData<fn() -> T>,
}

impl<T: Capability> Proposal<T> {
    /// Proposes running `T` with these arguments.
    ///
    /// Refused ([`GateError::Unsignable`], naming the field) when the arguments do not survive a
    /// round trip through JSON: a non-finite float (written as `null`), `-0.0` (canonical JSON
    /// writes `0`), a key written twice in one object (a `#[serde(flatten)]` map shadowing a
    /// field), or any value that deserializes to something else. A `#[serde(skip)]` field is
    /// not signed: the executed value has its default.
    pub fn new(
        args: T,
        proposer: impl Into<String>,
        rationale: impl Into<String>,
    ) -> Result<Proposal<T>, GateError>
    where
        T: Serialize + DeserializeOwned,
    {
        let value = crate::args::signable(&args)?;
        drop(args);
        let manifest = T::manifest();
        Ok(Proposal {
            file: ProposalFile {
                version: PROPOSAL_VERSION,
                tool: manifest.name().to_owned(),
                tool_type: std::any::type_name::<T>().to_owned(),
                audience: None,
                provider: manifest.provider().map(str::to_owned),
                descriptor_hash: manifest.descriptor_hash().to_owned(),
                args_digest: digest(&value),
                args: value,
                proposer: proposer.into(),
                rationale: rationale.into(),
                created_at: SystemClock.now(),
                id: None,
                expires_at: None,
            },
            tool: PhantomData,
        })
    }

    /// Names the audience the proposal is meant for (the [`WriteGate`](crate::WriteGate) of one
    /// environment, e.g. `prod-eu`): `capability approve` refuses to sign it for another, and
    /// any other gate refuses it.
    pub fn for_audience(mut self, audience: impl Into<String>) -> Self {
        self.file.audience = Some(audience.into());
        self
    }

    /// What a human reviews and signs: the proposal as data, arguments included.
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
pub const PROPOSAL_VERSION: u32 = 2;

/// A proposal as data: what a human reviews, and what an approval is bound to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposalFile {
    /// [`PROPOSAL_VERSION`].
    pub version: u32,
    /// The tool.
    pub tool: String,
    /// The tool's full Rust type (`std::any::type_name`: module path and generic arguments, so
    /// `DropDatabase<Staging>` is not `DropDatabase<Prod>`, nor `staging::Purge` `prod::Purge`).
    /// Compared for equality only, by a gate built from the same program: the text is not
    /// stable across compiler versions, so an approval made with one build may be refused by
    /// another (fail closed).
    pub tool_type: String,
    /// The audience the proposer meant it for, if they said (a gate refuses any other).
    pub audience: Option<String>,
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
    /// The proposal's id, when whoever keeps it names it (a gateway does: the retried call
    /// finds its approval by it). Not written when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Until when it waits for an approval, in seconds since the Unix epoch, if it says:
    /// `capability approve` refuses to sign it afterwards. Not written when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

impl ProposalFile {
    /// Reads a proposal file, checking that its digest matches its arguments. A key written
    /// twice in any object is refused, with its path.
    pub fn from_json(text: &str) -> Result<ProposalFile, GateError> {
        let malformed = |e: serde_json::Error| GateError::Malformed {
            what: "the proposal file".to_owned(),
            why: e.to_string(),
        };
        capability_core::json::no_duplicate_keys(text).map_err(malformed)?;
        let file: ProposalFile = serde_json::from_str(text).map_err(malformed)?;
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

/// A human's signed approval of one proposal: bound to its arguments' digest, the tool (name,
/// full type and descriptor hash), the audience (the gate it is for), the proposer (who alone
/// may use it), the approver, when it was issued and when it expires, and a unique id.
///
/// An approval file from before approvals bound their proposer reads (its `proposer` is
/// empty), and every gate refuses it ([`GateError::NoProposer`]) instead of letting whoever
/// holds it run the call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// Unique: an approval is used once.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The tool's full Rust type (see [`ProposalFile::tool_type`]).
    pub tool_type: String,
    /// The gate it is for: a [`WriteGate`](crate::WriteGate) for another audience refuses it.
    pub audience: String,
    /// The tool's descriptor hash.
    pub descriptor_hash: String,
    /// SHA-256 of the approved arguments' canonical JSON.
    pub args_digest: String,
    /// Who proposed the call, as the proposal names them (a gateway names the caller:
    /// `token:<hash>`, `role:<role>`): a gate runs the approval only for this caller. Empty in
    /// an approval signed before approvals bound it, which every gate refuses.
    #[serde(default)]
    pub proposer: String,
    /// Who approved, as the gate knows them.
    pub approver: String,
    /// Signed at, in seconds since the Unix epoch.
    pub issued_at: u64,
    /// Valid until, in seconds since the Unix epoch.
    pub expires_at: u64,
    /// Ed25519 signature (hex) over [`Approval::signed_bytes`].
    pub signature: String,
}

impl Approval {
    /// Signs a proposal file for one audience and the proposal's proposer, valid from
    /// `issued_at` to `expires_at`: what `capability approve` does. Refused when the proposal
    /// names another audience, or no proposer.
    pub fn sign(
        proposal: &ProposalFile,
        approver: impl Into<String>,
        audience: impl Into<String>,
        key: &SecretKey,
        issued_at: u64,
        expires_at: u64,
    ) -> Result<Approval, GateError> {
        let audience = audience.into();
        if let Some(meant) = proposal
            .audience
            .as_ref()
            .filter(|&meant| *meant != audience)
        {
            return Err(GateError::OtherAudience {
                audience: meant.clone(),
                gate: audience,
            });
        }
        if proposal.proposer.trim().is_empty() {
            return Err(GateError::Malformed {
                what: "the proposal file".to_owned(),
                why: "it names no proposer, so nothing could tell who may use its approval"
                    .to_owned(),
            });
        }
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).map_err(|e| GateError::Malformed {
            what: "the approval id".to_owned(),
            why: format!("no randomness available: {e}"),
        })?;
        let mut approval = Approval {
            id: capability_rules::hex::encode(&id),
            tool: proposal.tool.clone(),
            tool_type: proposal.tool_type.clone(),
            audience,
            descriptor_hash: proposal.descriptor_hash.clone(),
            args_digest: proposal.args_digest.clone(),
            proposer: proposal.proposer.clone(),
            approver: approver.into(),
            issued_at,
            expires_at,
            signature: String::new(),
        };
        approval.signature = key.sign_hex(&approval.signed_bytes());
        Ok(approval)
    }

    /// What the signature covers: a domain tag (`capability approval v3`: v2 approvals bound
    /// no proposer) and the canonical JSON of every other field.
    pub fn signed_bytes(&self) -> Vec<u8> {
        let fields = serde_json::json!({
            "id": self.id,
            "tool": self.tool,
            "tool_type": self.tool_type,
            "audience": self.audience,
            "descriptor_hash": self.descriptor_hash,
            "args_digest": self.args_digest,
            "proposer": self.proposer,
            "approver": self.approver,
            "issued_at": self.issued_at,
            "expires_at": self.expires_at,
        });
        let mut bytes = b"capability approval v3\n".to_vec();
        bytes.extend_from_slice(capability_core::json::to_canonical_json(&fields).as_bytes());
        bytes
    }

    /// Whether the signature is this approver's.
    pub(crate) fn verify(&self, key: &PublicKey) -> bool {
        key.verify_hex(&self.signed_bytes(), &self.signature)
    }

    /// Reads an approval file. A key written twice in any object is refused, with its path.
    pub fn from_json(text: &str) -> Result<Approval, GateError> {
        let malformed = |e: serde_json::Error| GateError::Malformed {
            what: "the approval file".to_owned(),
            why: e.to_string(),
        };
        capability_core::json::no_duplicate_keys(text).map_err(malformed)?;
        serde_json::from_str(text).map_err(malformed)
    }

    /// The approval as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// SHA-256 (hex) of a value's canonical JSON (RFC 8785): the `args_digest` an approval binds.
///
/// ```
/// use serde_json::json;
/// let a = capability::gate::args_digest(&json!({"b": 1, "a": [true, null]}));
/// let b = capability::gate::args_digest(&json!({"a": [true, null], "b": 1}));
/// assert_eq!(a, b, "key order does not count");
/// assert_ne!(a, capability::gate::args_digest(&json!({"a": [true, null], "b": 2})));
/// ```
pub fn args_digest(value: &Value) -> String {
    digest(value)
}

pub(crate) fn digest(value: &Value) -> String {
    capability_rules::sha256_hex(capability_core::json::to_canonical_json(value).as_bytes())
}
