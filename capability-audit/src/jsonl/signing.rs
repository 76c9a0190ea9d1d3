//! The JSON Lines sink's checkpoints: the chain's (`{"checkpoint":{...}}`) and, beside it, the
//! tree's (`{"tree_checkpoint":{...}}`, a C2SP signed note over the writer's tree, which the
//! sink keeps as it writes: `tlog::stored`), and resuming that tree when a trail is reopened.

use super::{FileState, JsonlSink};
use crate::tlog::{Frontier, SignedCheckpoint, WriterTree, resume};
use crate::verify::{CheckpointLine, TreeCheckpointLine, TreeNote};
use crate::*;

impl JsonlSink {
    /// Signs a checkpoint of the chain as it is, and one of the tree (marked `stopped` when the
    /// sink closes), and appends their lines to the buffer.
    pub(super) fn checkpoint(&self, state: &mut FileState, stopped: bool) {
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
        self.tree_line(state, &checkpoint.time, stopped);
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

    /// Signs a checkpoint of the tree as sealed (marked `stopped` when the sink closes) and
    /// appends its line to the buffer.
    pub(super) fn tree_line(&self, state: &mut FileState, time: &str, stopped: bool) {
        let (Some(signer), Some(tree)) = (&self.signer, &mut state.tree) else {
            return;
        };
        tree.release();
        let signed = if stopped {
            tree.sign_stopped(tree.sealed(), time, signer.as_ref())
        } else {
            tree.sign(tree.sealed(), time, signer.as_ref())
        };
        match signed {
            Ok(note) => {
                state.buffer.extend_from_slice(&tree_line(&note));
                if state.feed.is_some() {
                    state.fed = Some(note.clone());
                }
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

    /// Signs and writes a tree checkpoint when the interval passed with none and nothing is
    /// buffered (a writer idle: [`keep_idle_checkpoints`] calls this on a timer), so that a
    /// span without checkpoints is a finding (`tlog::checkpoint_gaps`). `Ok(false)` once the
    /// sink is closed (or keeps no tree).
    pub fn idle_checkpoint(&self) -> Result<bool, AuditError> {
        let mut state = lock(&self.state);
        if state.closed || state.broken.is_some() || state.tree.is_none() {
            return Ok(false);
        }
        let due = state
            .schedule
            .as_ref()
            .is_some_and(CheckpointSchedule::idle_due);
        if !due || !state.buffer.is_empty() {
            return Ok(true);
        }
        let seq = state.head.seq();
        if seq > state.checkpointed {
            // Records came since the chain's last checkpoint: one for the chain too, so that a
            // trail still written verifies (`audit verify --key`) without waiting for the next
            // record.
            self.checkpoint(&mut state, false);
        } else {
            self.tree_line(&mut state, &utc_now(), false);
        }
        if let Some(schedule) = &mut state.schedule {
            schedule.written(seq);
        }
        self.write_out(&mut state).map(|()| true)
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

/// A tree checkpoint's line in the trail (with its newline), as the writer writes it.
pub(super) fn tree_line(note: &SignedCheckpoint) -> Vec<u8> {
    let mut line = TreeCheckpointLine {
        tree_checkpoint: TreeNote {
            note: note.to_text(),
            v: crate::tlog::stored::TREE_LINE_VERSION,
        },
    }
    .to_line()
    .into_bytes();
    line.push(b'\n');
    line
}

/// Starts `sink`'s idle checkpoints: a thread that holds it weakly and calls
/// [`JsonlSink::idle_checkpoint`] a few times an interval, until the sink is closed or dropped.
/// For a sink that signs checkpoints (`with_checkpoints`); nothing otherwise.
pub fn keep_idle_checkpoints(sink: &std::sync::Arc<JsonlSink>) {
    let Some(every) = lock(&sink.state)
        .schedule
        .as_ref()
        .map(CheckpointSchedule::every)
    else {
        return;
    };
    let tick = (every.interval / 4).clamp(
        std::time::Duration::from_millis(10),
        std::time::Duration::from_secs(1),
    );
    let weak = std::sync::Arc::downgrade(sink);
    let spawned = std::thread::Builder::new()
        .name("capability-jsonl-idle-checkpoints".to_owned())
        .spawn(move || {
            loop {
                std::thread::sleep(tick);
                let Some(sink) = weak.upgrade() else { return };
                match sink.idle_checkpoint() {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(error) => tracing::event!(
                        target: "capability::audit",
                        tracing::Level::ERROR,
                        error = %error,
                        "idle checkpoint not written"
                    ),
                }
            }
        });
    if let Err(error) = spawned {
        tracing::event!(
            target: "capability::audit",
            tracing::Level::ERROR,
            error = %error,
            "no idle checkpoints: the timer thread did not start"
        );
    }
}
