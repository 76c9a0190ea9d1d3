//! A writer's records as a tree: proofs made from a trail, and checked against it.
//!
//! Leaf `i` of writer `w`'s tree is its record `seq = i + 1`, the leaf data the record's line
//! exactly as a JSON Lines trail stores it (its canonical JSON, without the newline); the log's
//! origin, and the checkpoint key's name, is `capability/<w>`.

use std::path::Path;

use super::cosignature::WitnessQuorum;
use super::error::TlogError;
use super::hash::Hash;
use super::note::{SignedCheckpoint, TreeHead, check_key_name};
use super::proof::TlogProof;
use super::rotation::LogKeys;
use super::tree::Tree;
use super::verify::verify_consistency;
use crate::checkpoint::{CheckpointSigner, CheckpointVerifier};
use crate::record::AuditRecord;

/// How a writer's log is named: `capability/<writer>`.
pub const ORIGIN_PREFIX: &str = "capability/";

/// The origin of `writer`'s log; refused when the writer id cannot name a key (spaces, `+`).
pub fn origin(writer: &str) -> Result<String, TlogError> {
    let origin = format!("{ORIGIN_PREFIX}{writer}");
    check_key_name(&origin)?;
    Ok(origin)
}

/// `writer`'s records in `records`, by `seq`.
pub fn writer_records<'a>(records: &'a [AuditRecord], writer: &str) -> Vec<&'a AuditRecord> {
    let mut mine: Vec<&AuditRecord> = records.iter().filter(|r| r.writer == writer).collect();
    mine.sort_by_key(|r| r.seq);
    mine
}

/// The tree over `writer`'s records, by `seq`.
pub fn writer_tree(records: &[AuditRecord], writer: &str) -> Tree {
    let mut tree = Tree::new();
    for record in writer_records(records, writer) {
        tree.push(record.to_line().as_bytes());
    }
    tree
}

/// A proof that `writer`'s record `seq` is in its tree as it is now (every record of the
/// writer in `records`), under a checkpoint signed by `signer`.
pub fn prove(
    records: &[AuditRecord],
    writer: &str,
    seq: u64,
    signer: &dyn CheckpointSigner,
) -> Result<TlogProof, TlogError> {
    let origin = origin(writer)?;
    let mine = writer_records(records, writer);
    let index = mine.iter().position(|r| r.seq == seq).ok_or_else(|| {
        TlogError::Trail(format!(
            "writer {writer:?} has no record {seq} (its records: {})",
            mine.len()
        ))
    })?;
    let mut tree = Tree::new();
    for record in &mine {
        tree.push(record.to_line().as_bytes());
    }
    let size = tree.size();
    let head = TreeHead {
        origin,
        size,
        root: tree.root(size)?,
    };
    Ok(TlogProof {
        extra: Some(mine[index].to_line().into_bytes()),
        index: index as u64,
        proof: tree.inclusion_proof(index as u64, size)?,
        checkpoint: head.sign(signer)?,
    })
}

/// Reads a record's reference, `<writer>:<seq>` (the writer id may hold colons).
pub fn parse_record_ref(text: &str) -> Result<(&str, u64), TlogError> {
    text.rsplit_once(':')
        .and_then(|(writer, seq)| Some((writer, seq.parse::<u64>().ok()?)))
        .ok_or_else(|| {
            TlogError::Malformed(format!(
                "{text:?} is not a record: <writer>:<seq>, e.g. replica-1:12"
            ))
        })
}

/// [`prove`] for a JSON Lines trail, refused when the trail is not intact up to its end (a
/// tree over part of a trail would vouch for what `audit verify` calls broken).
pub fn prove_jsonl(
    path: &Path,
    writer: &str,
    seq: u64,
    signer: &dyn CheckpointSigner,
) -> Result<TlogProof, TlogError> {
    let (records, report) =
        crate::verify::read_jsonl(path).map_err(|e| TlogError::Trail(e.to_string()))?;
    if let Some(problem) = report.problem {
        return Err(TlogError::Trail(format!(
            "{}: {problem}: only an intact trail is proved (`capability audit verify`)",
            path.display()
        )));
    }
    prove(&records, writer, seq, signer)
}

/// The tree of the log `origin` (`capability/<writer>`) over a JSON Lines trail's intact records.
pub fn writer_tree_jsonl(path: &Path, origin: &str) -> Result<Tree, TlogError> {
    let (records, _) =
        crate::verify::read_jsonl(path).map_err(|e| TlogError::Trail(e.to_string()))?;
    let writer = origin.strip_prefix(ORIGIN_PREFIX).unwrap_or(origin);
    Ok(writer_tree(&records, writer))
}

/// The record a proof was checked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProvenRecord {
    /// Its writer (from the checkpoint's origin).
    pub writer: String,
    /// Its `seq`.
    pub seq: u64,
    /// The size of the signed tree it is in.
    pub size: u64,
    /// The signed root, base64.
    pub root: String,
}

/// Checks a proof file on its own: the checkpoint signed by `key` (its origin as key name), the
/// record (`record`: its line, or else the proof's `extra`) at its index of the signed tree,
/// and that the record is the writer's record at that index. With `record`, a proof whose
/// `extra` holds another record is refused as being for another record.
///
/// This proves that the key's holder signed a tree holding this record. It cannot prove that
/// the holder signed no other tree of the same size: compare checkpoints
/// ([`check_consistency`]), or have a witness co-sign them.
pub fn check_proof(
    proof: &TlogProof,
    key: &dyn CheckpointVerifier,
    record: Option<&str>,
) -> Result<ProvenRecord, TlogError> {
    let leaf: &[u8] = match (record, &proof.extra) {
        (Some(given), Some(extra)) if given.as_bytes() != extra.as_slice() => {
            return Err(TlogError::OtherRecord {
                proof_is_for: describe(extra),
            });
        }
        (Some(given), _) => given.as_bytes(),
        (None, Some(extra)) => extra,
        (None, None) => {
            return Err(TlogError::Malformed(
                "the proof holds no record (no extra line): give the record's line".into(),
            ));
        }
    };
    let head = &proof.checkpoint.head;
    let writer = head
        .origin
        .strip_prefix(ORIGIN_PREFIX)
        .ok_or_else(|| {
            TlogError::Malformed(format!(
                "the checkpoint's origin {:?} is not a writer's log ({ORIGIN_PREFIX}<writer>)",
                head.origin
            ))
        })?
        .to_owned();
    let verified = proof.verify(leaf, key);
    if let (Err(TlogError::NotIncluded { .. }), Some(extra)) = (&verified, &proof.extra)
        && record.is_some_and(|r| r.as_bytes() == extra.as_slice())
    {
        // The record given is the proof's own: the hashes were altered.
        return Err(TlogError::NotIncluded {
            index: proof.index,
            size: head.size,
        });
    }
    verified?;
    let parsed: AuditRecord = serde_json::from_slice(leaf)
        .map_err(|e| TlogError::Malformed(format!("the proved leaf is not a record: {e}")))?;
    if parsed.writer != writer || parsed.seq != proof.index + 1 {
        return Err(TlogError::OtherRecord {
            proof_is_for: format!(
                "writer {:?} record {} at index {} of {}",
                parsed.writer, parsed.seq, proof.index, head.origin
            ),
        });
    }
    Ok(ProvenRecord {
        writer,
        seq: parsed.seq,
        size: head.size,
        root: super::encoding::base64(&head.root),
    })
}

/// [`check_proof`] against the log's keys over time and the witnesses a verifier trusts: the
/// checkpoint signed by the key whose span holds its size ([`LogKeys::verify`]), the record at
/// its index, and enough of the witnesses' cosignatures ([`WitnessQuorum::check`], which names
/// the missing ones). Says what was shown.
pub fn check_proof_witnessed(
    proof: &TlogProof,
    keys: &LogKeys<'_>,
    witnesses: &WitnessQuorum<'_>,
    record: Option<&str>,
) -> Result<String, TlogError> {
    let proven = check_proof(proof, keys.verify(&proof.checkpoint)?, record)?;
    let cosigned = witnesses.check(&proof.checkpoint)?;
    if cosigned.is_empty() {
        return Ok(proven.to_string());
    }
    let names: Vec<&str> = cosigned.iter().map(|c| c.witness.as_str()).collect();
    Ok(format!("{proven}, cosigned by [{}]", names.join(", ")))
}

impl std::fmt::Display for ProvenRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "writer {} record {} is in the tree of {} records (root {}) signed by the key",
            self.writer, self.seq, self.size, self.root
        )
    }
}

fn describe(line: &[u8]) -> String {
    match serde_json::from_slice::<AuditRecord>(line) {
        Ok(r) => format!("writer {:?} record {}", r.writer, r.seq),
        Err(_) => "a leaf that is not a record".to_owned(),
    }
}

/// Reads a checkpoint from a file's text: a signed checkpoint, or the one inside a proof file.
pub fn read_checkpoint(text: &str) -> Result<SignedCheckpoint, TlogError> {
    if text.starts_with(super::proof::PROOF_HEADER) {
        return TlogProof::parse(text).map(|p| p.checkpoint);
    }
    SignedCheckpoint::parse(text)
}

/// Shows that the tree `new` signs extends the tree `old` signs, from the trail's records:
/// the consistency proof (returned) computed from the trail, and checked against both roots.
/// With `key`, both signatures are checked first.
///
/// Refused, saying what: two logs; a smaller newer tree (a cut); two roots for one size (a
/// fork); a trail shorter than the newer tree (records cut since), or whose records are not the
/// newer tree (rewritten since it was signed); a newer tree that does not extend the older one
/// (records under the older checkpoint rewritten before the newer was signed).
pub fn check_consistency(
    old: &SignedCheckpoint,
    new: &SignedCheckpoint,
    records: &[AuditRecord],
    key: Option<&dyn CheckpointVerifier>,
) -> Result<Vec<Hash>, TlogError> {
    let (o, n) = (&old.head, &new.head);
    if o.origin != n.origin {
        return Err(TlogError::Malformed(format!(
            "the checkpoints are of two logs: {:?} and {:?}",
            o.origin, n.origin
        )));
    }
    if let Some(key) = key {
        old.verify(&o.origin, key)?;
        new.verify(&n.origin, key)?;
    }
    if n.size < o.size {
        return Err(TlogError::Shrunk {
            old_size: o.size,
            new_size: n.size,
        });
    }
    if n.size == o.size && n.root != o.root {
        return Err(TlogError::Fork { size: o.size });
    }
    let writer = o.origin.strip_prefix(ORIGIN_PREFIX).unwrap_or(&o.origin);
    let tree = writer_tree(records, writer);
    if tree.size() < n.size {
        return Err(TlogError::Trail(format!(
            "the trail holds {} records of writer {writer:?}, and the newer checkpoint signs \
             {}: records were cut off since it was signed (or this is another trail)",
            tree.size(),
            n.size
        )));
    }
    if tree.root(n.size)? != n.root {
        return Err(TlogError::Trail(format!(
            "the trail's first {} records of writer {writer:?} are not the tree the newer \
             checkpoint signs: they were rewritten since it was signed",
            n.size
        )));
    }
    if o.size == 0 {
        return Ok(Vec::new());
    }
    let proof = tree.consistency_proof(o.size, n.size)?;
    verify_consistency(o.size, n.size, &o.root, &n.root, &proof)?;
    Ok(proof)
}

/// [`check_consistency`] for two checkpoint files' texts (signed notes or proof files) and a JSON
/// Lines trail. A refusal also names the trail's first broken line, if any.
pub fn check_consistency_jsonl(
    old: &str,
    new: &str,
    path: &Path,
    key: Option<&dyn CheckpointVerifier>,
) -> Result<Extension, TlogError> {
    let (old, new) = (read_checkpoint(old)?, read_checkpoint(new)?);
    let (records, report) =
        crate::verify::read_jsonl(path).map_err(|e| TlogError::Trail(e.to_string()))?;
    match check_consistency(&old, &new, &records, key) {
        Ok(proof) => Ok(Extension {
            origin: old.head.origin,
            old_size: old.head.size,
            new_size: new.head.size,
            signed: key.is_some(),
            proof,
        }),
        Err(e) => Err(match report.problem {
            Some(problem) => TlogError::Trail(format!("{e}; {}: {problem}", path.display())),
            None => e,
        }),
    }
}

/// What [`check_consistency_jsonl`] showed: the newer tree extends the older one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extension {
    /// The log.
    pub origin: String,
    /// The older tree's size.
    pub old_size: u64,
    /// The newer tree's size.
    pub new_size: u64,
    /// Whether both signatures were checked.
    pub signed: bool,
    /// The consistency proof.
    pub proof: Vec<Hash>,
}

impl std::fmt::Display for Extension {
    /// A line saying so, then the proof's hashes in base64, one a line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: the tree of {} records extends the tree of {}{}; consistency proof:",
            self.origin,
            self.new_size,
            self.old_size,
            if self.signed {
                ", both signed by the key"
            } else {
                " (signatures not checked: give the key)"
            }
        )?;
        for hash in &self.proof {
            write!(f, "\n{}", super::encoding::base64(hash))?;
        }
        Ok(())
    }
}
