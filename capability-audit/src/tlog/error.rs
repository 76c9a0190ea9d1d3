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
        }
    }
}

impl std::error::Error for TlogError {}
