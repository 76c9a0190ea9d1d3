//! The committer's tree (`capability_audit::tlog::stored`): advanced by each batch it commits,
//! resumed when a failed commit had reached the database; a tree checkpoint signed whenever the
//! interval passes with none, idle or not (`capability_audit::tlog::gaps`), and the one it
//! signs as its writer stops, marked `stopped`.

use std::time::Duration;

use std::sync::Arc;

use capability_audit::jsonl::CheckpointFeed;
use capability_audit::tlog::writers::PendingCheckpoint;
use capability_audit::tlog::{Frontier, Hash, SignedCheckpoint, leaf_hash};
use capability_audit::{AuditRecord, Checkpoint, utc_now_after};

use super::super::{rows, tree};
use super::Committer;

/// Where the committer's tree checkpoints go once stored, with the leaves committed since.
pub(super) struct Fed {
    pub(super) feed: Arc<dyn CheckpointFeed>,
    /// The index of the first leaf in `leaves`.
    pub(super) first: u64,
    pub(super) leaves: Vec<Hash>,
}

impl Committer {
    /// Keeps the leaves of `batch`, committed, and hands `signed`, a tree checkpoint just
    /// stored, to the feed with the leaves since the last.
    pub(super) fn fed(&mut self, batch: &[AuditRecord], signed: Option<SignedCheckpoint>) {
        if let Some(note) = &signed {
            self.noted = capability_audit::tlog::checkpoint_time(note).map(str::to_owned);
        }
        let Some(fed) = &mut self.feed else { return };
        if let Some(first) = batch.first() {
            // After a commit reported failed that reached the database, the leaves do not
            // follow: the feed's next proof is then read from the store.
            if fed.first + fed.leaves.len() as u64 != first.seq - 1 {
                (fed.first, fed.leaves) = (first.seq - 1, Vec::new());
            }
            let lines = batch.iter().map(|r| leaf_hash(r.to_line().as_bytes()));
            fed.leaves.extend(lines);
        }
        if let Some(note) = signed {
            let (first, leaves) = (fed.first, std::mem::take(&mut fed.leaves));
            fed.first += leaves.len() as u64;
            fed.feed.written(&note, first, leaves);
        }
    }

    /// The tree once `batch` commits (resumed first if a failed commit reached the database).
    pub(super) fn advance(&mut self, batch: &[AuditRecord]) -> Option<Frontier> {
        let signer = self.checkpoints.as_ref()?.0.clone();
        if let Some(ahead) = tree::advance(self.tree.as_ref()?, batch) {
            return Some(ahead);
        }
        let resumed = self.with_client(|c, _| tree::open(c, &batch[0].writer, &*signer));
        if let Ok(Ok(Ok(tree))) = resumed {
            self.tree = tree;
        }
        tree::advance(self.tree.as_ref()?, batch)
    }

    /// How long the committer waits for records before it looks whether an idle checkpoint is
    /// due: `None` when it keeps no tree.
    pub(super) fn idle_tick(&self) -> Option<Duration> {
        let (_, schedule) = self.checkpoints.as_ref()?;
        self.tree.as_ref()?;
        let tick = schedule.every().interval / 4;
        Some(tick.clamp(Duration::from_millis(10), Duration::from_secs(1)))
    }

    /// Signs and writes a tree checkpoint of what is committed when the interval passed with
    /// none (nothing is being written: the committer is the only writer).
    pub(super) fn idle(&mut self) {
        let (Some((signer, schedule)), Some(tree)) = (&self.checkpoints, &self.tree) else {
            return;
        };
        if !schedule.idle_due() {
            return;
        }
        let size = tree.committed().size();
        let note = PendingCheckpoint::new(
            tree,
            tree.committed(),
            &utc_now_after(self.noted.as_deref()),
        );
        let signer = signer.clone();
        let writer = tree.origin().trim_start_matches("capability/").to_owned();
        // Records committed since the chain's last checkpoint: one for the chain too, so that a
        // writer still running verifies (`audit verify --key`) without waiting for a record.
        let (seq, head) = {
            let state = super::lock(&self.shared.state);
            let (seq, head) = state.head.committed();
            (seq, head.to_owned())
        };
        let chain = (seq > self.checkpointed && seq == size)
            .then(|| Checkpoint::sign(&writer, seq, &head, signer.as_ref()));
        let written = self.with_client(|client, _| {
            let mut tx = client.transaction()?;
            if let Some(chain) = &chain {
                rows::insert_checkpoint(&mut tx, chain)?;
            }
            let signed = tree::sign_and_insert(&mut tx, &writer, &note, signer.as_ref())?;
            tx.commit().map(|()| signed)
        });
        match written {
            Ok(Ok(signed)) => {
                if chain.is_some() {
                    self.checkpointed = seq;
                }
                self.fed(&[], signed);
            }
            _ => tracing::error!(writer = %writer, "idle checkpoint not written"),
        }
        // Tried: the next one an interval later, written or not (a server that does not answer
        // is not asked every tick; the span without a checkpoint stays a finding).
        if let Some((_, schedule)) = &mut self.checkpoints {
            schedule.written(size);
        }
    }

    /// Signs and writes the checkpoints of a closing writer: the chain's, unless one already
    /// vouches for its last record, and the tree's, marked `stopped` (its last on purpose).
    pub(super) fn final_checkpoint(&mut self, writer: &str, seq: u64, head: &str) {
        let Some((signer, _)) = &self.checkpoints else {
            return;
        };
        let signer = signer.clone();
        let checkpoint = (seq > 0 && seq > self.checkpointed)
            .then(|| Checkpoint::sign(writer, seq, head, signer.as_ref()));
        let note = (self.tree.as_ref())
            .filter(|t| t.committed().size() == seq)
            .map(|t| {
                PendingCheckpoint::stopped(t, t.committed(), &utc_now_after(self.noted.as_deref()))
            });
        if checkpoint.is_none() && note.is_none() {
            return;
        }
        let written = self.with_client(|client, _| {
            let mut tx = client.transaction()?;
            if let Some(checkpoint) = &checkpoint {
                rows::insert_checkpoint(&mut tx, checkpoint)?;
            }
            let mut signed = None;
            if let Some(note) = &note {
                signed = tree::sign_and_insert(&mut tx, writer, note, signer.as_ref())?;
            }
            tx.commit().map(|()| signed)
        });
        if let Ok(Ok(signed)) = written {
            if checkpoint.is_some() {
                self.checkpointed = seq;
            }
            self.fed(&[], signed);
        }
    }
}
