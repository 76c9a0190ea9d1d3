//! A JSON Lines writer's checkpoints handed, as it writes them, to whoever takes them to
//! witnesses ([`CheckpointFeed`]), with the leaf hashes since (so that the consistency proof
//! from the size a witness holds needs no reading of the trail), and the cosigned checkpoints
//! it is given back stored beside the records, as `capability audit witness-submit` stores
//! them: one more tree checkpoint line, the same note with the witnesses' cosignature lines.

use std::sync::Arc;

use super::{FileState, JsonlSink};
use crate::tlog::{Frontier, Hash, SignedCheckpoint};
use crate::*;

/// Takes a writer's tree checkpoints as they are written, for witnesses to cosign. Called
/// with the sink's lock held: an implementation only queues (never waits for a witness).
pub trait CheckpointFeed: Send + Sync + std::fmt::Debug {
    /// The tree as it is when the feed starts: the leaves handed later follow it.
    fn start(&self, frontier: &Frontier);
    /// A tree checkpoint written to the trail, and the hashes of the leaves written since the
    /// last call (or [`start`](Self::start)), the first of them at index `first`: they may
    /// run past the checkpoint's size (records written with it).
    fn written(&self, checkpoint: &SignedCheckpoint, first: u64, leaves: Vec<Hash>);
}

impl JsonlSink {
    /// Hands each tree checkpoint written from now on to `feed`, with the leaf hashes since
    /// (32 bytes a record, kept between two checkpoints). `Ok(false)` for a sink that signs no
    /// tree checkpoints (nothing to feed).
    pub fn feed_checkpoints(&self, feed: Arc<dyn CheckpointFeed>) -> Result<bool, AuditError> {
        let mut state = lock(&self.state);
        if let Some(error) = self.refusing(&state) {
            return Err(error);
        }
        self.write_out(&mut state)?;
        let Some(tree) = &mut state.tree else {
            return Ok(false);
        };
        // Everything sealed is written: the tree is whole, no leaf held back.
        tree.release();
        tree.commit();
        tree.keep_leaves();
        feed.start(tree.sealed());
        state.feed = Some(feed);
        Ok(true)
    }

    /// Hands the tree checkpoint just written, if one was, to the feed, with the leaves since.
    pub(super) fn deliver(&self, state: &mut FileState) {
        let (Some(note), Some(feed), Some(tree)) = (state.fed.take(), &state.feed, &mut state.tree)
        else {
            return;
        };
        let (first, leaves) = tree.take_leaves();
        feed.written(&note, first, leaves);
    }

    /// Stores `note`, one of this writer's tree checkpoints with witnesses' cosignature lines
    /// added, as one more tree checkpoint line. `Ok(false)` once the sink is closed (run
    /// `capability audit witness-submit` on the stopped trail); refused for a note of another
    /// log or of a tree larger than the one written.
    pub fn store_cosigned(&self, note: &SignedCheckpoint) -> Result<bool, AuditError> {
        let mut state = lock(&self.state);
        if state.closed {
            return Ok(false);
        }
        if let Some(error) = self.refusing(&state) {
            return Err(error);
        }
        let Some(tree) = &state.tree else {
            return Ok(false);
        };
        if tree.origin() != note.head.origin || note.head.size > state.head.seq() {
            return Err(AuditError::InvalidRecord {
                message: format!(
                    "the cosigned checkpoint cannot be stored: the checkpoint of {} ({} \
                     records) is not one of this writer's",
                    note.head.origin, note.head.size
                ),
            });
        }
        state
            .buffer
            .extend_from_slice(&super::signing::tree_line(note));
        self.write_out(&mut state).map(|()| true)
    }
}
