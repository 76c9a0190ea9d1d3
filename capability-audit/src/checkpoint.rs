//! Signed checkpoints: tamper evidence that survives an attacker who can write the trail.
//!
//! A hash chain shows that a trail was edited only to someone who kept its last hash: whoever
//! can write the file (or the table) can cut records off its end, or edit a record and compute
//! every later hash again. So each writer signs, at intervals and when it stops, a
//! [`Checkpoint`]: its writer id, the `seq` and `hash` of its last record, and the time, signed
//! with an Ed25519 key the attacker does not hold. [`verify_chains`] given the public key then
//! reports a cut-off tail (a checkpoint names a record that is not there) and a recomputed chain
//! (the record at a checkpoint's `seq` has another hash).
//!
//! The signature scheme is behind two small traits, [`CheckpointSigner`] and
//! [`CheckpointVerifier`]; `capability::gate::SecretKey` and `PublicKey` (the approvers' key
//! files, `capability keygen`) implement them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use crate::problem::ChainProblem;

use crate::*;

/// What a checkpoint signature is made over: a fixed prefix, then the canonical JSON of the
/// checkpoint without its signature.
const DOMAIN: &str = "capability-audit-checkpoint-v1\n";

/// Signs checkpoints: an Ed25519 secret key (`capability::gate::SecretKey`).
pub trait CheckpointSigner: Send + Sync {
    /// The public half, as 64 hex digits: recorded in each checkpoint.
    fn public_key_hex(&self) -> String;
    /// Signs `message`; the signature as 128 hex digits.
    fn sign_checkpoint(&self, message: &[u8]) -> String;
}

/// Verifies checkpoints: an Ed25519 public key (`capability::gate::PublicKey`).
pub trait CheckpointVerifier {
    /// The key, as 64 hex digits.
    fn public_key_hex(&self) -> String;
    /// Whether `signature` (hex) is this key's signature of `message` (verified strictly).
    fn verify_checkpoint(&self, message: &[u8], signature: &str) -> bool;
}

/// A writer's signed statement: "my chain had `seq` records, the last with hash `head`, at
/// `time`".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The writer whose chain this is.
    pub writer: String,
    /// The `seq` of the writer's last record (0: none yet).
    pub seq: u64,
    /// The `hash` of that record ([`GENESIS`] when there is none).
    pub head: String,
    /// When, UTC, RFC 3339 with milliseconds.
    pub time: String,
    /// The signer's public key, 64 hex digits.
    pub key: String,
    /// The Ed25519 signature, 128 hex digits.
    pub signature: String,
}

impl Checkpoint {
    /// A checkpoint of `writer`'s chain at record `seq` (hash `head`), signed now.
    pub fn sign(
        writer: impl Into<String>,
        seq: u64,
        head: impl Into<String>,
        signer: &dyn CheckpointSigner,
    ) -> Checkpoint {
        let mut checkpoint = Checkpoint {
            writer: writer.into(),
            seq,
            head: head.into(),
            time: utc_now(),
            key: signer.public_key_hex(),
            signature: String::new(),
        };
        checkpoint.signature = signer.sign_checkpoint(&checkpoint.message());
        checkpoint
    }

    /// The bytes the signature covers.
    pub fn message(&self) -> Vec<u8> {
        let value = serde_json::json!({
            "writer": self.writer,
            "seq": self.seq,
            "head": self.head,
            "time": self.time,
            "key": self.key,
        });
        let mut message = DOMAIN.as_bytes().to_vec();
        message.extend_from_slice(capability_core::json::to_canonical_json(&value).as_bytes());
        message
    }

    /// Whether `verifier`'s key signed this checkpoint.
    pub fn verify(&self, verifier: &dyn CheckpointVerifier) -> bool {
        self.key == verifier.public_key_hex()
            && verifier.verify_checkpoint(&self.message(), &self.signature)
    }
}

/// When a writer signs a checkpoint: every `records` records or every `interval`, whichever
/// comes first (checked as records are appended), and always when it stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointEvery {
    /// At most this many records between checkpoints.
    pub records: u64,
    /// At most this long between checkpoints (while records arrive).
    pub interval: Duration,
}

impl Default for CheckpointEvery {
    /// Every 1,000 records or 10 seconds.
    fn default() -> Self {
        CheckpointEvery {
            records: 1_000,
            interval: Duration::from_secs(10),
        }
    }
}

/// A writer's checkpoint clock: says when the next checkpoint is due.
#[derive(Debug)]
pub struct CheckpointSchedule {
    every: CheckpointEvery,
    last_seq: u64,
    last_time: Instant,
}

impl CheckpointSchedule {
    /// A schedule whose last checkpoint was at `seq`, now.
    pub fn new(every: CheckpointEvery, seq: u64) -> Self {
        CheckpointSchedule {
            every,
            last_seq: seq,
            last_time: Instant::now(),
        }
    }

    /// Whether a checkpoint is due now that the chain is at `seq`.
    pub fn due(&self, seq: u64) -> bool {
        seq > self.last_seq
            && (seq - self.last_seq >= self.every.records
                || self.last_time.elapsed() >= self.every.interval)
    }

    /// Whether a checkpoint is due although no record came: the interval passed since the
    /// last one (a sink that signs when idle asks this on a timer).
    pub fn idle_due(&self) -> bool {
        self.last_time.elapsed() >= self.every.interval
    }

    /// The schedule's points.
    pub fn every(&self) -> CheckpointEvery {
        self.every
    }

    /// Notes a checkpoint written at `seq`.
    pub fn written(&mut self, seq: u64) {
        self.last_seq = seq;
        self.last_time = Instant::now();
    }
}

/// What [`verify_chains`] found, per writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainsReport {
    /// Each writer's chain, sorted by writer id.
    pub writers: Vec<WriterReport>,
}

impl ChainsReport {
    /// Whether every chain is intact (and, when a key was given, covered by checkpoints).
    pub fn is_intact(&self) -> bool {
        self.writers.iter().all(|w| w.problems.is_empty())
    }

    /// The number of records, all writers together.
    pub fn records(&self) -> u64 {
        self.writers.iter().map(|w| w.records).sum()
    }
}

/// One writer's chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriterReport {
    /// The writer id.
    pub writer: String,
    /// Its records present (intact or not).
    pub records: u64,
    /// The highest `seq` a valid checkpoint vouches for (0 when none).
    pub checkpointed: u64,
    /// Everything wrong, in order.
    pub problems: Vec<ChainProblem>,
    /// Calls of this writer that started and have no outcome recorded.
    pub unfinished: Vec<Unfinished>,
}

/// Verifies every writer's chain in `records` (any order): each record's hash, `seq` from 1
/// without gaps, and `prev` linking each record to the one before. With `key`, also each
/// checkpoint's signature, and that the chain still holds the record each valid checkpoint
/// vouches for, with the hash it signed.
pub fn verify_chains(
    records: &[AuditRecord],
    checkpoints: &[Checkpoint],
    key: Option<&dyn CheckpointVerifier>,
) -> ChainsReport {
    let mut chains: BTreeMap<&str, Vec<&AuditRecord>> = BTreeMap::new();
    for record in records {
        chains
            .entry(record.writer.as_str())
            .or_default()
            .push(record);
    }
    if key.is_some() {
        for checkpoint in checkpoints {
            chains.entry(checkpoint.writer.as_str()).or_default();
        }
    }
    let writers = chains
        .into_iter()
        .map(|(writer, mut chain)| {
            chain.sort_by_key(|r| r.seq);
            let mut problems = Vec::new();
            let mut prev = GENESIS;
            for (i, record) in chain.iter().enumerate() {
                let expected = i as u64 + 1;
                if record.hash != record.compute_hash() {
                    problems.push(ChainProblem::Edited { seq: record.seq });
                }
                if record.seq != expected || record.prev != prev {
                    problems.push(ChainProblem::ChainBroken {
                        expected_seq: expected,
                        found_seq: record.seq,
                    });
                }
                prev = &record.hash;
            }
            let mut checkpointed = 0;
            if let Some(key) = key {
                let last_seq = chain.last().map_or(0, |r| r.seq);
                for checkpoint in checkpoints.iter().filter(|c| c.writer == writer) {
                    if !checkpoint.verify(key) {
                        problems.push(ChainProblem::BadCheckpoint {
                            seq: checkpoint.seq,
                        });
                        continue;
                    }
                    checkpointed = checkpointed.max(checkpoint.seq);
                    if checkpoint.seq == 0 {
                        continue;
                    }
                    match chain.iter().find(|r| r.seq == checkpoint.seq) {
                        None => problems.push(ChainProblem::TailCut {
                            checkpoint_seq: checkpoint.seq,
                            last_seq,
                        }),
                        Some(record) if record.hash != checkpoint.head => {
                            problems.push(ChainProblem::Recomputed {
                                seq: checkpoint.seq,
                            });
                        }
                        Some(_) => {}
                    }
                }
                if checkpointed == 0 && !chain.is_empty() {
                    problems.push(ChainProblem::Unvouched);
                }
            }
            problems.dedup();
            WriterReport {
                writer: writer.to_owned(),
                records: chain.len() as u64,
                checkpointed,
                problems,
                unfinished: unfinished_calls(chain.iter().copied()),
            }
        })
        .collect();
    ChainsReport { writers }
}
