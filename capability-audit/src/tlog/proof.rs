//! The proof file of `c2sp.org/tlog-proof@v1`: one record's inclusion in a signed checkpoint,
//! checkable offline by anyone holding the writer's public key.
//!
//! ```text
//! c2sp.org/tlog-proof@v1
//! extra <base64 of the record's line>
//! index 2
//! <base64 hash>            (the inclusion proof, from the leaf's sibling up)
//! <base64 hash>
//!
//! <the signed checkpoint, verbatim>
//! ```
//!
//! The `extra` line carries the record itself, as the trail stores it, so the file stands
//! alone; it is not trusted as such: it counts only once the inclusion proof binds its hash to
//! the signed root.

use super::encoding::{base64, from_base64};
use super::error::TlogError;
use super::hash::{Hash, leaf_hash};
use super::note::SignedCheckpoint;
use super::verify::verify_inclusion;
use crate::checkpoint::CheckpointVerifier;

/// The first line of a proof file.
pub const PROOF_HEADER: &str = "c2sp.org/tlog-proof@v1";

/// A parsed proof file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlogProof {
    /// The opaque extra data (here: the record's line), unauthenticated by itself.
    pub extra: Option<Vec<u8>>,
    /// The leaf's index (from 0).
    pub index: u64,
    /// The inclusion proof.
    pub proof: Vec<Hash>,
    /// The checkpoint the proof leads to.
    pub checkpoint: SignedCheckpoint,
}

impl TlogProof {
    /// The file's text.
    pub fn to_text(&self) -> String {
        let mut text = format!("{PROOF_HEADER}\n");
        if let Some(extra) = &self.extra {
            text.push_str(&format!("extra {}\n", base64(extra)));
        }
        text.push_str(&format!("index {}\n", self.index));
        for hash in &self.proof {
            text.push_str(&base64(hash));
            text.push('\n');
        }
        text.push('\n');
        text.push_str(&self.checkpoint.to_text());
        text
    }

    /// Reads a proof file (strictly).
    pub fn parse(text: &str) -> Result<TlogProof, TlogError> {
        let bad = |why: &str| TlogError::Malformed(format!("not a tlog proof: {why}"));
        let (head, checkpoint) = text
            .split_once("\n\n")
            .ok_or_else(|| bad("no blank line before the checkpoint"))?;
        let mut lines = head.split('\n');
        if lines.next() != Some(PROOF_HEADER) {
            return Err(bad(&format!("the first line is not `{PROOF_HEADER}`")));
        }
        let mut line = lines.next().ok_or_else(|| bad("no index line"))?;
        let mut extra = None;
        if let Some(data) = line.strip_prefix("extra ") {
            extra = Some(from_base64(data).ok_or_else(|| bad("the extra line is not base64"))?);
            line = lines.next().ok_or_else(|| bad("no index line"))?;
        }
        let index = line
            .strip_prefix("index ")
            .filter(|n| *n == "0" || !n.starts_with('0'))
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| bad("no `index <decimal>` line"))?;
        let proof = lines
            .map(|l| {
                from_base64(l)
                    .and_then(|h| Hash::try_from(h).ok())
                    .ok_or_else(|| bad("a proof line is not a 32-byte hash in base64"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if proof.len() > 64 {
            return Err(bad("more than 64 proof hashes"));
        }
        Ok(TlogProof {
            extra,
            index,
            proof,
            checkpoint: SignedCheckpoint::parse(checkpoint)?,
        })
    }

    /// Checks the proof for the leaf holding `leaf`: the checkpoint is signed by `key` under its
    /// origin as key name, and the inclusion proof leads from the leaf at `index` to the signed
    /// root. The signature is checked first, so a forged checkpoint is called that.
    pub fn verify(&self, leaf: &[u8], key: &dyn CheckpointVerifier) -> Result<(), TlogError> {
        let head = &self.checkpoint.head;
        self.checkpoint.verify(&head.origin, key)?;
        verify_inclusion(
            self.index,
            head.size,
            &leaf_hash(leaf),
            &self.proof,
            &head.root,
        )
    }
}
