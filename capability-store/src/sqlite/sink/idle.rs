//! Checkpoints when idle: a sink that signs checkpoints also signs a tree checkpoint whenever
//! its interval passes with none (`capability_audit::tlog::gaps`), on a timer thread of its own
//! that holds the sink weakly (it ends within a tick of the sink's drop), and marks the
//! checkpoint it signs as it closes `stopped`. So a span without checkpoints is a finding.

use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use capability_audit::Checkpoint;
use capability_audit::tlog::SignedCheckpoint;
use capability_audit::tlog::writers::PendingCheckpoint;

use super::{SqliteSink, State, write};

/// How often the timer looks (the interval's quarter, at most a second).
fn tick(interval: Duration) -> Duration {
    (interval / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// Starts `sink`'s idle timer, when it signs checkpoints.
pub(crate) fn keep_idle_checkpoints(sink: &Arc<SqliteSink>) {
    let interval = {
        let state = sink.state();
        match (&sink.signer, &state.schedule, &state.tree) {
            (Some(_), Some(schedule), Some(_)) => schedule.every().interval,
            _ => return,
        }
    };
    let weak: Weak<SqliteSink> = Arc::downgrade(sink);
    let spawned = std::thread::Builder::new()
        .name("capability-sqlite-idle-checkpoints".to_owned())
        .spawn(move || {
            loop {
                std::thread::sleep(tick(interval));
                match weak.upgrade() {
                    Some(sink) if sink.idle_tick() => {}
                    _ => return,
                }
            }
        });
    if let Err(error) = spawned {
        tracing::error!(error = %error, "no idle checkpoints: the timer thread did not start");
    }
}

impl SqliteSink {
    /// Signs and writes a tree checkpoint of what is committed when the interval passed with
    /// none and nothing is being written; `false` once the sink is closed.
    fn idle_tick(&self) -> bool {
        let mut state = self.state();
        if state.closed {
            return false;
        }
        let idle = state.queue.is_empty() && !state.committing;
        let due = state.schedule.as_ref().is_some_and(|s| s.idle_due());
        let (Some(signer), Some(tree), true) = (&self.signer, &state.tree, idle && due) else {
            return true;
        };
        let time = capability_audit::utc_now_after(state.noted.as_deref());
        let note = PendingCheckpoint::new(tree, tree.committed(), &time);
        // Records committed since the chain's last checkpoint: one for the chain too, so that a
        // writer still running verifies (`audit verify --key`) without waiting for a record.
        let (seq, head) = state.head.committed();
        let chain = (seq > state.checkpointed)
            .then(|| Checkpoint::sign(&self.writer, seq, head, signer.as_ref()));
        // The state stays locked: no commit starts meanwhile (one is led under this lock).
        let written = {
            let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
            write(
                &mut conn,
                &[],
                chain.as_ref(),
                Some((&note, signer.as_ref())),
            )
        };
        match written {
            Ok(signed) => {
                if chain.is_some() {
                    state.checkpointed = seq;
                }
                self.fed(&mut state, signed);
            }
            Err(error) => {
                tracing::error!(writer = %self.writer, error = %error, "idle checkpoint not written")
            }
        }
        // Tried: the next one an interval later, written or not (the span without a checkpoint
        // stays a finding).
        let seq = state.head.committed().0;
        if let Some(schedule) = &mut state.schedule {
            schedule.written(seq);
        }
        true
    }

    /// Hands `signed`, a tree checkpoint just stored, to the feed with the leaves committed
    /// since the last.
    pub(super) fn fed(&self, state: &mut State, signed: Option<SignedCheckpoint>) {
        if let Some(note) = &signed {
            state.noted = capability_audit::tlog::checkpoint_time(note).map(str::to_owned);
        }
        if let (Some(feed), Some(note), Some(tree)) = (&self.feed, signed, &mut state.tree) {
            let (first, leaves) = tree.take_leaves();
            feed.written(&note, first, leaves);
        }
    }

    /// The tree checkpoint of a writer that stops (marked `stopped`), of what is committed:
    /// signed as it is written.
    pub(super) fn stopped_note(&self, state: &State) -> Option<PendingCheckpoint> {
        self.signer.as_ref()?;
        let tree = state.tree.as_ref()?;
        let time = capability_audit::utc_now_after(state.noted.as_deref());
        Some(PendingCheckpoint::stopped(tree, tree.committed(), &time))
    }
}
