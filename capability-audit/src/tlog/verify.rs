//! Verifying inclusion and consistency proofs from hashes alone (RFC 9162 §2.1.3.2 and
//! §2.1.4.2, as transparency-dev/merkle's `proof` package does).
//!
//! These checks need no trail and no key: only the proof, the leaf (or the older root) and the
//! root it should lead to. What they prove is relative to that root: that the root is the one a
//! writer signed is the checkpoint's business ([`note`](super::note)).

use super::error::TlogError;
use super::hash::{Hash, node_hash};

/// Checks that `proof` shows the leaf with hash `leaf` at `index` of the tree of `size` leaves
/// whose root is `root`.
pub fn verify_inclusion(
    index: u64,
    size: u64,
    leaf: &Hash,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), TlogError> {
    if &root_from_inclusion(index, size, leaf, proof)? == root {
        Ok(())
    } else {
        Err(TlogError::NotIncluded { index, size })
    }
}

/// The root that `proof` leads to from the leaf with hash `leaf` at `index` of a tree of
/// `size` leaves.
pub fn root_from_inclusion(
    index: u64,
    size: u64,
    leaf: &Hash,
    proof: &[Hash],
) -> Result<Hash, TlogError> {
    if index >= size {
        return Err(TlogError::OutOfRange(format!(
            "leaf index {index} is beyond the tree of {size} leaves"
        )));
    }
    // The proof's first `inner` hashes are below the point where the leaf's path leaves the
    // right edge of the tree; the rest (`border`) are left siblings on that edge.
    let inner = (64 - (index ^ (size - 1)).leading_zeros()) as usize;
    let border = (index >> inner).count_ones() as usize;
    if proof.len() != inner + border {
        return Err(TlogError::ProofSize {
            found: proof.len(),
            expected: inner + border,
        });
    }
    let mut hash = *leaf;
    for (i, sibling) in proof[..inner].iter().enumerate() {
        hash = if (index >> i) & 1 == 0 {
            node_hash(&hash, sibling)
        } else {
            node_hash(sibling, &hash)
        };
    }
    for sibling in &proof[inner..] {
        hash = node_hash(sibling, &hash);
    }
    Ok(hash)
}

/// Checks that `proof` shows the tree of `new_size` leaves with root `new_root` extends the tree
/// of `old_size` leaves with root `old_root`: the same first `old_size` leaves, unchanged.
///
/// Equal sizes need equal roots (different ones are a [`TlogError::Fork`]) and an empty proof.
/// An empty older tree is refused, as transparency-dev/merkle does: every tree extends it, so
/// the check would prove nothing.
pub fn verify_consistency(
    old_size: u64,
    new_size: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> Result<(), TlogError> {
    let inconsistent = || TlogError::NotConsistent { old_size, new_size };
    if new_size < old_size {
        return Err(TlogError::Shrunk { old_size, new_size });
    }
    if old_size == 0 {
        return Err(TlogError::OutOfRange(
            "a consistency proof from the empty tree proves nothing: every tree extends it"
                .to_owned(),
        ));
    }
    if old_size == new_size {
        if !proof.is_empty() {
            return Err(TlogError::ProofSize {
                found: proof.len(),
                expected: 0,
            });
        }
        return if old_root == new_root {
            Ok(())
        } else {
            Err(TlogError::Fork { size: old_size })
        };
    }
    let Some((&first, rest)) = proof.split_first() else {
        return Err(inconsistent());
    };
    // When the older tree is a complete subtree of the newer, its root starts the path.
    let (seed, rest) = if old_size.is_power_of_two() {
        (*old_root, proof)
    } else {
        (first, rest)
    };
    let mut fn_ = old_size - 1;
    let mut sn = new_size - 1;
    while fn_ & 1 == 1 {
        fn_ >>= 1;
        sn >>= 1;
    }
    let (mut fr, mut sr) = (seed, seed);
    for c in rest {
        if sn == 0 {
            return Err(inconsistent());
        }
        if fn_ & 1 == 1 || fn_ == sn {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    if sn == 0 && &fr == old_root && &sr == new_root {
        Ok(())
    } else {
        Err(inconsistent())
    }
}
