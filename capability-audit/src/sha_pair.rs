//! Two SHA-256 hashes computed side by side (a JSON Lines writer hashes a record's tree leaf
//! beside the next record's chain hash). A module of its own, below both `record` and `tlog`,
//! which each use what the other defines.

use sha2::block_api::compress256;

/// A SHA-256 digest.
pub(crate) type Digest = [u8; 32];

/// SHA-256 of `a` and of `b`, computed side by side: their blocks are compressed in turn. One
/// message's rounds form a chain, each waiting for the last, which leaves the CPU's SHA unit
/// idle most of the time; two independent chains interleaved fill it, so the pair costs about
/// two thirds of the two hashes one after the other. (A writer hashes a record's leaf beside the
/// next record's chain hash so: `WriterTree`.)
pub(crate) fn sha256_pair(a: &[u8], b: &[u8]) -> (Digest, Digest) {
    let (a_tail, b_tail) = (Tail::of(a), Tail::of(b));
    let mut a_blocks = a.as_chunks::<64>().0.iter().chain(a_tail.blocks());
    let mut b_blocks = b.as_chunks::<64>().0.iter().chain(b_tail.blocks());
    let (mut a_state, mut b_state) = (INITIAL, INITIAL);
    loop {
        match (a_blocks.next(), b_blocks.next()) {
            (Some(a), Some(b)) => {
                compress256(&mut a_state, std::slice::from_ref(a));
                compress256(&mut b_state, std::slice::from_ref(b));
            }
            (Some(a), None) => compress256(&mut a_state, std::slice::from_ref(a)),
            (None, Some(b)) => compress256(&mut b_state, std::slice::from_ref(b)),
            (None, None) => return (digest(a_state), digest(b_state)),
        }
    }
}

/// SHA-256's initial hash value (FIPS 180-4, 5.3.3).
const INITIAL: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

/// The last one or two blocks of a message: its bytes after the last whole block, the `0x80`
/// byte, zeros, and the message's length in bits (FIPS 180-4, 5.1.1).
struct Tail {
    blocks: [[u8; 64]; 2],
    count: usize,
}

impl Tail {
    fn of(message: &[u8]) -> Tail {
        let rest = message.as_chunks::<64>().1;
        let mut blocks = [[0; 64]; 2];
        blocks[0][..rest.len()].copy_from_slice(rest);
        blocks[0][rest.len()] = 0x80;
        // The length takes the last 8 bytes: a second block when they are taken.
        let count = if rest.len() < 56 { 1 } else { 2 };
        let bits = (message.len() as u64).wrapping_mul(8);
        blocks[count - 1][56..].copy_from_slice(&bits.to_be_bytes());
        Tail { blocks, count }
    }

    fn blocks(&self) -> &[[u8; 64]] {
        &self.blocks[..self.count]
    }
}

fn digest(state: [u32; 8]) -> Digest {
    let mut hash = [0; 32];
    for (bytes, word) in hash.chunks_exact_mut(4).zip(state) {
        bytes.copy_from_slice(&word.to_be_bytes());
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest as _, Sha256};

    #[test]
    fn a_pair_hashed_side_by_side_is_each_one_hashed_alone() {
        // Every length around the padding's edges (55, 56, 63, 64 bytes into a block), against
        // `sha2` itself, each message as the longer and as the shorter of the pair.
        for a_len in 0..260 {
            let a: Vec<u8> = (0..a_len).map(|i| (i * 7 + 1) as u8).collect();
            for b_len in [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 700, a_len] {
                let b: Vec<u8> = (0..b_len).map(|i| (i * 13 + 5) as u8).collect();
                let alone = |m: &[u8]| -> Digest { Sha256::digest(m).into() };
                assert_eq!(
                    sha256_pair(&a, &b),
                    (alone(&a), alone(&b)),
                    "{a_len} and {b_len}"
                );
            }
        }
        // The empty message, from the FIPS 180-4 examples.
        assert_eq!(sha256_pair(b"", b"").0, <Digest>::from(Sha256::digest([])));
    }
}
