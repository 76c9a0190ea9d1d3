//! A tree's growth since a size a witness holds: the [`Frontier`] at that size and the leaf
//! hashes since, from which the RFC 6962 consistency proof to any later size is computed
//! without the rest of the tree (a writer submitting its checkpoints to witnesses keeps one
//! per witness, never reading its trail back).
//!
//! In `SUBPROOF(m, D[n], b)` every node on the old side (leaves below `m`) is the hash of a run
//! of the old tree's complete subtrees, left to right and largest first, that is of a
//! frontier's; every node on the new side covers leaves from `m` on. So the proof needs the
//! frontier at `m` (O(log m) hashes) and the leaves `[m, n)`: 32 bytes a leaf, and O(n - m)
//! hashing.

use super::error::TlogError;
use super::frontier::Frontier;
use super::hash::{Hash, empty_root, node_hash, split};
use super::tree::Tree;

/// The frontier at [`base`](Self::base) and the leaf hashes appended since.
///
/// ```
/// use capability::audit::tlog::{Frontier, Tree, growth::Growth};
///
/// let mut tree = Tree::new();
/// let mut frontier = Frontier::new();
/// for i in 0..5u32 {
///     tree.push(&i.to_be_bytes());
///     frontier.push(&i.to_be_bytes());
/// }
/// let mut growth = Growth::new(frontier);
/// for i in 5..12u32 {
///     tree.push(&i.to_be_bytes());
///     growth.push_hash(tree.leaf(u64::from(i)).unwrap());
/// }
/// assert_eq!(growth.consistency_proof(12)?, tree.consistency_proof(5, 12)?);
/// growth.advance_to(9)?;
/// assert_eq!(growth.consistency_proof(12)?, tree.consistency_proof(9, 12)?);
/// # Ok::<(), capability::audit::tlog::TlogError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Growth {
    old: Frontier,
    leaves: Vec<Hash>,
}

impl Growth {
    /// The growth of a tree from `frontier`, no leaf appended yet.
    pub fn new(frontier: Frontier) -> Growth {
        Growth {
            old: frontier,
            leaves: Vec::new(),
        }
    }

    /// The growth from size `base` of `tree`, with its leaves from `base` to `end`; `None`
    /// when `tree` holds fewer than `end` leaves or `base > end`.
    pub fn from_tree(tree: &Tree, base: u64, end: u64) -> Option<Growth> {
        if base > end || end > tree.size() {
            return None;
        }
        let mut old = Frontier::new();
        for index in 0..base {
            old.push_hash(tree.leaf(index)?);
        }
        let leaves = (base..end).map(|i| tree.leaf(i)).collect::<Option<_>>()?;
        Some(Growth { old, leaves })
    }

    /// The size the proofs start from.
    pub fn base(&self) -> u64 {
        self.old.size()
    }

    /// The size of the tree with every leaf appended.
    pub fn end(&self) -> u64 {
        self.base() + self.leaves.len() as u64
    }

    /// The number of leaf hashes kept (32 bytes each).
    pub fn kept(&self) -> usize {
        self.leaves.len()
    }

    /// Appends a leaf whose hash is `leaf`.
    pub fn push_hash(&mut self, leaf: Hash) {
        self.leaves.push(leaf);
    }

    /// Appends leaves' hashes.
    pub fn extend(&mut self, leaves: impl IntoIterator<Item = Hash>) {
        self.leaves.extend(leaves);
    }

    /// Moves the base to `size` (a witness now holds it): the leaves before it go into the
    /// frontier and are no longer kept.
    pub fn advance_to(&mut self, size: u64) -> Result<(), TlogError> {
        self.check(size)?;
        let count = (size - self.base()) as usize;
        for leaf in self.leaves.drain(..count) {
            self.old.push_hash(leaf);
        }
        Ok(())
    }

    /// The RFC 6962 consistency proof from [`base`](Self::base) to `size`.
    pub fn consistency_proof(&self, size: u64) -> Result<Vec<Hash>, TlogError> {
        self.check(size)?;
        let mut proof = Vec::with_capacity(64);
        let m = self.base();
        if m > 0 && m < size {
            self.subproof(m, 0, size, true, &mut proof)?;
        }
        Ok(proof)
    }

    fn check(&self, size: u64) -> Result<(), TlogError> {
        if size < self.base() {
            return Err(TlogError::Shrunk {
                old_size: self.base(),
                new_size: size,
            });
        }
        if size > self.end() {
            return Err(TlogError::OutOfRange(format!(
                "a tree of {size} leaves was asked for, and {} are known",
                self.end()
            )));
        }
        Ok(())
    }

    /// `SUBPROOF(m, D[start:end], whole)` as [`Tree`]'s, appended to `proof`.
    fn subproof(
        &self,
        m: u64,
        start: u64,
        end: u64,
        whole: bool,
        proof: &mut Vec<Hash>,
    ) -> Result<(), TlogError> {
        let n = end - start;
        if m == n {
            if !whole {
                proof.push(self.range(start, end)?);
            }
            return Ok(());
        }
        let k = split(n);
        if m <= k {
            self.subproof(m, start, start + k, whole, proof)?;
            proof.push(self.range(start + k, end)?);
        } else {
            self.subproof(m - k, start + k, end, false, proof)?;
            proof.push(self.range(start, start + k)?);
        }
        Ok(())
    }

    /// `MTH(D[start:end])`: from the frontier's subtrees when the range is below the base
    /// (then it is a run of them), from the leaves kept when it is above.
    fn range(&self, start: u64, end: u64) -> Result<Hash, TlogError> {
        let base = self.base();
        if end <= base {
            return self.old_range(start, end);
        }
        if start < base {
            return Err(TlogError::OutOfRange(format!(
                "the range [{start}, {end}) spans the base {base}"
            )));
        }
        Ok(mth(
            &self.leaves[(start - base) as usize..(end - base) as usize]
        ))
    }

    /// `MTH(D[start:end])` for `end <= base`: the run of the frontier's subtrees that tiles
    /// the range exactly (folded from the right, as a root is), or an error when none does.
    fn old_range(&self, start: u64, end: u64) -> Result<Hash, TlogError> {
        let size = self.old.size();
        // The frontier's subtrees, largest first: the bits of its size, high to low.
        let widths = (0..64u32)
            .rev()
            .filter(|b| size >> b & 1 == 1)
            .map(|b| 1u64 << b);
        let (mut at, mut run) = (0u64, Vec::new());
        for (width, hash) in widths.zip(self.old.hashes()) {
            if at == start || !run.is_empty() {
                run.push(*hash);
            }
            at += width;
            if !run.is_empty() && at >= end {
                break;
            }
        }
        let mut hashes = run.into_iter().rev();
        match hashes.next() {
            Some(last) if at == end => {
                Ok(hashes.fold(last, |right, left| node_hash(&left, &right)))
            }
            _ => Err(TlogError::OutOfRange(format!(
                "the frontier at {size} does not tile [{start}, {end})"
            ))),
        }
    }
}

/// `MTH` of the leaves `leaves` (RFC 6962).
fn mth(leaves: &[Hash]) -> Hash {
    match leaves {
        [] => empty_root(),
        [leaf] => *leaf,
        _ => {
            let k = split(leaves.len() as u64) as usize;
            node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(n: u64) -> Tree {
        let mut tree = Tree::new();
        for i in 0..n {
            tree.push(&i.to_be_bytes());
        }
        tree
    }

    #[test]
    fn the_proof_from_the_frontier_is_the_whole_trees_for_every_pair_up_to_300() {
        let tree = tree(300);
        for m in 0..=300u64 {
            let mut growth = Growth::from_tree(&tree, m, m).unwrap();
            for n in m..=300 {
                assert_eq!(
                    growth.consistency_proof(n).unwrap(),
                    tree.consistency_proof(m, n).unwrap(),
                    "m {m}, n {n}"
                );
                if n < 300 {
                    growth.push_hash(tree.leaf(n).unwrap());
                }
            }
        }
    }

    #[test]
    fn random_larger_pairs_and_advancing_agree_with_the_whole_tree() {
        let tree = tree(5_000);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for _ in 0..200 {
            let m = next(5_000);
            let n = m + next(5_001 - m);
            let growth = Growth::from_tree(&tree, m, n).unwrap();
            let proof = growth.consistency_proof(n).unwrap();
            assert_eq!(proof, tree.consistency_proof(m, n).unwrap(), "m {m}, n {n}");
            let (old, new) = (tree.root(m).unwrap(), tree.root(n).unwrap());
            super::super::verify::verify_consistency(m, n, &old, &new, &proof).unwrap();
        }
        // A writer's: advanced checkpoint after checkpoint, as a witness cosigns them.
        let mut growth = Growth::new(Frontier::new());
        let mut at = 0u64;
        while at < 5_000 {
            let to = (at + 1 + next(700)).min(5_000);
            growth.extend((at..to).map(|i| tree.leaf(i).unwrap()));
            assert_eq!(
                growth.consistency_proof(to).unwrap(),
                tree.consistency_proof(at, to).unwrap()
            );
            growth.advance_to(to).unwrap();
            assert_eq!(growth.kept(), 0);
            at = to;
        }
    }

    #[test]
    fn sizes_outside_what_is_kept_are_refused() {
        let tree = tree(20);
        let growth = Growth::from_tree(&tree, 7, 12).unwrap();
        assert!(matches!(
            growth.consistency_proof(6),
            Err(TlogError::Shrunk { .. })
        ));
        assert!(matches!(
            growth.consistency_proof(13),
            Err(TlogError::OutOfRange(_))
        ));
        assert!(Growth::from_tree(&tree, 7, 21).is_none());
        assert!(Growth::from_tree(&tree, 8, 7).is_none());
    }
}
