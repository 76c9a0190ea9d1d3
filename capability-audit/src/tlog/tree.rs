//! An RFC 6962 Merkle tree over a writer's records, kept whole in memory so that any proof, for
//! any earlier size too, takes a few dozen hashes.
//!
//! Every complete subtree's hash is stored (level by level: the leaves, then their parents...),
//! about 64 bytes a record. A subtree on the right edge of a tree whose size is not a power of
//! two is hashed when needed.

use super::error::TlogError;
use super::hash::{Hash, empty_root, leaf_hash, node_hash, split};

/// A Merkle tree (RFC 6962 §2.1), leaves appended one by one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    /// `levels[k][i]`: the hash of the complete subtree of `2^k` leaves starting at leaf
    /// `i * 2^k`.
    levels: Vec<Vec<Hash>>,
}

impl Tree {
    /// An empty tree.
    pub fn new() -> Tree {
        Tree::default()
    }

    /// A tree over these leaves' data, in order.
    pub fn from_leaves<'a>(leaves: impl IntoIterator<Item = &'a [u8]>) -> Tree {
        let mut tree = Tree::new();
        for leaf in leaves {
            tree.push(leaf);
        }
        tree
    }

    /// Appends a leaf holding `data`.
    pub fn push(&mut self, data: &[u8]) {
        self.push_hash(leaf_hash(data));
    }

    /// Appends a leaf whose hash (`leaf_hash` of its data) is `hash`.
    pub fn push_hash(&mut self, hash: Hash) {
        let mut hash = hash;
        let mut level = 0;
        loop {
            if self.levels.len() == level {
                self.levels.push(Vec::new());
            }
            let nodes = &mut self.levels[level];
            nodes.push(hash);
            if !nodes.len().is_multiple_of(2) {
                return;
            }
            hash = node_hash(&nodes[nodes.len() - 2], &nodes[nodes.len() - 1]);
            level += 1;
        }
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.levels.first().map_or(0, |leaves| leaves.len() as u64)
    }

    /// The hash of leaf `index`.
    pub fn leaf(&self, index: u64) -> Option<Hash> {
        self.levels
            .first()?
            .get(usize::try_from(index).ok()?)
            .copied()
    }

    /// The root of the tree of the first `size` leaves (this tree as it was at that size).
    pub fn root(&self, size: u64) -> Result<Hash, TlogError> {
        self.check_size(size)?;
        Ok(self.range(0, size))
    }

    /// The inclusion proof (RFC 6962 §2.1.1, `PATH`) of leaf `index` in the tree of the first
    /// `size` leaves: from the leaf's sibling up to a child of the root.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, TlogError> {
        self.check_size(size)?;
        if index >= size {
            return Err(TlogError::OutOfRange(format!(
                "leaf index {index} is beyond the tree of {size} leaves"
            )));
        }
        let mut proof = Vec::with_capacity(64);
        self.path(index, 0, size, &mut proof);
        Ok(proof)
    }

    /// The consistency proof (RFC 6962 §2.1.2, `PROOF`) that the tree of the first `new_size`
    /// leaves extends the tree of the first `old_size` (empty when the sizes are equal).
    pub fn consistency_proof(&self, old_size: u64, new_size: u64) -> Result<Vec<Hash>, TlogError> {
        self.check_size(new_size)?;
        if old_size > new_size {
            return Err(TlogError::Shrunk { old_size, new_size });
        }
        let mut proof = Vec::with_capacity(64);
        if old_size > 0 && old_size < new_size {
            self.subproof(old_size, 0, new_size, true, &mut proof);
        }
        Ok(proof)
    }

    fn check_size(&self, size: u64) -> Result<(), TlogError> {
        if size > self.size() {
            return Err(TlogError::OutOfRange(format!(
                "a tree of {size} leaves was asked for, and this one has {}",
                self.size()
            )));
        }
        Ok(())
    }

    /// `MTH(D[start:end])`, for `end <= self.size()`.
    fn range(&self, start: u64, end: u64) -> Hash {
        let n = end - start;
        if n == 0 {
            return empty_root();
        }
        if n.is_power_of_two() && start.is_multiple_of(n) {
            let level = n.trailing_zeros() as usize;
            // In range: a complete, aligned subtree within the tree is stored.
            return self.levels[level][(start >> level) as usize];
        }
        let k = split(n);
        node_hash(&self.range(start, start + k), &self.range(start + k, end))
    }

    /// `PATH(m, D[start:end])`, appended to `proof`.
    fn path(&self, m: u64, start: u64, end: u64, proof: &mut Vec<Hash>) {
        let n = end - start;
        if n <= 1 {
            return;
        }
        let k = split(n);
        if m < k {
            self.path(m, start, start + k, proof);
            proof.push(self.range(start + k, end));
        } else {
            self.path(m - k, start + k, end, proof);
            proof.push(self.range(start, start + k));
        }
    }

    /// `SUBPROOF(m, D[start:end], b)`, appended to `proof`.
    fn subproof(&self, m: u64, start: u64, end: u64, whole: bool, proof: &mut Vec<Hash>) {
        let n = end - start;
        if m == n {
            if !whole {
                proof.push(self.range(start, end));
            }
            return;
        }
        let k = split(n);
        if m <= k {
            self.subproof(m, start, start + k, whole, proof);
            proof.push(self.range(start + k, end));
        } else {
            self.subproof(m - k, start + k, end, false, proof);
            proof.push(self.range(start, start + k));
        }
    }
}
