//! A writer's checkpoints submitted to witnesses while it writes: one thread per witness, at
//! most one submission in flight to each, a newer checkpoint replacing a pending older one, so
//! a witness down or slow never holds a call (the writer only queues, [`CheckpointFeed`]).
//!
//! The consistency proof from the size a witness holds is computed from what the writer hands
//! over with each checkpoint ([`Growth`]: the frontier at that size and the leaf hashes since),
//! never from the trail, except once when the witness holds a size this feed has no frontier
//! for (a checkpoint of an earlier run, its 409): then the trail's records are read, as `capability
//! audit witness-submit` does, and the feed goes on from the size cosigned.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use capability_audit::jsonl::CheckpointFeed;
use capability_audit::tlog::{AddCheckpoint, Frontier, Growth, Hash, SignedCheckpoint, Tree};

use super::{ClientError, add_checkpoint};

/// The most leaf hashes kept for one witness (32 bytes each: 8 MiB): past it, a witness
/// that has cosigned nothing for that long gets its next proof from the trail.
pub const MAX_KEPT: usize = 1 << 18;

/// Stores a cosigned checkpoint beside the writer's records: `Ok(false)` when it no longer
/// can (the writer stopped).
pub type StoreCosigned = dyn Fn(&SignedCheckpoint) -> Result<bool, String> + Send + Sync;

/// Reads the tree of the log of this origin from the trail's records (the fallback: a witness
/// holding a size the feed has no frontier for).
pub type ReadTree = dyn Fn(&str) -> Result<Tree, String> + Send + Sync;

/// [`ReadTree`] for the JSON Lines trail at `path`.
pub fn jsonl_tree(path: PathBuf) -> Arc<ReadTree> {
    Arc::new(move |origin: &str| {
        capability_audit::tlog::writer_tree_jsonl(&path, origin).map_err(|e| e.to_string())
    })
}

/// A [`CheckpointFeed`] that has each witness cosign each checkpoint written, in the
/// background, and stores each cosigned one with `store`.
pub struct WitnessFeed {
    slots: Vec<Arc<Slot>>,
}

impl std::fmt::Debug for WitnessFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<&str> = self.slots.iter().map(|s| s.url.as_str()).collect();
        f.debug_struct("WitnessFeed")
            .field("witnesses", &urls)
            .finish()
    }
}

struct Slot {
    url: String,
    job: Mutex<Job>,
    wake: Condvar,
}

/// What a witness's thread has to do next.
#[derive(Default)]
struct Job {
    start: Option<Frontier>,
    /// The latest checkpoint not yet submitted (a newer one replaces it).
    note: Option<SignedCheckpoint>,
    /// Leaf hashes handed over since the thread last looked, the first at index `first`.
    first: u64,
    leaves: Vec<Hash>,
    /// Leaves were dropped (over [`MAX_KEPT`]): the next proof is read from the trail.
    lost: bool,
    closed: bool,
}

fn lock(slot: &Slot) -> MutexGuard<'_, Job> {
    slot.job
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl WitnessFeed {
    /// Starts a thread for each witness of `urls` (its submission prefix) submitting the
    /// checkpoints it is fed; each cosigned one is given to `store`; `read_tree` reads the
    /// log's tree from the trail when a proof cannot be made from what was fed.
    pub fn start(
        urls: &[String],
        read_tree: Arc<ReadTree>,
        store: Arc<StoreCosigned>,
    ) -> WitnessFeed {
        let mut slots = Vec::new();
        for url in urls {
            let slot = Arc::new(Slot {
                url: url.clone(),
                job: Mutex::new(Job::default()),
                wake: Condvar::new(),
            });
            let worker = Worker {
                slot: slot.clone(),
                read_tree: read_tree.clone(),
                store: store.clone(),
                held: None,
                growth: None,
                end: 0,
            };
            let spawned = std::thread::Builder::new()
                .name("capability-witness-feed".to_owned())
                .spawn(move || worker.run());
            match spawned {
                Ok(_) => slots.push(slot),
                Err(error) => tracing::warn!(
                    target: "capability_http::witness",
                    witness = %url,
                    error = %error,
                    "checkpoints not submitted to this witness: its thread did not start"
                ),
            }
        }
        WitnessFeed { slots }
    }
}

impl CheckpointFeed for WitnessFeed {
    fn start(&self, frontier: &Frontier) {
        for slot in &self.slots {
            let mut job = lock(slot);
            job.start = Some(frontier.clone());
            job.first = frontier.size();
            job.leaves.clear();
        }
    }

    fn written(&self, checkpoint: &SignedCheckpoint, first: u64, leaves: Vec<Hash>) {
        for slot in &self.slots {
            let mut job = lock(slot);
            if job.leaves.is_empty() {
                job.first = first;
            } else if job.first + job.leaves.len() as u64 != first {
                job.lost = true;
                job.leaves.clear();
                job.first = first;
            }
            job.leaves.extend_from_slice(&leaves);
            if job.leaves.len() > MAX_KEPT {
                job.lost = true;
                job.first += job.leaves.len() as u64;
                job.leaves.clear();
            }
            job.note = Some(checkpoint.clone());
            slot.wake.notify_one();
        }
    }
}

impl Drop for WitnessFeed {
    fn drop(&mut self) {
        for slot in &self.slots {
            lock(slot).closed = true;
            slot.wake.notify_one();
        }
    }
}

struct Worker {
    slot: Arc<Slot>,
    read_tree: Arc<ReadTree>,
    store: Arc<StoreCosigned>,
    /// The size the witness holds, once known.
    held: Option<u64>,
    /// The frontier at a size and the leaves since, when known.
    growth: Option<Growth>,
    /// The size of the tree with every leaf handed over.
    end: u64,
}

impl Worker {
    fn run(mut self) {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                self.warn(&format!("no async runtime: {error}"));
                return;
            }
        };
        loop {
            let slot = self.slot.clone();
            let note = {
                let mut job = lock(&slot);
                while job.note.is_none() && !job.closed {
                    job = (slot.wake.wait(job)).unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                let Some(note) = job.note.take() else { return };
                self.take(&mut job);
                note
            };
            runtime.block_on(self.submit(note));
        }
    }

    /// Takes the leaves handed over into the growth kept.
    fn take(&mut self, job: &mut Job) {
        if let Some(frontier) = job.start.take() {
            self.end = frontier.size();
            self.growth = Some(Growth::new(frontier));
        }
        let leaves = std::mem::take(&mut job.leaves);
        // Leaves dropped, or not following those kept: the next proof is read from the trail.
        if std::mem::take(&mut job.lost) || job.first != self.end {
            self.growth = None;
        }
        if let Some(growth) = &mut self.growth {
            growth.extend(leaves.iter().copied());
        }
        self.end = job.first + leaves.len() as u64;
        if self.growth.as_ref().is_some_and(|g| g.kept() > MAX_KEPT) {
            self.growth = None;
        }
    }

    async fn submit(&mut self, mut note: SignedCheckpoint) {
        let size = note.head.size;
        let mut old = self.held.unwrap_or(0);
        for attempt in 0..2 {
            if old > size {
                let why = format!(
                    "it holds a checkpoint of {old} records, newer than this one of {size}"
                );
                return self.warn(&why);
            }
            let (proof, read) = match self.proof(&note.head.origin, old, size) {
                Ok(proof) => proof,
                Err(why) => return self.warn(&why),
            };
            let request = AddCheckpoint {
                old,
                proof,
                checkpoint: note.clone(),
            };
            match add_checkpoint(&self.slot.url, &request).await {
                Ok(lines) => {
                    self.cosigned(size, read);
                    note.add_signatures(lines);
                    return self.stored(&note);
                }
                Err(ClientError::Stale { held, .. }) if attempt == 0 => {
                    self.held = Some(held);
                    old = held;
                }
                Err(error) => return self.warn(&error.to_string()),
            }
        }
    }

    /// The consistency proof from `old` to `size`: from the growth kept when it starts at
    /// `old`, else from the trail's records (the tree read is returned too).
    fn proof(
        &self,
        origin: &str,
        old: u64,
        size: u64,
    ) -> Result<(Vec<Hash>, Option<Tree>), String> {
        if old == 0 || old == size {
            return Ok((Vec::new(), None));
        }
        if let Some(growth) = self.growth.as_ref().filter(|g| g.base() == old) {
            return (growth.consistency_proof(size).map(|p| (p, None))).map_err(|e| e.to_string());
        }
        tracing::info!(
            target: "capability_http::witness",
            witness = %self.slot.url,
            held = old,
            "the witness holds a size with no frontier kept: the proof is read from the trail"
        );
        let tree = (self.read_tree)(origin)
            .map_err(|e| format!("the trail gives no consistency proof from size {old}: {e}"))?;
        let proof = tree
            .consistency_proof(old, size)
            .map_err(|e| format!("the trail gives no consistency proof from size {old}: {e}"))?;
        Ok((proof, Some(tree)))
    }

    /// The witness holds `size` now: the growth goes on from it.
    fn cosigned(&mut self, size: u64, read: Option<Tree>) {
        self.held = Some(size);
        if let Some(tree) = read {
            self.growth = Growth::from_tree(&tree, size, self.end);
        }
        if let Some(growth) = &mut self.growth
            && growth.advance_to(size).is_err()
        {
            self.growth = None;
        }
    }

    fn stored(&self, note: &SignedCheckpoint) {
        match (self.store)(note) {
            Ok(true) => tracing::debug!(
                target: "capability_http::witness",
                witness = %self.slot.url,
                size = note.head.size,
                "checkpoint cosigned and stored"
            ),
            Ok(false) => self.warn(&format!(
                "the checkpoint of {} records was cosigned, and the trail is closed: run \
                 `capability audit witness-submit` on it to store the cosignature",
                note.head.size
            )),
            Err(why) => self.warn(&format!("the cosigned checkpoint is not stored: {why}")),
        }
    }

    fn warn(&self, why: &str) {
        tracing::warn!(
            target: "capability_http::witness",
            witness = %self.slot.url,
            error = %why,
            "checkpoint not cosigned by this witness"
        );
    }
}
