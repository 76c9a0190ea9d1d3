//! The head of one writer's chain: what every sink shares (seq, prev, hash, commit, roll back),
//! written once.
//!
//! A sink seals each record onto its head ([`ChainHead::seal`]: its writer, the next `seq`, the
//! `prev` hash and its own `hash`), writes it, and then either commits the head
//! ([`ChainHead::commit`]: the records sealed so far are in the trail) or rolls it back
//! ([`ChainHead::roll_back`]: they are not, and the next record follows the last committed
//! one). A record whose write failed is therefore never part of the chain: the dispatcher keeps
//! it and appends it again, as a new link.

use crate::*;

/// The head of one writer's chain (see the module docs).
///
/// ```
/// use capability::audit::{ChainHead, GENESIS};
/// # use capability::audit::{AuditRecord, Verdict};
/// # fn record() -> AuditRecord { serde_json::from_value(serde_json::json!({
/// #   "seq": 0, "time": "t", "agent": "a", "role": "r", "session": "s", "step": null,
/// #   "provider": null, "tool": "t", "descriptor_hash": "", "policy_version": null,
/// #   "verdict": "denied", "reasons": [], "input": null, "input_digest": "", "input_size": 0,
/// #   "output_digest": null, "output_size": null, "latency_us": null, "success": null,
/// #   "error": null, "prev": "", "hash": ""})).unwrap() }
///
/// let mut head = ChainHead::new("replica-1", 0, GENESIS);
/// let first = head.seal(record());
/// assert_eq!((first.seq, first.prev.as_str()), (1, GENESIS));
/// head.commit();
/// let lost = head.seal(record());
/// assert_eq!(lost.seq, 2);
/// head.roll_back(); // its write failed: it is not in the chain
/// let second = head.seal(record());
/// assert_eq!((second.seq, second.prev.as_str()), (2, first.hash.as_str()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainHead {
    writer: String,
    /// The last record sealed (committed or not).
    seq: u64,
    prev: String,
    /// The last record committed.
    committed_seq: u64,
    committed_prev: String,
}

impl ChainHead {
    /// The head of `writer`'s chain whose last committed record is `seq` with hash `hash` (0
    /// and [`GENESIS`] for a new chain).
    pub fn new(writer: impl Into<String>, seq: u64, hash: impl Into<String>) -> ChainHead {
        let hash = hash.into();
        ChainHead {
            writer: writer.into(),
            seq,
            prev: hash.clone(),
            committed_seq: seq,
            committed_prev: hash,
        }
    }

    /// Seals `record` onto the chain: its writer, the next `seq`, `prev`, and its `hash`.
    pub fn seal(&mut self, mut record: AuditRecord) -> AuditRecord {
        record.writer.clone_from(&self.writer);
        record.seq = self.seq + 1;
        record.prev = std::mem::take(&mut self.prev);
        record.hash = record.compute_hash();
        self.seq = record.seq;
        self.prev.clone_from(&record.hash);
        record
    }

    /// [`seal`](Self::seal), appending the record's line of canonical JSON to `line` too
    /// ([`AuditRecord::seal_line`]: the record's JSON is written once for both).
    pub fn seal_line(&mut self, mut record: AuditRecord, line: &mut String) -> AuditRecord {
        self.seal_line_in_place(&mut record, line);
        record
    }

    /// [`seal_line`](Self::seal_line), sealing `record` where it is.
    pub fn seal_line_in_place(&mut self, record: &mut AuditRecord, line: &mut String) {
        record.writer.clone_from(&self.writer);
        record.seq = self.seq + 1;
        record.prev = std::mem::take(&mut self.prev);
        record.seal_line(line);
        self.seq = record.seq;
        self.prev.clone_from(&record.hash);
    }

    /// [`seal_line_in_place`](Self::seal_line_in_place), computing the SHA-256 of `beside`
    /// side by side with the record's hash ([`AuditRecord::seal_line_beside`]); returns it.
    pub(crate) fn seal_line_beside(
        &mut self,
        record: &mut AuditRecord,
        line: &mut String,
        beside: &[u8],
    ) -> [u8; 32] {
        record.writer.clone_from(&self.writer);
        record.seq = self.seq + 1;
        record.prev = std::mem::take(&mut self.prev);
        let other = record.seal_line_beside(line, beside);
        self.seq = record.seq;
        self.prev.clone_from(&record.hash);
        other
    }

    /// The records sealed so far are in the trail.
    pub fn commit(&mut self) {
        self.committed_seq = self.seq;
        self.committed_prev.clone_from(&self.prev);
    }

    /// The records sealed up to `seq` (whose hash is `hash`) are in the trail; those sealed
    /// after it are not yet.
    pub fn commit_through(&mut self, seq: u64, hash: &str) {
        self.committed_seq = seq;
        self.committed_prev = hash.to_owned();
    }

    /// The records sealed since the last commit are not in the trail: the head goes back to the
    /// last committed record. Returns how many records were taken back.
    pub fn roll_back(&mut self) -> u64 {
        let taken = self.seq - self.committed_seq;
        self.seq = self.committed_seq;
        self.prev.clone_from(&self.committed_prev);
        taken
    }

    /// The writer.
    pub fn writer(&self) -> &str {
        &self.writer
    }

    /// The `seq` of the last record sealed.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The hash of the last record sealed.
    pub fn hash(&self) -> &str {
        &self.prev
    }

    /// The `seq` and hash of the last record committed.
    pub fn committed(&self) -> (u64, &str) {
        (self.committed_seq, &self.committed_prev)
    }

    /// Whether records were sealed since the last commit.
    pub fn has_uncommitted(&self) -> bool {
        self.seq != self.committed_seq
    }
}
