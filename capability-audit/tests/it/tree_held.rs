//! A JSON Lines writer hashes each record's leaf beside the next record's chain hash, holding it
//! back until then (`tlog::WriterTree`): every tree checkpoint it signs must still cover exactly
//! the records written before it, byte for byte, whatever its flush policy and across restarts.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capability::audit::tlog::{SignedCheckpoint, Tree, verify_jsonl_with_trees};
use capability::audit::{AuditRecord, AuditSink, CheckpointEvery, FlushPolicy, JsonlSink};
use capability::gate::SecretKey;
use serde_json::{Value, json};

fn record(i: u64) -> AuditRecord {
    serde_json::from_value(json!({
        "seq": 0, "time": "2026-12-05T02:00:00.000Z", "agent": "a", "role": "r",
        "session": "s", "step": null, "provider": null, "tool": format!("tool-{i}"),
        "descriptor_hash": "", "policy_version": null, "verdict": "allowed", "reasons": [],
        // Lines of many lengths, so that leaves end at every place in a SHA-256 block.
        "input": {"pad": "x".repeat((i * 37 % 131) as usize)}, "input_digest": "",
        "input_size": 0, "output_digest": null, "output_size": null, "latency_us": null,
        "success": null, "error": null, "prev": "", "hash": ""
    }))
    .expect("a record")
}

#[test]
fn every_tree_checkpoint_covers_the_records_written_before_it_whatever_the_flush_policy() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tree_held");
    std::fs::create_dir_all(&dir).expect("dir");
    let key = Arc::new(SecretKey::generate().expect("key"));
    let every = CheckpointEvery {
        records: 5,
        interval: Duration::from_secs(3600),
    };
    for (name, policy) in [
        ("every-record", FlushPolicy::EveryRecord),
        ("every-3", FlushPolicy::Every(3)),
        ("every-7", FlushPolicy::Every(7)),
    ] {
        let path = dir.join(format!("{name}.jsonl"));
        let _ = std::fs::remove_file(&path);
        // Three runs of the writer, each resuming the tree the last one left.
        let mut seq = 0;
        for run in [13, 1, 9] {
            let sink = JsonlSink::open(&path, policy)
                .and_then(|s| s.with_writer("replica-1"))
                .expect("open")
                .with_checkpoints(key.clone(), every);
            for _ in 0..run {
                seq += 1;
                sink.append(record(seq)).expect("append");
            }
            sink.close().expect("close");
        }
        // The tree of the record lines as the file holds them, built here from the bytes.
        let (mut tree, mut checked) = (Tree::new(), Vec::new());
        let text = std::fs::read_to_string(&path).expect("read");
        for line in text.lines() {
            let value: Value = serde_json::from_str(line).expect("JSON");
            if value.get("seq").is_some() {
                tree.push(line.as_bytes());
            } else if let Some(note) = value["tree_checkpoint"]["note"].as_str() {
                let note = SignedCheckpoint::parse(note).expect("a note");
                assert_eq!(note.head.size, tree.size(), "{name}: the records before it");
                assert_eq!(
                    Ok(note.head.root),
                    tree.root(tree.size()),
                    "{name}: its root"
                );
                checked.push(note.head.size);
            }
        }
        assert_eq!(tree.size(), 23);
        assert_eq!(checked, [5, 10, 13, 14, 19, 23], "{name}");
        let report = verify_jsonl_with_trees(&path, &key.public_key()).expect("verify");
        assert!(report.is_intact(), "{name}: {:?}", report.chain_problems);
    }
}
