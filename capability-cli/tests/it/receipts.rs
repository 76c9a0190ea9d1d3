//! `capability audit prove` under the writer's own checkpoint: for a record that a tree
//! checkpoint stored in the trail covers (signed by the same key), the proof file's checkpoint
//! is that one, byte for byte, not one signed at proof time; a record no checkpoint covers yet
//! is proved as before, under one signed now. Both check with the writer's public key. (The
//! receipt a call gets names the record: `capability-gateway/tests/it/receipts.rs`.)

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capability::audit::tlog::{SignedCheckpoint, TlogProof};
use capability::audit::{AuditSink, CheckpointEvery, FlushPolicy, JsonlSink, read_jsonl};
use capability::gate::SecretKey;

use crate::trails::{capability, record};

fn scratch(name: &str) -> PathBuf {
    crate::trails::scratch("receipts", name)
}

#[test]
fn a_proof_is_made_under_the_writers_own_checkpoint_when_one_covers_the_record() {
    let dir = scratch("own");
    let (code, text) = capability(&dir, &["keygen", "--out", "writer.key"]);
    assert_eq!(code, 0, "{text}");
    let key = SecretKey::from_text(&std::fs::read_to_string(dir.join("writer.key")).expect("key"))
        .expect("a key");
    let trail = dir.join("trail.jsonl");
    let every = CheckpointEvery {
        records: 5,
        interval: Duration::from_secs(3600),
    };
    let sink = JsonlSink::open(&trail, FlushPolicy::EveryRecord)
        .expect("open")
        .with_writer("replica-1")
        .expect("writer")
        .with_checkpoints(Arc::new(key), every);
    for i in 0..7 {
        sink.append(record(&format!("t-{i}"))).expect("append");
    }
    // Still running: the tree checkpoint of 5 is in the trail, none yet covers records 6, 7.
    sink.flush().expect("flush");
    let (_, report) = read_jsonl(&trail).expect("read");
    let stored = SignedCheckpoint::parse(&report.tree_checkpoints[0]).expect("a note");
    assert_eq!(stored.head.size, 5);

    let prove = |record: &str, out: &str| {
        let args = [
            "audit",
            "prove",
            "trail.jsonl",
            "--record",
            record,
            "--key",
            "writer.key",
            "--out",
            out,
        ];
        let (code, text) = capability(&dir, &args);
        assert_eq!(code, 0, "{text}");
        let proof = TlogProof::parse(&std::fs::read_to_string(dir.join(out)).expect("proof"))
            .expect("a proof file");
        let (code, text) = capability(
            &dir,
            &["audit", "check-proof", out, "--key", "writer.key.pub"],
        );
        assert_eq!(code, 0, "{text}");
        proof
    };
    let covered = prove("replica-1:3", "r3.tlog-proof");
    assert_eq!(
        covered.checkpoint.to_text(),
        stored.to_text(),
        "the writer's own checkpoint, byte for byte"
    );
    let uncovered = prove("replica-1:7", "r7.tlog-proof");
    assert_eq!(
        uncovered.checkpoint.head.size, 7,
        "signed now, over the trail"
    );
    assert_ne!(uncovered.checkpoint.to_text(), stored.to_text());
    drop(sink);
}
