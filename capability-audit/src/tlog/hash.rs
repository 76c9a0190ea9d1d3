//! RFC 6962 hashing: a leaf is `SHA-256(0x00 || data)`, a node `SHA-256(0x01 || left || right)`.
//!
//! The two prefixes keep a leaf from ever being taken for a node (and so a proof for a node from
//! passing for a record). The empty tree's root is `SHA-256("")`.

use sha2::{Digest, Sha256};

/// A SHA-256 hash: a leaf, a node or a root.
pub type Hash = [u8; 32];

/// The root of the empty tree: SHA-256 of no bytes.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// The hash of a leaf holding `data` (for a record: its line as the trail stores it).
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0x00]);
    hasher.update(data);
    hasher.finalize().into()
}

/// The hash of an inner node over its two children.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0x01]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// The largest power of two smaller than `n` (for `n >= 2`): where RFC 6962 splits a tree.
pub(crate) fn split(n: u64) -> u64 {
    debug_assert!(n >= 2);
    1 << (63 - (n - 1).leading_zeros())
}
