//! Reading and verifying a JSON Lines trail, byte for byte.
//!
//! Each line is a record, a signed checkpoint, `{"checkpoint":{...}}`, or a signed tree
//! checkpoint, `{"tree_checkpoint":{"note":...,"v":1}}` (`tlog::stored`), and must be
//! exactly the canonical JSON of what it parses to: no other spacing, key order or escaping,
//! and no duplicate key at any depth (a JSON reader keeps one of the values and drops the
//! other, so two readers could see two different records in one line).

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::*;

mod strict;

/// What [`verify_jsonl`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Intact records before the first problem (all of them when there is none).
    pub records: u64,
    /// The hash of the last intact record.
    pub last_hash: String,
    /// The writer of the records (empty for a trail of no named writer).
    pub writer: String,
    /// The checkpoint lines read before the first problem, in file order.
    pub checkpoints: Vec<Checkpoint>,
    /// The tree checkpoint lines read before the first problem, in file order: each one's
    /// signed note, as text (`tlog::verify_jsonl_with_trees` checks them).
    pub tree_checkpoints: Vec<String>,
    /// The first problem of a line, if any.
    pub problem: Option<TrailProblem>,
    /// Given a key ([`verify_jsonl_with_key`]): what the signed checkpoints show about the
    /// intact records (a cut-off tail, a recomputed chain, a checkpoint not signed by the key,
    /// a chain no checkpoint vouches for). Empty without a key.
    pub chain_problems: Vec<ChainProblem>,
    /// Calls among the intact records that started and have no outcome recorded (the writer
    /// was killed while they ran, or they are running): not a break of the trail, but calls
    /// whose effect nobody recorded.
    pub unfinished: Vec<Unfinished>,
    /// What the intact records are (calls that ran, refused, events) and the checkpoints read:
    /// `records` and `audit stats`' calls, side by side.
    pub counts: TrailCounts,
}

impl VerifyReport {
    /// Whether the trail is intact: no broken line and, when a key was given, nothing wrong
    /// with the chain against its checkpoints.
    pub fn is_intact(&self) -> bool {
        self.problem.is_none() && self.chain_problems.is_empty()
    }
}

/// The first broken place of a trail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrailProblem {
    /// The line (from 1).
    pub line: u64,
    /// What is wrong with it.
    pub kind: ProblemKind,
}

/// How a trail is broken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// The last line is incomplete, and begins as a JSON text does: a write was cut short (a
    /// crash). Every record before it is intact.
    TornTail,
    /// The line is not an audit record (nor a checkpoint); so is an unterminated last line
    /// that no JSON text begins with (a file of another kind).
    Malformed(String),
    /// The line parses, but is not the canonical JSON of what it parses to (other spacing,
    /// key order or escaping): it was not written by a sink, or was rewritten since.
    NotCanonical,
    /// The line has a duplicate key (the message names it): readers could disagree on what it
    /// says.
    DuplicateKey(String),
    /// The record's hash does not match its content: it was edited.
    Edited,
    /// The record does not follow the previous one: a record was removed, inserted or moved.
    ChainBroken {
        /// The `seq` the line should have.
        expected_seq: u64,
        /// The `seq` it has.
        found_seq: u64,
    },
}

impl ProblemKind {
    /// `torn_tail`, `malformed`, `not_canonical`, `duplicate_key`, `edited` or `chain_broken`.
    pub const fn code(&self) -> &'static str {
        match self {
            ProblemKind::TornTail => "torn_tail",
            ProblemKind::Malformed(_) => "malformed",
            ProblemKind::NotCanonical => "not_canonical",
            ProblemKind::DuplicateKey(_) => "duplicate_key",
            ProblemKind::Edited => "edited",
            ProblemKind::ChainBroken { .. } => "chain_broken",
        }
    }
}

impl fmt::Display for TrailProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = self.line;
        match &self.kind {
            ProblemKind::TornTail => write!(
                f,
                "line {line}: torn tail: the last record was cut short while being written; \
                 every record before it is intact"
            ),
            ProblemKind::Malformed(why) => {
                write!(f, "line {line}: not an audit record: {why}")
            }
            ProblemKind::NotCanonical => write!(
                f,
                "line {line}: not canonical JSON: the line is not byte for byte what a sink \
                 writes for the record it holds (other spacing, key order or escaping)"
            ),
            ProblemKind::DuplicateKey(why) => write!(
                f,
                "line {line}: refused: {why} (a reader keeps only one of the values)"
            ),
            ProblemKind::Edited => write!(
                f,
                "line {line}: the record was edited: its hash does not match its content"
            ),
            ProblemKind::ChainBroken {
                expected_seq,
                found_seq,
            } => write!(
                f,
                "line {line}: the chain is broken: expected record {expected_seq} after the \
                 previous one, found record {found_seq} (a record was removed, inserted or moved)"
            ),
        }
    }
}

/// A checkpoint line: `{"checkpoint":{...}}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckpointLine {
    pub(crate) checkpoint: Checkpoint,
}

impl CheckpointLine {
    /// The line's canonical JSON (no newline).
    pub(crate) fn to_line(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        capability_core::json::to_canonical_json(&value)
    }
}

/// A tree checkpoint line: `{"tree_checkpoint":{"note":"<signed note>","v":1}}`. A reader
/// older than this line refuses the trail at it (an unknown line), never misreads it.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TreeCheckpointLine {
    pub(crate) tree_checkpoint: TreeNote,
}

/// What a tree checkpoint line holds.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TreeNote {
    /// The C2SP signed note.
    pub(crate) note: String,
    /// The line's version (1).
    pub(crate) v: u32,
}

impl TreeCheckpointLine {
    /// The line's canonical JSON (no newline).
    pub(crate) fn to_line(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        capability_core::json::to_canonical_json(&value)
    }
}

/// Checks a JSON Lines trail: the exact bytes of every line, every record's hash, and the chain
/// from each to the next. Stops at the first problem and says where. Checkpoint lines are
/// collected, not checked: that needs the key ([`verify_jsonl_with_key`]).
pub fn verify_jsonl(path: impl AsRef<Path>) -> Result<VerifyReport, AuditError> {
    scan(path.as_ref(), None, &[]).map(|(_, report)| report)
}

/// [`verify_jsonl`], and the signed checkpoints against `key` ([`verify_chains`]): reports a
/// cut-off tail (a checkpoint names a record that is gone) and a recomputed chain (a record
/// has another hash than the one a checkpoint signed), which the hash chain alone cannot show.
///
/// A cut that also removes every checkpoint after the cut point leaves a shorter trail that
/// is consistent in itself: to catch it, keep the latest checkpoint somewhere else too (each
/// one is also a `tracing` event; [`JsonlSink::last_checkpoint`]) and give it to
/// [`verify_jsonl_with_checkpoints`].
pub fn verify_jsonl_with_key(
    path: impl AsRef<Path>,
    key: &dyn CheckpointVerifier,
) -> Result<VerifyReport, AuditError> {
    scan(path.as_ref(), Some(key), &[]).map(|(_, report)| report)
}

/// [`verify_jsonl_with_key`], with checkpoints kept outside the file as well.
pub fn verify_jsonl_with_checkpoints(
    path: impl AsRef<Path>,
    key: &dyn CheckpointVerifier,
    kept: &[Checkpoint],
) -> Result<VerifyReport, AuditError> {
    scan(path.as_ref(), Some(key), kept).map(|(_, report)| report)
}

/// Reads every intact record of a trail (stopping at the first problem).
pub fn read_jsonl(path: impl AsRef<Path>) -> Result<(Vec<AuditRecord>, VerifyReport), AuditError> {
    scan(path.as_ref(), None, &[])
}

/// One pass over the file: the intact records, and the report.
fn scan(
    path: &Path,
    key: Option<&dyn CheckpointVerifier>,
    kept: &[Checkpoint],
) -> Result<(Vec<AuditRecord>, VerifyReport), AuditError> {
    let io = |e: std::io::Error| AuditError::Unread {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let mut reader = BufReader::new(File::open(path).map_err(io)?);
    let mut intact = Vec::new();
    let mut report = VerifyReport {
        records: 0,
        last_hash: GENESIS.to_owned(),
        writer: String::new(),
        checkpoints: Vec::new(),
        tree_checkpoints: Vec::new(),
        problem: None,
        chain_problems: Vec::new(),
        unfinished: Vec::new(),
        counts: TrailCounts::default(),
    };
    let mut bytes = Vec::new();
    let mut number = 0u64;
    loop {
        bytes.clear();
        if reader.read_until(b'\n', &mut bytes).map_err(io)? == 0 {
            break;
        }
        number += 1;
        let complete = bytes.last() == Some(&b'\n');
        let text = String::from_utf8_lossy(bytes.strip_suffix(b"\n").unwrap_or(&bytes));
        if !complete {
            report.problem = Some(TrailProblem {
                line: number,
                kind: unterminated(&text),
            });
            break;
        }
        match check_line(&text, &report) {
            Err(kind) => {
                report.problem = Some(TrailProblem { line: number, kind });
                break;
            }
            Ok(Line::Checkpoint(checkpoint)) => report.checkpoints.push(checkpoint),
            Ok(Line::Tree(note)) => report.tree_checkpoints.push(note),
            Ok(Line::Record(record)) => {
                if report.records == 0 {
                    report.writer = record.writer.clone();
                }
                report.records += 1;
                report.last_hash = record.hash.clone();
                intact.push(*record);
            }
        }
    }
    report.unfinished = unfinished_calls(&intact);
    report.counts = TrailCounts::of(&intact, report.checkpoints.len());
    if let Some(key) = key {
        let mut checkpoints = report.checkpoints.clone();
        checkpoints.extend_from_slice(kept);
        report.chain_problems = verify_chains(&intact, &checkpoints, Some(key))
            .writers
            .into_iter()
            .flat_map(|w| w.problems)
            .collect();
    }
    Ok((intact, report))
}

/// What an unterminated last line is: a torn tail when it is the start of a JSON text (a sink
/// writes a record and its newline at once, so a crash can leave only a beginning of one), and
/// otherwise not an audit record at all (a file of another kind: binary bytes, or text that
/// is no JSON), which a torn tail would misname as a record of this trail.
fn unterminated(text: &str) -> ProblemKind {
    match serde_json::from_str::<serde::de::IgnoredAny>(text) {
        Err(e) if !e.is_eof() => ProblemKind::Malformed(e.to_string()),
        _ => ProblemKind::TornTail,
    }
}

enum Line {
    Record(Box<AuditRecord>),
    Checkpoint(Checkpoint),
    Tree(String),
}

/// One complete line, after the intact lines summed up in `so_far`.
fn check_line(text: &str, so_far: &VerifyReport) -> Result<Line, ProblemKind> {
    if text.starts_with("{\"checkpoint\":") {
        let line: CheckpointLine = serde_json::from_str(text)
            .map_err(|e| strict::refusal(text).unwrap_or(ProblemKind::Malformed(e.to_string())))?;
        if line.to_line() != text {
            return Err(strict::refusal(text).unwrap_or(ProblemKind::NotCanonical));
        }
        return Ok(Line::Checkpoint(line.checkpoint));
    }
    if text.starts_with("{\"tree_checkpoint\":") {
        let line: TreeCheckpointLine = serde_json::from_str(text)
            .map_err(|e| strict::refusal(text).unwrap_or(ProblemKind::Malformed(e.to_string())))?;
        if line.to_line() != text {
            return Err(strict::refusal(text).unwrap_or(ProblemKind::NotCanonical));
        }
        if line.tree_checkpoint.v != 1 {
            return Err(ProblemKind::Malformed(format!(
                "a tree checkpoint line of version {}, and this build reads version 1",
                line.tree_checkpoint.v
            )));
        }
        return Ok(Line::Tree(line.tree_checkpoint.note));
    }
    let record: AuditRecord = serde_json::from_str(text)
        .map_err(|e| strict::refusal(text).unwrap_or(ProblemKind::Malformed(e.to_string())))?;
    if record.to_line() != text {
        return Err(strict::refusal(text).unwrap_or(ProblemKind::NotCanonical));
    }
    if record.hash != record.compute_hash() {
        return Err(ProblemKind::Edited);
    }
    let expected_seq = so_far.records + 1;
    if record.seq != expected_seq || record.prev != so_far.last_hash {
        return Err(ProblemKind::ChainBroken {
            expected_seq,
            found_seq: record.seq,
        });
    }
    if so_far.records > 0 && record.writer != so_far.writer {
        return Err(ProblemKind::Malformed(format!(
            "a record of writer {:?} in the chain of writer {:?}: a file holds one writer's chain",
            record.writer, so_far.writer
        )));
    }
    Ok(Line::Record(Box::new(record)))
}
