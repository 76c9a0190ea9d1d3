//! A trail verified under several keys: a writer's checkpoint key handing over to the next
//! ([`rotation`](super::rotation)), the signed hand-over kept as a record of the trail itself (a notice
//! [`ROTATION_METHOD`], `capability audit rotate`) or given apart.
//!
//! A writer's log with rotations is checked with [`LogKeys`]: each checkpoint (the tree's
//! notes, and the chain's checkpoints by the key they name) must be signed by the key whose
//! span holds its size, so a checkpoint the retired key signs after the hand-over is a finding.
//! A log without a rotation may be signed by any of the keys given (a store's writers, each
//! run a new log, started with the new key).

use std::collections::BTreeMap;

use super::cosignature::public_key_bytes;
use super::error::TlogError;
use super::note::{SignedCheckpoint, key_id};
use super::rotation::{KeyRotation, LogKeys};
use super::trail::ORIGIN_PREFIX;
use crate::checkpoint::{
    ChainProblem, ChainsReport, Checkpoint, CheckpointVerifier, WriterReport, verify_chains,
};
use crate::record::AuditRecord;

/// The method of the notice that records a key rotation: its input's `statement` is the signed
/// statement (`capability/key-rotation/v1`).
pub const ROTATION_METHOD: &str = "audit/key-rotated";

/// The rotations recorded in `records` (notices [`ROTATION_METHOD`]); a recorded statement that
/// does not parse is a problem of its writer.
pub fn recorded_rotations(
    records: &[AuditRecord],
) -> (Vec<KeyRotation>, BTreeMap<String, Vec<ChainProblem>>) {
    let mut rotations = Vec::new();
    let mut problems: BTreeMap<String, Vec<ChainProblem>> = BTreeMap::new();
    for record in records {
        if record.method.as_deref() != Some(ROTATION_METHOD) {
            continue;
        }
        let statement = record.input.get("statement").and_then(|s| s.as_str());
        match statement.map(KeyRotation::parse) {
            Some(Ok(rotation)) => rotations.push(rotation),
            Some(Err(e)) => {
                problems
                    .entry(record.writer.clone())
                    .or_default()
                    .push(ChainProblem::Rotation {
                        why: format!("record {} holds no valid statement: {e}", record.seq),
                    })
            }
            None => {
                problems
                    .entry(record.writer.clone())
                    .or_default()
                    .push(ChainProblem::Rotation {
                        why: format!("record {} holds no statement", record.seq),
                    })
            }
        }
    }
    (rotations, problems)
}

/// The writers' keys and the rotations between them.
pub struct KeyRing<'a> {
    keys: Vec<(&'a dyn CheckpointVerifier, String)>,
    rotations: Vec<KeyRotation>,
}

impl<'a> KeyRing<'a> {
    /// `keys` (each once) and `rotations` (each once).
    pub fn new(keys: &[&'a dyn CheckpointVerifier], rotations: Vec<KeyRotation>) -> KeyRing<'a> {
        let mut ring = KeyRing {
            keys: Vec::new(),
            rotations: Vec::new(),
        };
        for key in keys {
            let hex = key.public_key_hex();
            if !ring.keys.iter().any(|(_, h)| *h == hex) {
                ring.keys.push((*key, hex));
            }
        }
        for rotation in rotations {
            if !ring.rotations.contains(&rotation) {
                ring.rotations.push(rotation);
            }
        }
        ring
    }

    /// The keys of `origin` over time, when a rotation of it is known: the keys a rotation
    /// names, or whose id signs one.
    fn log_keys(&self, origin: &str) -> Option<Result<LogKeys<'a>, TlogError>> {
        let mine: Vec<KeyRotation> = (self.rotations.iter())
            .filter(|r| r.origin == origin)
            .cloned()
            .collect();
        if mine.is_empty() {
            return None;
        }
        let involved: Vec<&'a dyn CheckpointVerifier> = (self.keys.iter())
            .filter(|(_, hex)| {
                let Ok(bytes) = public_key_bytes(hex) else {
                    return false;
                };
                let id = key_id(origin, &bytes);
                mine.iter()
                    .any(|r| r.new_key == bytes || r.signatures.iter().any(|s| s.key_id == id))
            })
            .map(|(key, _)| *key)
            .collect();
        Some(LogKeys::new(origin, &involved, &mine))
    }

    /// Checks a tree checkpoint's signature: by the key whose span holds its size, for a log
    /// with rotations; by any of the keys, for one without.
    pub fn check_note(&self, note: &SignedCheckpoint) -> Result<(), TlogError> {
        let origin = &note.head.origin;
        if let Some(keys) = self.log_keys(origin) {
            return keys?.verify(note).map(|_| ());
        }
        let mut first = None;
        for (key, _) in &self.keys {
            match note.verify(origin, *key) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        Err(first.unwrap_or_else(|| TlogError::Rotation("no key given".into())))
    }

    /// Every writer's chain ([`verify_chains`]), each chain checkpoint checked with the key it
    /// names, which must be one of the keys given and, for a log with rotations, hold its
    /// `seq` in its span.
    pub fn verify_chains(
        &self,
        records: &[AuditRecord],
        checkpoints: &[Checkpoint],
    ) -> ChainsReport {
        let mut merged: BTreeMap<String, WriterReport> = BTreeMap::new();
        for (key, hex) in &self.keys {
            let mine: Vec<Checkpoint> = (checkpoints.iter())
                .filter(|c| c.key == *hex)
                .cloned()
                .collect();
            for writer in verify_chains(records, &mine, Some(*key)).writers {
                match merged.get_mut(&writer.writer) {
                    None => {
                        merged.insert(writer.writer.clone(), writer);
                    }
                    Some(kept) => {
                        kept.checkpointed = kept.checkpointed.max(writer.checkpointed);
                        for problem in writer.problems {
                            if !kept.problems.contains(&problem) {
                                kept.problems.push(problem);
                            }
                        }
                    }
                }
            }
        }
        for checkpoint in checkpoints {
            let problem = if self.keys.iter().all(|(_, hex)| *hex != checkpoint.key) {
                Some(ChainProblem::BadCheckpoint {
                    seq: checkpoint.seq,
                })
            } else {
                let origin = format!("{ORIGIN_PREFIX}{}", checkpoint.writer);
                match self.log_keys(&origin) {
                    Some(Ok(keys)) => keys.allows(&checkpoint.key, checkpoint.seq).err(),
                    Some(Err(e)) => Some(e),
                    None => None,
                }
                .map(|e| ChainProblem::Rotation {
                    why: format!("the chain's checkpoint at record {}: {e}", checkpoint.seq),
                })
            };
            if let (Some(problem), Some(writer)) = (problem, merged.get_mut(&checkpoint.writer))
                && !writer.problems.contains(&problem)
            {
                writer.problems.push(problem);
            }
        }
        for writer in merged.values_mut() {
            writer.problems.retain(|p| *p != ChainProblem::Unvouched);
            if writer.checkpointed == 0 && writer.records > 0 {
                writer.problems.push(ChainProblem::Unvouched);
            }
        }
        ChainsReport {
            writers: merged.into_values().collect(),
        }
    }

    /// Each rotation's hand-over, in `notes` (a trail's tree checkpoints): the tree of its size
    /// signed by the key it retires. Without it, nothing ties the records before the hand-over
    /// to the retired key: whoever holds the new key could have written the whole log again
    /// under it (the rotation's own record left out), and every checkpoint would be in the new
    /// key's span. A rotation of a log with no note at all (a store's run, no tree kept) is not
    /// looked for.
    pub fn handover_problems(
        &self,
        notes: &[SignedCheckpoint],
    ) -> BTreeMap<String, Vec<ChainProblem>> {
        let mut found: BTreeMap<String, Vec<ChainProblem>> = BTreeMap::new();
        for rotation in &self.rotations {
            let theirs = || notes.iter().filter(|n| n.head.origin == rotation.origin);
            if theirs().next().is_none() {
                continue;
            }
            let retiring = (self.keys.iter()).find(|(_, hex)| {
                public_key_bytes(hex).is_ok_and(|bytes| {
                    let id = key_id(&rotation.origin, &bytes);
                    rotation.signatures.iter().any(|s| s.key_id == id)
                })
            });
            let signed = retiring.is_some_and(|(key, _)| {
                theirs().any(|n| {
                    n.head.size == rotation.size && n.verify(&rotation.origin, *key).is_ok()
                })
            });
            if !signed {
                let writer =
                    (rotation.origin.strip_prefix(ORIGIN_PREFIX)).unwrap_or(&rotation.origin);
                found
                    .entry(writer.to_owned())
                    .or_default()
                    .push(ChainProblem::Rotation {
                        why: format!(
                            "no checkpoint of the hand-over at size {} is signed by the key it \
                             retires{}: the records before it are not the retired key's (the \
                             log may have been written again under the new key)",
                            rotation.size,
                            if retiring.is_none() {
                                " (that key is not given)"
                            } else {
                                ""
                            }
                        ),
                    });
            }
        }
        found
    }

    /// What each tree checkpoint's signature shows ([`check_note`](Self::check_note)), by
    /// writer; `what` names the notes in messages (`the writer's registration`).
    pub fn note_problems(
        &self,
        notes: &[SignedCheckpoint],
        what: &str,
    ) -> BTreeMap<String, Vec<ChainProblem>> {
        let mut found: BTreeMap<String, Vec<ChainProblem>> = BTreeMap::new();
        for note in notes {
            if let Err(e) = self.check_note(note) {
                let writer = super::stored::checkpoint_writer(note).unwrap_or_default();
                found
                    .entry(writer.to_owned())
                    .or_default()
                    .push(ChainProblem::BadTreeCheckpoint {
                        size: note.head.size,
                        why: format!("{what}{e}"),
                    });
            }
        }
        for problems in found.values_mut() {
            problems.dedup();
        }
        found
    }
}
