//! The tree a writer keeps beside its records: its frontier, sealed and committed with the
//! chain, its signed checkpoints (C2SP `tlog-checkpoint` notes with a `time` extension line),
//! resuming it on restart, and checking stored checkpoints against stored records.
//!
//! Every sink of this workspace keeps one ([`WriterTree`]) when it signs checkpoints: next to
//! each chain checkpoint it stores a signed note over its tree (origin `capability/<writer>`,
//! size, root), in the JSON Lines trail as a line `{"tree_checkpoint":{"note":...,"v":1}}` and
//! in a database in `mcp_audit_tree_checkpoint`. So a proof for a record can be made later
//! against the writer's own checkpoint, not one signed at proof time.

use std::collections::BTreeMap;
use std::path::Path;

use super::encoding::from_hex;
use super::error::TlogError;
use super::frontier::{Frontier, Lagging};
use super::hash::Hash;
use super::note::{NoteSignature, SignedCheckpoint, TreeHead, check_key_name, key_id};
use super::trail::{ORIGIN_PREFIX, origin, writer_tree};
use crate::checkpoint::{ChainProblem, CheckpointSigner, CheckpointVerifier};
use crate::error::AuditError;
use crate::record::AuditRecord;

/// The extension line a writer's checkpoint carries after its root: `time <RFC 3339 UTC>`, when
/// it was signed. Readers that do not know it ignore it, as `c2sp.org/tlog-checkpoint` says.
pub const TIME_EXTENSION: &str = "time ";

/// The extension line of the checkpoint a writer signs when it stops (closes): its checkpoints
/// end there on purpose, and a verifier does not look for later ones
/// ([`checkpoint_gaps`](super::gaps::checkpoint_gaps)).
pub const STOPPED_EXTENSION: &str = "stopped";

/// The version of the JSON Lines `tree_checkpoint` line this build writes.
pub const TREE_LINE_VERSION: u32 = 1;

/// A writer's tree as its sink keeps it: the frontier of every record sealed, and of those
/// committed (written), so that a write that fails takes its leaves back with its records.
///
/// A sink may hold back the leaf hash of the record it sealed last (`hold`), to
/// compute it beside the next record's chain hash: the two side by side cost about two thirds
/// of the two one after the other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriterTree {
    origin: String,
    sealed: Lagging,
    committed: Lagging,
}

impl WriterTree {
    /// `writer`'s tree, resumed at `frontier` (a new writer's is empty). Refused when the
    /// writer id cannot name a log (spaces, `+`).
    pub fn new(writer: &str, frontier: Frontier) -> Result<WriterTree, TlogError> {
        Ok(WriterTree {
            origin: origin(writer)?,
            sealed: Lagging::new(frontier.clone()),
            committed: Lagging::new(frontier),
        })
    }

    /// The log's origin, `capability/<writer>`.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Appends the leaf of a record sealed: its line, as [`AuditRecord::to_line`] writes it.
    pub fn push_line(&mut self, line: &[u8]) {
        self.sealed.push(line);
    }

    /// The leaf hash input (`0x00 ||` its line) of the record sealed last, when its leaf is
    /// held back ([`hold`](Self::hold)): its SHA-256 is the leaf hash.
    pub(crate) fn held(&self) -> Option<&[u8]> {
        self.sealed.held()
    }

    /// Appends the leaf held back, whose hash is `held_hash` (the SHA-256 of
    /// [`held`](Self::held), computed beside the next record's hash; `None`: hashed here), and
    /// holds back the leaf of the record sealed now, whose line is `line`.
    pub(crate) fn hold(&mut self, held_hash: Option<Hash>, line: &[u8]) {
        self.sealed.hold(held_hash, line);
    }

    /// Appends the leaf held back, if one is (before the tree's root is needed).
    pub(crate) fn release(&mut self) {
        self.sealed.release();
    }

    /// Every record sealed so far (by a sink that holds leaves back: after `release`).
    pub fn sealed(&self) -> &Frontier {
        debug_assert!(self.sealed.held().is_none(), "a leaf is held back");
        self.sealed.frontier()
    }

    /// Every record committed so far (for a sink that never holds a leaf back).
    pub fn committed(&self) -> &Frontier {
        debug_assert!(self.committed.held().is_none(), "a leaf is held back");
        self.committed.frontier()
    }

    /// The records sealed so far are written.
    pub fn commit(&mut self) {
        self.committed.clone_from(&self.sealed);
    }

    /// The records up to `frontier` (taken from [`sealed`](Self::sealed) earlier) are written.
    pub fn commit_to(&mut self, frontier: Frontier) {
        self.committed = Lagging::new(frontier);
    }

    /// The records sealed since the last commit are not written: their leaves go too.
    pub fn roll_back(&mut self) {
        let (sealed, committed) = (
            self.sealed.frontier().size(),
            self.committed.frontier().size(),
        );
        if let Some(leaves) = self.sealed.leaves() {
            let cut = (sealed - committed) as usize;
            leaves.truncate(leaves.len().saturating_sub(cut));
        }
        self.sealed.clone_from(&self.committed);
    }

    /// Keeps the hash of every leaf sealed from now on, for [`take_leaves`](Self::take_leaves)
    /// (a writer submitting its checkpoints to witnesses).
    pub fn keep_leaves(&mut self) {
        self.sealed.keep_leaves();
    }

    /// The leaf hashes kept and committed since the last call, and the index of the first
    /// (call it after a commit). Empty when none are kept.
    pub fn take_leaves(&mut self) -> (u64, Vec<Hash>) {
        let (sealed, committed) = (
            self.sealed.frontier().size(),
            self.committed.frontier().size(),
        );
        let Some(kept) = self.sealed.leaves() else {
            return (sealed, Vec::new());
        };
        // Only those committed: the others may still be rolled back.
        let first = sealed - kept.len() as u64;
        let count = (committed.saturating_sub(first) as usize).min(kept.len());
        (first, kept.drain(..count).collect())
    }

    /// A checkpoint of `frontier` signed by `signer`, with the time extension `time`.
    pub fn sign(
        &self,
        frontier: &Frontier,
        time: &str,
        signer: &dyn CheckpointSigner,
    ) -> Result<SignedCheckpoint, TlogError> {
        sign_note(&self.origin, frontier, Some(time), None, false, signer)
    }

    /// [`sign`](Self::sign), the checkpoint of a writer that stops: with the
    /// [`STOPPED_EXTENSION`] line.
    pub fn sign_stopped(
        &self,
        frontier: &Frontier,
        time: &str,
        signer: &dyn CheckpointSigner,
    ) -> Result<SignedCheckpoint, TlogError> {
        sign_note(&self.origin, frontier, Some(time), None, true, signer)
    }
}

/// A checkpoint of the tree `frontier` of the log `origin`, with a `time` extension line when
/// given, signed by `signer` under the key name `origin`.
pub fn sign_frontier(
    origin: &str,
    frontier: &Frontier,
    time: Option<&str>,
    signer: &dyn CheckpointSigner,
) -> Result<SignedCheckpoint, TlogError> {
    sign_note(origin, frontier, time, None, false, signer)
}

/// The checkpoint of the tree `frontier` of the log `origin`, signed by `signer` under the key
/// name `origin`: its extension lines the `time` line (when given), then `extra` (one line,
/// when given: [`writers`](super::writers) names the store's latest registration so), then the
/// [`STOPPED_EXTENSION`] line when `stopped`.
pub(crate) fn sign_note(
    origin: &str,
    frontier: &Frontier,
    time: Option<&str>,
    extra: Option<&str>,
    stopped: bool,
    signer: &dyn CheckpointSigner,
) -> Result<SignedCheckpoint, TlogError> {
    check_key_name(origin)?;
    let head = TreeHead {
        origin: origin.to_owned(),
        size: frontier.size(),
        root: frontier.root(),
    };
    let mut body = head.body();
    if let Some(time) = time.filter(|t| !t.is_empty() && !t.contains('\n')) {
        body.push_str(TIME_EXTENSION);
        body.push_str(time);
        body.push('\n');
    }
    if let Some(extra) = extra.filter(|e| !e.is_empty() && !e.contains('\n')) {
        body.push_str(extra);
        body.push('\n');
    }
    if stopped {
        body.push_str(STOPPED_EXTENSION);
        body.push('\n');
    }
    let public_key = from_hex(&signer.public_key_hex())
        .and_then(|k| <[u8; 32]>::try_from(k).ok())
        .ok_or_else(|| {
            TlogError::Malformed("the key is not a 32-byte Ed25519 public key".into())
        })?;
    let signature = from_hex(&signer.sign_checkpoint(body.as_bytes()))
        .filter(|s| s.len() == 64)
        .ok_or_else(|| TlogError::Malformed("the signer gave no Ed25519 signature".into()))?;
    Ok(SignedCheckpoint {
        head,
        body,
        signatures: vec![NoteSignature {
            name: origin.to_owned(),
            key_id: key_id(origin, &public_key),
            signature,
        }],
    })
}

/// The time a checkpoint says it was signed (its `time` extension line), if it says.
pub fn checkpoint_time(checkpoint: &SignedCheckpoint) -> Option<&str> {
    checkpoint
        .body
        .lines()
        .skip(3)
        .find_map(|line| line.strip_prefix(TIME_EXTENSION))
}

/// Whether a checkpoint is the one its writer signed as it stopped ([`STOPPED_EXTENSION`]).
pub fn checkpoint_stopped(checkpoint: &SignedCheckpoint) -> bool {
    checkpoint
        .body
        .lines()
        .skip(3)
        .any(|line| line == STOPPED_EXTENSION)
}

/// The writer a checkpoint's origin names (`capability/<writer>`), if it names one.
pub fn checkpoint_writer(checkpoint: &SignedCheckpoint) -> Option<&str> {
    checkpoint.head.origin.strip_prefix(ORIGIN_PREFIX)
}

/// Resumes `writer`'s tree from its stored records' lines, in `seq` order, checking it against
/// `last`, the writer's last stored checkpoint: the records must hash to its root at its size.
/// Refused, saying what, when they do not (a record rewritten) or are fewer (records cut).
pub fn resume<L: AsRef<[u8]>>(
    writer: &str,
    lines: impl IntoIterator<Item = L>,
    last: Option<&SignedCheckpoint>,
) -> Result<Frontier, TlogError> {
    let origin = origin(writer)?;
    let mut frontier = Frontier::new();
    let check = |frontier: &Frontier, last: &SignedCheckpoint| {
        if frontier.root() == last.head.root {
            Ok(())
        } else {
            Err(TlogError::Trail(format!(
                "the stored records of writer {writer:?} do not hash to the root its checkpoint \
                 signs for the tree of {} records: a record among them was rewritten; verify \
                 the trail (`capability audit verify`) before writing to it",
                last.head.size
            )))
        }
    };
    let last = last.filter(|c| c.head.origin == origin);
    if let Some(last) = last.filter(|c| c.head.size == 0) {
        check(&frontier, last)?;
    }
    for line in lines {
        frontier.push(line.as_ref());
        if let Some(last) = last.filter(|c| c.head.size == frontier.size()) {
            check(&frontier, last)?;
        }
    }
    if let Some(last) = last.filter(|c| c.head.size > frontier.size()) {
        return Err(TlogError::Trail(format!(
            "writer {writer:?}'s last stored checkpoint signs a tree of {} records, and {} are \
             stored: records were cut off; verify the trail (`capability audit verify`) before \
             writing to it",
            last.head.size,
            frontier.size()
        )));
    }
    Ok(frontier)
}

/// Checks stored tree checkpoints against stored records, per writer: with `key`, each
/// checkpoint's signature (under its origin); each one's size against the writer's records (a
/// checkpoint beyond them: records cut off) and its root against theirs (another root: a record
/// rewritten, even with the chain's hashes computed again). The problems, by writer.
pub fn verify_trees(
    records: &[AuditRecord],
    checkpoints: &[SignedCheckpoint],
    key: Option<&dyn CheckpointVerifier>,
) -> BTreeMap<String, Vec<ChainProblem>> {
    let mut by_writer: BTreeMap<&str, Vec<&SignedCheckpoint>> = BTreeMap::new();
    let mut problems: BTreeMap<String, Vec<ChainProblem>> = BTreeMap::new();
    for checkpoint in checkpoints {
        match checkpoint_writer(checkpoint) {
            Some(writer) => by_writer.entry(writer).or_default().push(checkpoint),
            None => {
                problems
                    .entry(String::new())
                    .or_default()
                    .push(ChainProblem::BadTreeCheckpoint {
                        size: checkpoint.head.size,
                        why: format!(
                            "its origin {:?} is not a writer's log",
                            checkpoint.head.origin
                        ),
                    })
            }
        }
    }
    for (writer, mine) in by_writer {
        let tree = writer_tree(records, writer);
        let found = problems.entry(writer.to_owned()).or_default();
        for checkpoint in mine {
            let size = checkpoint.head.size;
            if let Some(key) = key
                && let Err(e) = checkpoint.verify(&checkpoint.head.origin, key)
            {
                found.push(ChainProblem::BadTreeCheckpoint {
                    size,
                    why: e.to_string(),
                });
                continue;
            }
            if size > tree.size() {
                found.push(ChainProblem::TreeCut {
                    size,
                    records: tree.size(),
                });
            } else if tree.root(size).ok() != Some(checkpoint.head.root) {
                found.push(ChainProblem::TreeRewritten { size });
            }
        }
        found.dedup();
    }
    problems.retain(|_, p| !p.is_empty());
    problems
}

/// [`verify_jsonl_with_key`](crate::verify_jsonl_with_key), and the trail's tree checkpoints
/// ([`verify_trees`]): their problems are added to the report's `chain_problems`.
pub fn verify_jsonl_with_trees(
    path: &Path,
    key: &dyn CheckpointVerifier,
) -> Result<crate::VerifyReport, AuditError> {
    let mut report = crate::verify_jsonl_with_key(path, key)?;
    let (records, _) = crate::read_jsonl(path)?;
    let (notes, bad) = parse_notes(&report.tree_checkpoints);
    report.chain_problems.extend(bad);
    for (_, found) in verify_trees(&records, &notes, Some(key)) {
        report.chain_problems.extend(found);
    }
    Ok(report)
}

/// Parses stored notes; what does not parse is a problem.
pub fn parse_notes(texts: &[String]) -> (Vec<SignedCheckpoint>, Vec<ChainProblem>) {
    let mut notes = Vec::with_capacity(texts.len());
    let mut bad = Vec::new();
    for text in texts {
        match SignedCheckpoint::parse(text) {
            Ok(note) => notes.push(note),
            Err(e) => bad.push(ChainProblem::BadTreeCheckpoint {
                size: 0,
                why: e.to_string(),
            }),
        }
    }
    (notes, bad)
}

/// A proof that `writer`'s record `seq` is in its tree, under the writer's own stored
/// checkpoint: the latest of `checkpoints` that covers the record and whose root the records
/// still hash to. `None` when no stored checkpoint covers it yet (the next one will), so the
/// caller can fall back to [`prove`](super::trail::prove), which signs one now.
pub fn prove_stored(
    records: &[AuditRecord],
    checkpoints: &[SignedCheckpoint],
    writer: &str,
    seq: u64,
) -> Result<Option<super::proof::TlogProof>, TlogError> {
    let origin = origin(writer)?;
    let tree = writer_tree(records, writer);
    let index = seq
        .checked_sub(1)
        .filter(|&i| i < tree.size())
        .ok_or_else(|| {
            TlogError::Trail(format!(
                "writer {writer:?} has no record {seq} (its records: {})",
                tree.size()
            ))
        })?;
    let covering = checkpoints
        .iter()
        .filter(|c| c.head.origin == origin && c.head.size > index && c.head.size <= tree.size())
        .filter(|c| tree.root(c.head.size).ok() == Some(c.head.root))
        .max_by_key(|c| c.head.size);
    let Some(checkpoint) = covering else {
        return Ok(None);
    };
    let record = super::trail::writer_records(records, writer)
        .into_iter()
        .find(|r| r.seq == seq)
        .ok_or_else(|| TlogError::Trail(format!("writer {writer:?} has no record {seq}")))?;
    Ok(Some(super::proof::TlogProof {
        extra: Some(record.to_line().into_bytes()),
        index,
        proof: tree.inclusion_proof(index, checkpoint.head.size)?,
        checkpoint: checkpoint.clone(),
    }))
}

/// [`prove_jsonl`](super::trail::prove_jsonl), under the writer's own stored checkpoint when
/// there is one: the latest tree checkpoint of the trail that `signer`'s key signed (its key
/// id), that covers the record and that the records still hash to. Otherwise (a trail without
/// tree checkpoints, a record the next checkpoint will cover, another key) under a checkpoint
/// `signer` signs now, as `prove_jsonl` does.
pub fn prove_jsonl_stored(
    path: &Path,
    writer: &str,
    seq: u64,
    signer: &dyn CheckpointSigner,
) -> Result<super::proof::TlogProof, TlogError> {
    let (records, report) =
        crate::verify::read_jsonl(path).map_err(|e| TlogError::Trail(e.to_string()))?;
    let origin = origin(writer)?;
    let public_key = from_hex(&signer.public_key_hex()).and_then(|k| <[u8; 32]>::try_from(k).ok());
    let (Some(public_key), None) = (public_key, &report.problem) else {
        // Refused (a broken trail, a bad key) as `prove_jsonl` refuses it.
        return super::trail::prove_jsonl(path, writer, seq, signer);
    };
    let id = key_id(&origin, &public_key);
    let (notes, _) = parse_notes(&report.tree_checkpoints);
    let mine: Vec<SignedCheckpoint> = notes
        .into_iter()
        .filter(|n| (n.signatures.iter()).any(|s| s.name == origin && s.key_id == id))
        .collect();
    match prove_stored(&records, &mine, writer, seq)? {
        Some(proof) => Ok(proof),
        None => super::trail::prove(&records, writer, seq, signer),
    }
}

/// What a gateway hands the client of a receipt: `writer`'s record `seq` in the JSON Lines
/// trail at `path`, and its proof under the latest tree checkpoint stored in the trail that
/// covers it and that the records still hash to; no proof until such a checkpoint exists (the
/// writer signs the next one within its interval). Nothing is signed here: the proof checks
/// against the writer's key, as [`check_proof`](super::trail::check_proof) does. The record
/// comes first, so the caller can say whose call it was before handing anything out.
///
/// # Errors
///
/// [`TlogError::Trail`] when the trail cannot be read or has no such record.
pub fn prove_jsonl_checkpointed(
    path: &Path,
    writer: &str,
    seq: u64,
) -> Result<(AuditRecord, Option<super::proof::TlogProof>), TlogError> {
    // A line being written when the file is read is not a record yet: the intact ones are.
    let (records, report) =
        crate::verify::read_jsonl(path).map_err(|e| TlogError::Trail(e.to_string()))?;
    let origin = origin(writer)?;
    let record = (records.iter())
        .find(|r| r.writer == writer && r.seq == seq)
        .cloned()
        .ok_or_else(|| TlogError::Trail(format!("writer {writer:?} has no record {seq}")))?;
    let (notes, _) = parse_notes(&report.tree_checkpoints);
    let theirs: Vec<SignedCheckpoint> = (notes.into_iter())
        .filter(|n| n.head.origin == origin)
        .collect();
    let proof = prove_stored(&records, &theirs, writer, seq)?;
    Ok((record, proof))
}
