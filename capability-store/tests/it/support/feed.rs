//! A store writer's tree checkpoints handed to a [`CheckpointFeed`] as they are stored (what
//! `capability gateway --witness` submits for a store), the same on SQLite (`sqlite_feed`) and
//! PostgreSQL (`pg_feed`): the leaf hashes handed over are the writer's records', each once and
//! in order, across a reopen; each checkpoint, the `stopped` one too, is proven from the last by
//! what was handed over; a fed note with a cosignature added is stored over the stored one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capability::audit::CheckpointEvery;
use capability::audit::jsonl::CheckpointFeed;
use capability::audit::tlog::{
    Cosigner, Frontier, Growth, Hash, SignedCheckpoint, checkpoint_stopped, verify_consistency,
    writer_tree,
};
use capability::gate::SecretKey;
use capability_store::{SinkOptions, Store};

use super::tree::{key, record};

/// A tree checkpoint fed, the index of the first leaf handed with it, and the leaves.
type Fed = (SignedCheckpoint, u64, Vec<Hash>);

#[derive(Debug, Default)]
struct Recording(Mutex<(Option<Frontier>, Vec<Fed>)>);

impl CheckpointFeed for Recording {
    fn start(&self, frontier: &Frontier) {
        self.0.lock().expect("lock").0 = Some(frontier.clone());
    }

    fn written(&self, checkpoint: &SignedCheckpoint, first: u64, leaves: Vec<Hash>) {
        (self.0.lock().expect("lock").1).push((checkpoint.clone(), first, leaves));
    }
}

const EVERY_7: CheckpointEvery = CheckpointEvery {
    records: 7,
    interval: Duration::from_secs(3600),
};

/// Two runs of writer `w-1` (23 then 32 records) on `store`, fed.
pub fn feeds_its_leaves_once_in_order_proving_each_checkpoint(store: &dyn Store) {
    let (key, _) = key();
    let (mut handed, mut appended, mut proved) = (Vec::new(), 0, 0);
    let mut last = None;
    for run in 0..2u64 {
        let feed = Arc::new(Recording::default());
        let mut options = SinkOptions::writer("w-1");
        options.checkpoints = Some((key.clone(), EVERY_7));
        options.feed = Some(feed.clone());
        let sink = store.audit_sink(options).expect("a sink");
        for _ in 0..(23 + run * 9) {
            sink.append(record(appended)).expect("append");
            appended += 1;
        }
        sink.close().expect("close");
        let recorded = feed.0.lock().expect("lock");
        let start = recorded.0.clone().expect("started");
        assert_eq!(start.size(), handed.len() as u64, "run {run}");
        let mut growth = Growth::new(start);
        let records = store.read_trail().expect("read").records;
        let tree = writer_tree(&records, "w-1");
        for (note, first, leaves) in &recorded.1 {
            assert_eq!(*first, growth.end(), "run {run}: contiguous");
            growth.extend(leaves.iter().copied());
            handed.extend(leaves.iter().copied());
            let (old, new) = (growth.base(), note.head.size);
            let proof = growth.consistency_proof(new).expect("a proof");
            if old > 0 {
                let old_root = tree.root(old).expect("a root");
                verify_consistency(old, new, &old_root, &note.head.root, &proof)
                    .unwrap_or_else(|e| panic!("run {run}: {old} -> {new}: {e}"));
                proved += 1;
            }
            growth.advance_to(new).expect("advance");
        }
        let (final_note, _, _) = recorded.1.last().expect("notes");
        assert!(checkpoint_stopped(final_note), "{}", final_note.body);
        last = Some(final_note.clone());
    }
    assert!(proved >= 6, "{proved} proofs checked");
    let tree = writer_tree(&store.read_trail().expect("read").records, "w-1");
    let leaves: Vec<Hash> = (0..tree.size())
        .map(|i| tree.leaf(i).expect("a leaf"))
        .collect();
    assert_eq!(handed, leaves, "every leaf once, in order");

    // The `stopped` checkpoint, cosigned and given back, is stored over the stored one.
    let mut note = last.expect("a note");
    let witness = SecretKey::generate().expect("witness key");
    let cosigner = Cosigner::new("witness.example", Box::new(witness)).expect("a cosigner");
    note.add_signatures([cosigner.cosign(&note, 1_700_000_000).expect("cosigned")]);
    assert!(store.store_cosigned(&note).expect("stored"));
    let stored = store.read_trail().expect("read").tree_checkpoints;
    assert!(stored.contains(&note.to_text()));
}
