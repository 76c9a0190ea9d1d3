//! The right edge of a writer's tree, kept as records are written: O(log n) hashes, O(1)
//! amortised hashing per record.
//!
//! A tree of `n` leaves is, left to right, one complete subtree per bit set in `n` (the largest
//! first): its *compact range* `[0, n)`. Appending a leaf merges the subtrees of equal size at
//! the right end (as a binary counter carries), and the RFC 6962 root is the fold of the
//! subtrees from the right. So a writer keeps its tree at a few hundred bytes, whatever its
//! size, and signs its root at every checkpoint without reading a record back. Proofs need the
//! whole tree ([`Tree`](super::tree::Tree)): they are made by whoever reads the trail.

use sha2::{Digest, Sha256};

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
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Frontier {
    size: u64,
    /// The complete subtrees, left (largest) to right.
    hashes: Vec<Hash>,
}

/// Written out for `clone_from` to keep the hashes' allocation (a derived `Clone` makes a new
/// one): a writer copies its frontier at every commit.
impl Clone for Frontier {
    fn clone(&self) -> Frontier {
        Frontier {
            size: self.size,
            hashes: self.hashes.clone(),
        }
    }

    fn clone_from(&mut self, source: &Frontier) {
        self.size = source.size;
        self.hashes.clone_from(&source.hashes);
    }
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

/// A [`Frontier`] that may hold back the hash of its last leaf, for it to be computed later beside
/// other work (a writer hashes a record's leaf beside the next record's chain hash:
/// `WriterTree::hold`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Lagging {
    /// Every leaf but the one held back.
    frontier: Frontier,
    /// `0x00 ||` the data of the leaf held back: its leaf hash is this input's SHA-256. Empty
    /// when none is held (a held one holds at least the `0x00`).
    held: Vec<u8>,
    /// The leaf hashes appended to `frontier`, when they are kept (`keep_leaves`: for a writer
    /// submitting its checkpoints to witnesses). Not copied by `clone_from`.
    leaves: Option<Vec<Hash>>,
}

impl Clone for Lagging {
    fn clone(&self) -> Lagging {
        Lagging {
            frontier: self.frontier.clone(),
            held: self.held.clone(),
            leaves: self.leaves.clone(),
        }
    }

    /// The frontier and the leaf held back; the leaves kept, if any, stay (a writer's committed
    /// copy keeps none: `WriterTree::roll_back` cuts them back).
    fn clone_from(&mut self, source: &Lagging) {
        self.frontier.clone_from(&source.frontier);
        self.held.clone_from(&source.held);
    }
}

impl Lagging {
    pub(crate) fn new(frontier: Frontier) -> Lagging {
        Lagging {
            frontier,
            held: Vec::new(),
            leaves: None,
        }
    }

    /// Keeps the hash of every leaf appended from now on ([`leaves`](Self::leaves)).
    pub(crate) fn keep_leaves(&mut self) {
        self.leaves.get_or_insert_with(Vec::new);
    }

    /// The leaf hashes kept, if they are.
    pub(crate) fn leaves(&mut self) -> Option<&mut Vec<Hash>> {
        self.leaves.as_mut()
    }

    /// Every leaf but the one held back, if one is.
    pub(crate) fn frontier(&self) -> &Frontier {
        &self.frontier
    }

    /// The leaf hash input (`0x00 ||` data) of the leaf held back, if one is.
    pub(crate) fn held(&self) -> Option<&[u8]> {
        (!self.held.is_empty()).then_some(self.held.as_slice())
    }

    /// Appends the leaf held back, if one is, hashing it now.
    pub(crate) fn release(&mut self) {
        self.hold_next(None);
    }

    /// Appends a leaf holding `data`, the one held back first.
    pub(crate) fn push(&mut self, data: &[u8]) {
        self.release();
        let leaf = self.frontier.push(data);
        if let Some(leaves) = &mut self.leaves {
            leaves.push(leaf);
        }
    }

    /// Appends the leaf held back, whose hash is `held_hash` (the SHA-256 of
    /// [`held`](Self::held), computed by the caller beside other work; `None`: hashed here),
    /// and holds back a leaf holding `data`.
    pub(crate) fn hold(&mut self, held_hash: Option<Hash>, data: &[u8]) {
        self.hold_next(held_hash);
        self.held.push(0x00);
        self.held.extend_from_slice(data);
    }

    fn hold_next(&mut self, held_hash: Option<Hash>) {
        if self.held.is_empty() {
            return;
        }
        let leaf = held_hash.unwrap_or_else(|| Sha256::digest(&self.held).into());
        debug_assert_eq!(
            leaf,
            <Hash>::from(Sha256::digest(&self.held)),
            "not its hash"
        );
        self.frontier.push_hash(leaf);
        if let Some(leaves) = &mut self.leaves {
            leaves.push(leaf);
        }
        self.held.clear();
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

    #[test]
    fn a_frontier_holding_back_its_last_leaf_has_every_leaf_once_released() {
        let (mut lagging, mut frontier) = (Lagging::default(), Frontier::new());
        for i in 0..40u32 {
            let leaf = i.to_be_bytes();
            frontier.push(&leaf);
            match i % 4 {
                // Its hash given, as a writer computes it beside the next record's.
                0 | 1 => {
                    let held = lagging.held().map(|h| Sha256::digest(h).into());
                    lagging.hold(held, &leaf);
                }
                2 => lagging.hold(None, &leaf),
                _ => lagging.push(&leaf),
            }
            let held = u64::from(lagging.held().is_some());
            assert_eq!(lagging.frontier().size() + held, frontier.size());
            let mut released = lagging.clone();
            released.release();
            assert_eq!(released.frontier(), &frontier, "after {}", i + 1);
            assert_eq!(released.held(), None);
        }
        let mut copy = Lagging::default();
        copy.clone_from(&lagging);
        assert_eq!(copy, lagging);
    }

    #[test]
    fn a_write_that_fails_takes_back_the_leaf_it_held_and_not_the_one_before() {
        use super::super::stored::WriterTree;
        let held_hash = |tree: &WriterTree| tree.held().map(|h| Sha256::digest(h).into());
        let (mut tree, mut written) = (WriterTree::new("w", Frontier::new()).unwrap(), Vec::new());
        for line in [&b"one"[..], b"two"] {
            tree.hold(held_hash(&tree), line);
            tree.commit();
            written.push(line);
        }
        // A record sealed, its write failed: "two" stays, held back as it was when committed.
        tree.hold(held_hash(&tree), b"lost");
        tree.roll_back();
        assert_eq!(tree.held(), Some(&b"\0two"[..]));
        // Then one sealed, the root taken for a checkpoint, and that write failed too.
        tree.hold(held_hash(&tree), b"lost again");
        tree.release();
        tree.roll_back();
        tree.hold(held_hash(&tree), b"three");
        tree.commit();
        written.push(b"three");
        tree.release();
        let mut expected = Frontier::new();
        for line in written {
            expected.push(line);
        }
        assert_eq!(tree.sealed(), &expected);
    }

    #[test]
    fn the_leaves_kept_for_witnesses_are_those_written_once_each_in_order() {
        use super::super::stored::WriterTree;
        let held_hash = |tree: &WriterTree| tree.held().map(|h| Sha256::digest(h).into());
        let mut tree = WriterTree::new("w", Frontier::new()).unwrap();
        tree.hold(None, b"before");
        tree.commit();
        tree.keep_leaves();
        let (mut written, mut taken) = (vec![&b"before"[..]], Vec::new());
        for round in 0..6u8 {
            for line in [&b"one"[..], b"two", b"three"] {
                tree.hold(held_hash(&tree), line);
                tree.commit();
                written.push(line);
            }
            // A record sealed whose write fails (after a checkpoint released it, every other
            // round): its leaf is not kept.
            tree.hold(held_hash(&tree), b"lost");
            if round % 2 == 0 {
                tree.release();
            }
            tree.roll_back();
            // Sealed but not yet committed: not taken.
            tree.hold(held_hash(&tree), b"pending");
            let (first, leaves) = tree.take_leaves();
            assert_eq!(first, taken.len() as u64, "round {round}");
            taken.extend(leaves);
            tree.roll_back();
        }
        tree.release();
        tree.commit();
        taken.extend(tree.take_leaves().1);
        let expected: Vec<Hash> = written.iter().map(|l| leaf_hash(l)).collect();
        assert_eq!(taken, expected);
    }
}
