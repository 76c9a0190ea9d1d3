//! Storing a cosigned tree checkpoint in a JSON Lines trail: one more tree checkpoint line,
//! the same note with the witnesses' cosignature lines (`capability audit witness-submit`).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use crate::AuditError;
use crate::jsonl::TAKEN;
use crate::tlog::SignedCheckpoint;

use super::{TreeCheckpointLine, TreeNote, verify_jsonl};

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
            return Err(fail(format!(
                "{TAKEN}: a cosigned checkpoint is stored in a JSON Lines trail once its writer \
                 has stopped"
            )));
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
