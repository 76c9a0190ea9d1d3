//! The right edge of a writer's tree, kept as records are written: O(log n) hashes, O(1)
//! amortised hashing per record.
//!
//! A tree of `n` leaves is, left to right, one complete subtree per bit set in `n` (the largest
//! first): its *compact range* `[0, n)`. Appending a leaf merges the subtrees of equal size at
//! the right end (as a binary counter carries), and the RFC 6962 root is the fold of the
//! subtrees from the right. So a writer keeps its tree at a few hundred bytes, whatever its
//! size, and signs its root at every checkpoint without reading a record back. Proofs need the
//! whole tree ([`Tree`](super::tree::Tree)): they are made by whoever reads the trail.

use super::hash::{Hash, empty_root, leaf_hash, node_hash};

/// The compact range of a tree's leaves `[0, size)` (see the module docs).
///
/// ```
/// use capability::audit::tlog::{Frontier, Tree};
///
/// let (mut frontier, mut tree) = (Frontier::new(), Tree::new());
/// for line in ["a", "b", "c", "d", "e"] {
///     frontier.push(line.as_bytes());
///     tree.push(line.as_bytes());
///     assert_eq!(frontier.root(), tree.root(tree.size())?);
/// }
/// assert_eq!(frontier.hashes().len(), 2, "5 = 4 + 1: two complete subtrees");
/// # Ok::<(), capability::audit::tlog::TlogError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frontier {
    size: u64,
    /// The complete subtrees, left (largest) to right.
    hashes: Vec<Hash>,
}

impl Frontier {
    /// The empty tree's.
    pub fn new() -> Frontier {
        Frontier::default()
    }

    /// Rebuilds a frontier from its parts; `None` when `hashes` does not hold one hash per bit
    /// set in `size`.
    pub fn from_parts(size: u64, hashes: Vec<Hash>) -> Option<Frontier> {
        (hashes.len() == size.count_ones() as usize).then_some(Frontier { size, hashes })
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The complete subtrees' hashes, left (largest) to right.
    pub fn hashes(&self) -> &[Hash] {
        &self.hashes
    }

    /// Appends a leaf holding `data`; returns its leaf hash.
    pub fn push(&mut self, data: &[u8]) -> Hash {
        let leaf = leaf_hash(data);
        self.push_hash(leaf);
        leaf
    }

    /// Appends a leaf whose hash is `leaf`.
    pub fn push_hash(&mut self, leaf: Hash) {
        let mut hash = leaf;
        // One merge per trailing one bit of the size: equal subtrees meet.
        let mut carry = self.size;
        while carry & 1 == 1 {
            // A size with this bit set holds a subtree for it (see `from_parts`).
            let Some(left) = self.hashes.pop() else { break };
            hash = node_hash(&left, &hash);
            carry >>= 1;
        }
        self.hashes.push(hash);
        self.size += 1;
    }

    /// The RFC 6962 root of the tree (SHA-256 of nothing when it is empty).
    pub fn root(&self) -> Hash {
        let mut hashes = self.hashes.iter().rev();
        let Some(&last) = hashes.next() else {
            return empty_root();
        };
        hashes.fold(last, |right, left| node_hash(left, &right))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tree::Tree;
    use super::*;

    #[test]
    fn the_frontier_has_the_roots_of_the_whole_tree_at_every_size() {
        let (mut frontier, mut tree) = (Frontier::new(), Tree::new());
        assert_eq!(frontier.root(), tree.root(0).unwrap());
        for i in 0..300u32 {
            let leaf = i.to_be_bytes();
            assert_eq!(frontier.push(&leaf), leaf_hash(&leaf));
            tree.push(&leaf);
            assert_eq!(
                frontier.root(),
                tree.root(tree.size()).unwrap(),
                "size {}",
                i + 1
            );
            assert_eq!(frontier.hashes().len(), (i + 1).count_ones() as usize);
        }
        let again = Frontier::from_parts(frontier.size(), frontier.hashes().to_vec()).unwrap();
        assert_eq!(again, frontier);
        assert!(Frontier::from_parts(3, vec![empty_root()]).is_none());
    }
}
