//! What can be wrong with a tree, a proof, a note or a proof file, each said plainly.

use std::fmt;

/// Why a proof, a checkpoint or a proof file was refused (or could not be made).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlogError {
    /// A leaf index or tree size beyond the tree.
    OutOfRange(String),
    /// A proof has the wrong number of hashes for its index and sizes (cut or padded).
    ProofSize {
        /// Hashes in the proof.
        found: usize,
        /// Hashes a proof for these sizes has.
        expected: usize,
    },
    /// The inclusion proof does not lead from the leaf to the root: the leaf is not at that
    /// index of that tree (another record, an edited record, or an altered proof).
    NotIncluded {
        /// The leaf's index.
        index: u64,
        /// The tree's size.
        size: u64,
    },
    /// The consistency proof does not show that the tree of `new_size` leaves extends the one
    /// of `old_size` leaves: records among the first `old_size` were rewritten (or the proof
    /// was altered).
    NotConsistent {
        /// The older tree's size.
        old_size: u64,
        /// The newer tree's size.
        new_size: u64,
    },
    /// The newer tree is smaller than the older one: records were cut off.
    Shrunk {
        /// The older tree's size.
        old_size: u64,
        /// The newer tree's size.
        new_size: u64,
    },
    /// Two different roots signed for one tree size: the log forked (a rewrite).
    Fork {
        /// The size both checkpoints claim.
        size: u64,
    },
    /// A note, checkpoint or proof file that does not follow its format.
    Malformed(String),
    /// The note has no signature by the given key (its name and key id): signed by another key.
    WrongKey {
        /// The key name looked for.
        name: String,
        /// The given key's id, hex.
        key_id: String,
        /// The key ids of the signatures present (of any name), hex.
        found: Vec<String>,
    },
    /// A signature names the given key (name and key id) and does not verify: forged or altered.
    BadSignature {
        /// The key name.
        name: String,
    },
    /// The proof is for another record than the one given.
    OtherRecord {
        /// What the proof's record is (writer and seq when it can be read).
        proof_is_for: String,
    },
    /// Nothing to prove from the trail (no such record, an unusable writer id, a broken trail).
    Trail(String),
    /// Fewer valid cosignatures of the trusted witnesses than required.
    Quorum {
        /// Cosignatures required.
        needed: usize,
        /// The witnesses whose cosignature is valid.
        cosigned: Vec<String>,
        /// The witnesses without a valid cosignature, each with why.
        missing: Vec<String>,
    },
    /// A checkpoint signed by a key outside the span the rotations give it, or a rotation
    /// statement that does not follow the keys before it.
    Rotation(String),
}

impl fmt::Display for TlogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlogError::OutOfRange(why) => f.write_str(why),
            TlogError::ProofSize { found, expected } => write!(
                f,
                "the proof has {found} hashes where {expected} are expected: it was cut, padded \
                 or made for another index or size"
            ),
            TlogError::NotIncluded { index, size } => write!(
                f,
                "the inclusion proof does not lead to the signed root: the record is not the \
                 one at index {index} of the tree of {size} records (another or an edited \
                 record, or an altered proof)"
            ),
            TlogError::NotConsistent { old_size, new_size } => write!(
                f,
                "the tree of {new_size} records does not extend the tree of {old_size}: records \
                 among the first {old_size} were rewritten (or the proof was altered)"
            ),
            TlogError::Shrunk { old_size, new_size } => write!(
                f,
                "the newer tree has {new_size} records, fewer than the {old_size} of the older \
                 one: records were cut off"
            ),
            TlogError::Fork { size } => write!(
                f,
                "fork: two different roots are signed for the tree of {size} records (one of \
                 them is a rewrite)"
            ),
            TlogError::Malformed(why) => f.write_str(why),
            TlogError::WrongKey {
                name,
                key_id,
                found,
            } => write!(
                f,
                "wrong key: no signature of key {name} with id {key_id} (the given key); the \
                 note is signed by key ids [{}]",
                found.join(", ")
            ),
            TlogError::BadSignature { name } => write!(
                f,
                "forged signature: the signature of key {name} does not verify (the note was \
                 altered after it was signed, or the signature is not the key's)"
            ),
            TlogError::OtherRecord { proof_is_for } => write!(
                f,
                "the proof is for another record ({proof_is_for}), not for the one given"
            ),
            TlogError::Trail(why) => f.write_str(why),
            TlogError::Quorum {
                needed,
                cosigned,
                missing,
            } => write!(
                f,
                "witnesses: {} valid cosignature(s) where {needed} are required (cosigned: [{}]; \
                 missing: [{}])",
                cosigned.len(),
                cosigned.join(", "),
                missing.join(", ")
            ),
            TlogError::Rotation(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for TlogError {}

/// Why a witness refused a checkpoint, or could not keep its state.
#[derive(Debug, PartialEq, Eq)]
pub enum WitnessError {
    /// A request that does not follow the protocol (400).
    BadRequest(String),
    /// The checkpoint's origin is not a log this witness knows (404).
    UnknownLog(String),
    /// No valid signature of a key the witness trusts for the log (403).
    NotSigned(String),
    /// The old size is not the size of the checkpoint the witness holds (409).
    Conflict {
        /// The log.
        origin: String,
        /// The old size the request gave.
        old: u64,
        /// The size the witness holds (0: none yet).
        held: u64,
    },
    /// The checkpoint does not extend the one held (422): a fork, a rewrite, a bad proof.
    Inconsistent(String),
    /// The state file cannot be read, is not the witness's own, or cannot be written (500).
    State(String),
}

impl WitnessError {
    /// The HTTP status code `c2sp.org/tlog-witness` gives this refusal.
    pub fn status(&self) -> u16 {
        match self {
            WitnessError::BadRequest(_) => 400,
            WitnessError::UnknownLog(_) => 404,
            WitnessError::NotSigned(_) => 403,
            WitnessError::Conflict { .. } => 409,
            WitnessError::Inconsistent(_) => 422,
            WitnessError::State(_) => 500,
        }
    }
}

impl fmt::Display for WitnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WitnessError::BadRequest(why)
            | WitnessError::NotSigned(why)
            | WitnessError::Inconsistent(why)
            | WitnessError::State(why) => f.write_str(why),
            WitnessError::UnknownLog(origin) => {
                write!(
                    f,
                    "unknown log {origin:?}: this witness is not configured for it"
                )
            }
            WitnessError::Conflict { origin, old, held } => write!(
                f,
                "stale: the witness holds a checkpoint of {held} records of {origin}, not {old}: \
                 send the consistency proof from size {held}"
            ),
        }
    }
}

impl std::error::Error for WitnessError {}
