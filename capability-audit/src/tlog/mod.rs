//! Evidence anyone can check: a writer's records as an RFC 6962 Merkle tree, checkpoints as
//! C2SP signed notes, and the proofs between them, in the formats transparency logs use
//! (`c2sp.org/tlog-checkpoint`, `c2sp.org/tlog-proof`), so that tools nobody here wrote can
//! check them.
//!
//! - [`hash`]: leaf and node hashes; [`tree`]: the tree, its roots and proofs at any size;
//!   [`verify`]: checking proofs from hashes alone.
//! - [`note`]: checkpoints as signed notes (Ed25519, the key files of `capability keygen`);
//!   [`proof`]: the proof file; [`trail`]: trees, proofs and consistency from a trail.
//! - [`cosignature`]: witnesses' cosignatures (`c2sp.org/tlog-cosignature`) and the quorum a
//!   verifier requires; [`witness`]: a witness that cosigns only checkpoints extending the last
//!   one it cosigned ([`witness_state`]: its state file); [`rotation`]: a log key handing over
//!   to the next at a tree size.
//! - [`frontier`]: the right edge of a tree, which a writer keeps as it writes; [`stored`]: the
//!   signed checkpoints a writer stores beside its records, resumed and checked; [`receipt`]:
//!   what a call's result carries so that its proof can be fetched later; [`gaps`]: missing
//!   checkpoints (a writer signs one at least every interval, idle or not) as findings.
//! - [`witnessed`]: each writer's latest checkpoint and its witnesses' cosignatures;
//!   [`keys`]: a trail checked under rotated keys; [`writers`]: a store's writers' registrations
//!   chained, so a writer deleted with its registration is a finding.
//!
//! ```
//! use capability::audit::tlog::{Tree, leaf_hash, verify_consistency, verify_inclusion};
//!
//! let mut tree = Tree::new();
//! for line in ["first record", "second record", "third record"] {
//!     tree.push(line.as_bytes());
//! }
//! let root = tree.root(3)?;
//! let proof = tree.inclusion_proof(1, 3)?;
//! verify_inclusion(1, 3, &leaf_hash(b"second record"), &proof, &root)?;
//! assert!(verify_inclusion(1, 3, &leaf_hash(b"edited record"), &proof, &root).is_err());
//! // The tree of 3 keeps the tree of 2 unchanged.
//! let consistency = tree.consistency_proof(2, 3)?;
//! verify_consistency(2, 3, &tree.root(2)?, &root, &consistency)?;
//! # Ok::<(), capability::audit::tlog::TlogError>(())
//! ```
//!
//! # What each check proves, and what it cannot
//!
//! - **An inclusion proof** with a checkpoint verified against the writer's public key proves
//!   that the key's holder signed a tree in which this exact record (byte for byte) is the
//!   record at that `seq`. The holder of the record and the proof needs neither the trail nor
//!   anyone's cooperation to show it.
//! - **A consistency proof** between two checkpoints proves that the newer tree keeps every
//!   record of the older one unchanged, in order: nothing under the older checkpoint was cut or
//!   rewritten. Two checkpoints of one size with different roots (a fork), or a newer tree that
//!   does not extend an older one, are proof that the writer rewrote its records, signed by its
//!   own key.
//! - **What none of them can prove alone:** that the writer signed no *other* tree. The key
//!   sits on the writer's host; whoever controls that host can rewrite every record, compute
//!   the tree again and sign it. Only checkpoints kept elsewhere (by the party a proof was
//!   given to, an auditor, a witness that co-signs only trees consistent with what it saw)
//!   turn such a rewrite into evidence. A proof also says nothing of calls never recorded.

pub mod cosignature;
pub mod encoding;
pub mod error;
pub mod frontier;
pub mod gaps;
pub mod growth;
pub mod hash;
pub mod keys;
pub mod note;
pub mod proof;
pub mod receipt;
pub mod rotation;
pub mod store_keys;
pub mod stored;
pub mod trail;
pub mod tree;
pub mod verify;
pub mod witness;
pub mod witness_state;
pub mod witnessed;
pub mod writers;

pub use cosignature::{Cosigned, Cosigner, WitnessQuorum, cosigner_key_id, cosigner_vkey};
pub use error::{TlogError, WitnessError};
pub use frontier::Frontier;
pub use gaps::checkpoint_gaps;
pub use growth::Growth;
pub use hash::{Hash, empty_root, leaf_hash, node_hash};
pub use note::{SignedCheckpoint, TreeHead, key_id, verifier_key};
pub use proof::{PROOF_HEADER, TlogProof};
pub use receipt::{RECEIPT_META_KEY, Receipt, wants_receipt};
pub use rotation::{KeyRotation, LogKeys};
pub use stored::{
    WriterTree, checkpoint_stopped, checkpoint_time, prove_jsonl_checkpointed, prove_jsonl_stored,
    prove_stored, resume, sign_frontier, verify_jsonl_with_trees, verify_trees,
};
pub use trail::{
    Extension, ProvenRecord, check_consistency, check_consistency_jsonl, check_proof,
    check_proof_witnessed, origin, parse_record_ref, prove, prove_jsonl, read_checkpoint,
    writer_tree, writer_tree_jsonl,
};
pub use tree::Tree;
pub use verify::{root_from_inclusion, verify_consistency, verify_inclusion};
pub use witness::{AddCheckpoint, LogKey, Witness};
