//! The JSON Lines sink's checkpoints: the chain's (`{"checkpoint":{...}}`) and, beside it, the
//! tree's (`{"tree_checkpoint":{...}}`, a C2SP signed note over the writer's tree, which the
//! sink keeps as it writes: `tlog::stored`), and resuming that tree when a trail is reopened.

use super::{FileState, JsonlSink};
use crate::tlog::{Frontier, SignedCheckpoint, WriterTree, resume};
use crate::verify::{CheckpointLine, TreeCheckpointLine, TreeNote};
use crate::*;

impl JsonlSink {
    /// Signs a checkpoint of the chain as it is, and one of the tree, and appends their lines
    /// to the buffer.
    pub(super) fn checkpoint(&self, state: &mut FileState) {
        let Some(signer) = &self.signer else { return };
        let seq = state.head.seq();
        let checkpoint = Checkpoint::sign(&self.writer, seq, state.head.hash(), signer.as_ref());
        let mut line = CheckpointLine {
            checkpoint: checkpoint.clone(),
        }
        .to_line()
        .into_bytes();
        line.push(b'\n');
        state.buffer.extend_from_slice(&line);
        if let Some(tree) = &state.tree {
            match tree.sign(tree.sealed(), &checkpoint.time, signer.as_ref()) {
                Ok(note) => {
                    let mut line = TreeCheckpointLine {
                        tree_checkpoint: TreeNote {
                            note: note.to_text(),
                            v: crate::tlog::stored::TREE_LINE_VERSION,
                        },
                    }
                    .to_line()
                    .into_bytes();
                    line.push(b'\n');
                    state.buffer.extend_from_slice(&line);
                    state.last_tree = Some(note);
                }
                Err(error) => tracing::event!(
                    target: "capability::audit",
                    tracing::Level::ERROR,
                    writer = %self.writer,
                    error = %error,
                    "tree checkpoint not signed"
                ),
            }
        }
        state.checkpointed = seq;
        if let Some(schedule) = &mut state.schedule {
            schedule.written(seq);
        }
        tracing::event!(
            target: "capability::audit",
            tracing::Level::INFO,
            writer = %checkpoint.writer,
            seq = checkpoint.seq,
            head = %checkpoint.head,
            time = %checkpoint.time,
            key = %checkpoint.key,
            signature = %checkpoint.signature,
            "checkpoint"
        );
        state.last_checkpoint = Some(checkpoint);
    }

    /// The writer's tree, resumed from the trail's records and checked against its last tree
    /// checkpoint. A trail whose records do not match it (rewritten, cut) stops the sink, saying
    /// so: appending would vouch for the rewrite.
    pub(super) fn resume_tree(&self, state: &mut FileState) {
        if let Err(error) = crate::tlog::origin(&self.writer) {
            tracing::event!(
                target: "capability::audit",
                tracing::Level::WARN,
                writer = %self.writer,
                error = %error,
                "no tree kept for this writer"
            );
            state.tree = None;
            return;
        }
        let resumed = if state.head.seq() == 0 {
            Ok((Frontier::new(), None))
        } else {
            crate::verify::read_jsonl(&self.path)
                .map_err(|e| e.to_string())
                .and_then(|(records, report)| {
                    let last = report
                        .tree_checkpoints
                        .last()
                        .map(|text| SignedCheckpoint::parse(text))
                        .transpose()
                        .map_err(|e| format!("its last tree checkpoint: {e}"))?;
                    let lines = records.iter().map(AuditRecord::to_line);
                    resume(&self.writer, lines, last.as_ref())
                        .map(|frontier| (frontier, last))
                        .map_err(|e| e.to_string())
                })
        };
        match resumed.and_then(|(frontier, last)| {
            WriterTree::new(&self.writer, frontier)
                .map(|tree| (tree, last))
                .map_err(|e| e.to_string())
        }) {
            Ok((tree, last)) => {
                state.tree = Some(tree);
                state.last_tree = last;
            }
            Err(why) => {
                tracing::event!(
                    target: "capability::audit",
                    tracing::Level::ERROR,
                    path = %self.path.display(),
                    error = %why,
                    "the writer's tree cannot be resumed"
                );
                state.tree = None;
                if state.head.seq() > 0 {
                    state.broken = Some(format!("the writer's tree cannot be resumed: {why}"));
                }
            }
        }
    }

    /// The last tree checkpoint this sink signed (or found in the file when it opened).
    pub fn last_tree_checkpoint(&self) -> Option<SignedCheckpoint> {
        lock(&self.state).last_tree.clone()
    }
}
