//! A JSON Lines writer's checkpoints handed to a [`CheckpointFeed`] as they are written (what
//! `capability gateway --witness` submits): the leaf hashes handed over are the trail's, each
//! once and in order, under both flush policies and across a reopen; the consistency proofs a
//! feed computes from them ([`Growth`]) verify between the notes' own roots; and a cosigned note
//! given back is stored in the trail, which still verifies.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capability::audit::jsonl::CheckpointFeed;
use capability::audit::tlog::{
    Cosigner, Frontier, Growth, Hash, SignedCheckpoint, verify_consistency,
    verify_jsonl_with_trees, writer_tree,
};
use capability::audit::{AuditSink, CheckpointEvery, FlushPolicy, JsonlSink, read_jsonl};
use capability::gate::SecretKey;

#[derive(Debug, Default)]
struct Recorded {
    start: Option<Frontier>,
    written: Vec<(SignedCheckpoint, u64, Vec<Hash>)>,
}

#[derive(Debug, Default)]
struct Recording(Mutex<Recorded>);

impl CheckpointFeed for Recording {
    fn start(&self, frontier: &Frontier) {
        self.0.lock().expect("lock").start = Some(frontier.clone());
    }

    fn written(&self, checkpoint: &SignedCheckpoint, first: u64, leaves: Vec<Hash>) {
        let mut recorded = self.0.lock().expect("lock");
        recorded.written.push((checkpoint.clone(), first, leaves));
    }
}

use crate::tree_sinks::record;

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("witness_feed");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

const EVERY_7: CheckpointEvery = CheckpointEvery {
    records: 7,
    interval: Duration::from_secs(3600),
};

#[test]
fn the_leaves_handed_over_are_the_trails_and_prove_each_checkpoint_from_the_last() {
    let key = Arc::new(SecretKey::generate().expect("key"));
    for (name, policy) in [
        ("every-record.jsonl", FlushPolicy::EveryRecord),
        ("every-4.jsonl", FlushPolicy::Every(4)),
    ] {
        let path = scratch(name);
        let mut appended = 0;
        let (mut handed, mut proved) = (Vec::new(), 0);
        // Two runs: the second resumes the tree from the trail and feeds from there.
        for run in 0..2 {
            let sink = Arc::new(
                JsonlSink::open(&path, policy)
                    .expect("open")
                    .with_writer("replica-1")
                    .expect("writer")
                    .with_checkpoints(key.clone(), EVERY_7),
            );
            let feed = Arc::new(Recording::default());
            assert!(sink.feed_checkpoints(feed.clone()).expect("feeds"));
            for _ in 0..(30 + run * 11) {
                sink.append(record(appended)).expect("append");
                appended += 1;
            }
            sink.close().expect("close");
            let recorded = feed.0.lock().expect("lock");
            let start = recorded.start.clone().expect("started");
            assert_eq!(start.size(), handed.len() as u64, "{name}: run {run}");
            let mut growth = Growth::new(start);
            for (note, first, leaves) in &recorded.written {
                assert_eq!(*first, growth.end(), "{name}: contiguous");
                growth.extend(leaves.iter().copied());
                handed.extend(leaves.iter().copied());
                let (old, new) = (growth.base(), note.head.size);
                assert!(
                    new <= growth.end(),
                    "{name}: the leaves reach the checkpoint"
                );
                // The proof from the last checkpoint to this one, from what was handed over.
                let proof = growth.consistency_proof(new).expect("a proof");
                if old > 0 {
                    let tree = writer_tree(&read_jsonl(&path).expect("read").0, "replica-1");
                    let old_root = tree.root(old).expect("old root");
                    verify_consistency(old, new, &old_root, &note.head.root, &proof)
                        .unwrap_or_else(|e| panic!("{name}: {old} -> {new}: {e}"));
                    proved += 1;
                }
                growth.advance_to(new).expect("advance");
            }
            assert!(
                recorded.written.len() >= 4,
                "{name}: {}",
                recorded.written.len()
            );
        }
        assert!(proved >= 8, "{name}: {proved} proofs checked");
        let (records, _) = read_jsonl(&path).expect("read");
        let tree = writer_tree(&records, "replica-1");
        let leaves: Vec<Hash> = (0..tree.size())
            .map(|i| tree.leaf(i).expect("a leaf"))
            .collect();
        assert_eq!(handed, leaves, "{name}: every leaf once, in order");
    }
}

#[test]
fn a_cosigned_note_given_back_is_stored_and_the_trail_still_verifies() {
    let key = Arc::new(SecretKey::generate().expect("key"));
    let witness = SecretKey::generate().expect("witness key");
    let path = scratch("cosigned.jsonl");
    let sink = JsonlSink::open(&path, FlushPolicy::EveryRecord)
        .expect("open")
        .with_writer("replica-1")
        .expect("writer")
        .with_checkpoints(key.clone(), EVERY_7);
    let feed = Arc::new(Recording::default());
    assert!(sink.feed_checkpoints(feed.clone()).expect("feeds"));
    for i in 0..9 {
        sink.append(record(i)).expect("append");
    }
    let (mut note, _, _) = feed.0.lock().expect("lock").written[0].clone();
    let cosigner = Cosigner::new("witness.example", Box::new(witness)).expect("a cosigner");
    let cosigned = cosigner.cosign(&note, 1_700_000_000).expect("cosigned");
    note.add_signatures([cosigned]);
    assert!(sink.store_cosigned(&note).expect("stored"));
    // Another log's note, or a tree larger than the one written, is refused.
    let mut foreign = note.clone();
    foreign.head.size = 1_000;
    let refused = sink
        .store_cosigned(&foreign)
        .expect_err("too large")
        .to_string();
    assert!(
        refused.starts_with("the cosigned checkpoint cannot be stored: the checkpoint of ")
            && refused.ends_with("(1000 records) is not one of this writer's"),
        "{refused}"
    );
    sink.close().expect("close");
    assert!(
        !sink.store_cosigned(&note).expect("closed"),
        "closed: not stored"
    );
    let report = verify_jsonl_with_trees(&path, &key.public_key()).expect("verify");
    assert!(report.is_intact(), "{report:?}");
    let stored = read_jsonl(&path).expect("read").1.tree_checkpoints;
    assert!(
        stored.iter().any(|t| *t == note.to_text()),
        "the cosigned note is in the trail"
    );
}
