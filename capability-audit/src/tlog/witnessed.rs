//! Writers' checkpoints cosigned by witnesses: each writer's latest tree checkpoint (its
//! copies' cosignatures merged), the writers whose latest one lacks the quorum a verifier
//! requires (`capability audit verify --witness-key`), and storing a cosigned checkpoint in a
//! JSON Lines trail (`capability audit witness-submit`): one more tree checkpoint line, the
//! same note with the witnesses' cosignature lines.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use super::cosignature::WitnessQuorum;
use super::note::SignedCheckpoint;
use super::stored::{checkpoint_time, checkpoint_writer};
use crate::AuditError;
use crate::checkpoint::ChainProblem;
use crate::verify::{TreeCheckpointLine, TreeNote, verify_jsonl};

/// Each writer's latest tree checkpoint among `notes` (the largest tree, then the latest
/// `time`), with the signature lines of every copy of it merged: a cosigned copy is stored as
/// one more note of the same body (`capability audit witness-submit`).
pub fn latest_by_writer(notes: &[SignedCheckpoint]) -> BTreeMap<String, SignedCheckpoint> {
    let mut latest: BTreeMap<String, SignedCheckpoint> = BTreeMap::new();
    for note in notes {
        let Some(writer) = checkpoint_writer(note) else {
            continue;
        };
        match latest.get_mut(writer) {
            Some(kept) if kept.body == note.body => {
                kept.add_signatures(note.signatures.iter().cloned());
            }
            Some(kept) if order(kept) >= order(note) => {}
            _ => {
                latest.insert(writer.to_owned(), note.clone());
            }
        }
    }
    latest
}

fn order(note: &SignedCheckpoint) -> (u64, Option<&str>) {
    (note.head.size, checkpoint_time(note))
}

/// The writers whose latest tree checkpoint ([`latest_by_writer`]) `quorum` refuses, each with
/// a [`ChainProblem::Unwitnessed`] naming the witnesses missing.
pub fn unwitnessed(
    notes: &[SignedCheckpoint],
    quorum: &WitnessQuorum<'_>,
) -> BTreeMap<String, Vec<ChainProblem>> {
    latest_by_writer(notes)
        .into_iter()
        .filter_map(|(writer, note)| {
            let why = quorum.check(&note).err()?.to_string();
            let size = note.head.size;
            Some((writer, vec![ChainProblem::Unwitnessed { size, why }]))
        })
        .collect()
}

/// Appends `note` to the trail at `path` as a tree checkpoint line. Refused while the trail's
/// writer has it open (its lock: the line would land between its own), for a trail that is not
/// intact, and for a note whose body is not one of the trail's tree checkpoints: only the
/// writer's own checkpoints are stored again, with more signature lines.
pub fn append_tree_note(path: &Path, note: &SignedCheckpoint) -> Result<(), AuditError> {
    let fail = |message: String| AuditError::Io {
        path: path.display().to_string(),
        message,
    };
    let mut options = OpenOptions::new();
    options.append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let mut file = options.open(path).map_err(|e| fail(e.to_string()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(fail(
                "another writer has this trail open: a cosigned checkpoint is stored in a JSON \
                 Lines trail once its writer has stopped"
                    .to_owned(),
            ));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(fail(format!("cannot lock it for writing: {e}")));
        }
    }
    let report = verify_jsonl(path)?;
    if let Some(problem) = report.problem {
        return Err(AuditError::Broken {
            path: path.display().to_string(),
            problem,
        });
    }
    let known = report
        .tree_checkpoints
        .iter()
        .filter_map(|text| SignedCheckpoint::parse(text).ok())
        .any(|stored| stored.body == note.body);
    if !known {
        return Err(fail(format!(
            "the tree of {} records is not one of the trail's tree checkpoints",
            note.head.size
        )));
    }
    let line = TreeCheckpointLine {
        tree_checkpoint: TreeNote {
            note: note.to_text(),
            v: 1,
        },
    };
    let mut bytes = line.to_line().into_bytes();
    bytes.push(b'\n');
    file.write_all(&bytes)
        .and_then(|()| file.sync_data())
        .map_err(|e| fail(e.to_string()))
}
