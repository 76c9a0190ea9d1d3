//! Signed checkpoints in a JSON Lines trail: tamper evidence against someone who can write the
//! file. Without the key, a cut-off tail and a recomputed chain look intact; with it, they are
//! caught.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capability::audit::{
    AuditRecord, AuditSink, AuditedDispatch, Caller, ChainProblem, Checkpoint, CheckpointEvery,
    FlushPolicy, JsonlSink, Outcome, verify_jsonl, verify_jsonl_with_checkpoints,
    verify_jsonl_with_key,
};
use capability::gate::{PublicKey, SecretKey};
use serde_json::{Value, json};

use crate::common;
use common::{list_pods, monitor};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit_checkpoints");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

const EVERY_5: CheckpointEvery = CheckpointEvery {
    records: 5,
    interval: Duration::from_secs(3600),
};

/// Six calls (twelve records: an intent and an outcome each) into a trail signed every 5
/// records (and on close): checkpoints at 5, 10, 12.
/// Returns the public key, the last checkpoint, and the lines.
fn signed_trail(path: &PathBuf) -> (PublicKey, Checkpoint, Vec<String>) {
    let key = SecretKey::generate().expect("key");
    let public = key.public_key();
    let sink = Arc::new(
        JsonlSink::open(path, FlushPolicy::EveryRecord)
            .expect("open")
            .with_writer("replica-1")
            .expect("a new file")
            .with_checkpoints(Arc::new(key), EVERY_5),
    );
    let dispatch = AuditedDispatch::new(sink.clone());
    for i in 0..6u32 {
        let out: Outcome<u32, String> = dispatch.call(
            &monitor("s"),
            Caller::new("watcher"),
            &list_pods(),
            &json!({ "i": i }),
            || Ok(i),
        );
        assert!(out.is_done());
    }
    sink.close().expect("close");
    let last = sink.last_checkpoint().expect("a checkpoint");
    let text = std::fs::read_to_string(path).expect("read");
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    (public, last, lines)
}

fn rewrite(path: &PathBuf, lines: &[String]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("write");
}

fn is_checkpoint(line: &str) -> bool {
    line.starts_with("{\"checkpoint\":")
}

/// The tree checkpoint beside each chain checkpoint (`tlog::stored`, checked in
/// capability-audit/tests/it/tree_sinks.rs): left as it is here.
fn is_tree_checkpoint(line: &str) -> bool {
    line.starts_with("{\"tree_checkpoint\":")
}

fn seq_of(line: &str) -> u64 {
    let value: Value = serde_json::from_str(line).expect("json");
    value
        .get("seq")
        .or_else(|| value["checkpoint"].get("seq"))
        .and_then(Value::as_u64)
        .expect("a seq")
}

#[test]
fn checkpoints_are_written_between_the_records_and_verify() {
    let path = scratch("intact.jsonl");
    let (public, last, lines) = signed_trail(&path);
    let checkpoints: Vec<u64> = lines
        .iter()
        .filter(|l| is_checkpoint(l))
        .map(|l| seq_of(l))
        .collect();
    assert_eq!(checkpoints, [5, 10, 12], "on schedule and on close");
    // Each checkpoint line follows the record it vouches for.
    for (i, line) in lines.iter().enumerate().filter(|(_, l)| is_checkpoint(l)) {
        assert_eq!(seq_of(&lines[i - 1]), seq_of(line));
    }
    assert_eq!((last.seq, last.writer.as_str()), (12, "replica-1"));

    let report = verify_jsonl(&path).expect("readable");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!((report.records, report.checkpoints.len()), (12, 3));
    assert_eq!(report.writer, "replica-1");
    let report = verify_jsonl_with_key(&path, &public).expect("readable");
    assert!(report.is_intact(), "{report:?}");

    // Reopened, the chain and the checkpoints go on; nothing new, no new checkpoint.
    drop(
        JsonlSink::open(&path, FlushPolicy::EveryRecord)
            .expect("reopen")
            .with_writer("replica-1")
            .expect("same writer")
            .with_checkpoints(Arc::new(SecretKey::generate().expect("key")), EVERY_5),
    );
    assert_eq!(
        std::fs::read_to_string(&path)
            .expect("read")
            .lines()
            .count(),
        lines.len()
    );
    // Another writer cannot continue this file's chain.
    let refused = JsonlSink::open(&path, FlushPolicy::EveryRecord)
        .expect("reopen")
        .with_writer("replica-2")
        .expect_err("another writer");
    assert!(refused.to_string().contains("replica-1"), "{refused}");
}

#[test]
fn a_cut_off_tail_is_caught_with_the_key() {
    let path = scratch("tail.jsonl");
    let (public, last, lines) = signed_trail(&path);

    // Records 9 to 12 cut off; the checkpoint lines left where they were (an attacker who
    // removes records, or a tool that drops the lines it cannot parse as records).
    let cut: Vec<String> = lines
        .iter()
        .filter(|l| is_checkpoint(l) || is_tree_checkpoint(l) || seq_of(l) <= 8)
        .cloned()
        .collect();
    rewrite(&path, &cut);
    let report = verify_jsonl(&path).expect("readable");
    assert!(
        report.is_intact(),
        "without the key it looks whole: {report:?}"
    );
    assert_eq!(report.records, 8);
    let report = verify_jsonl_with_key(&path, &public).expect("readable");
    assert!(!report.is_intact());
    assert!(
        report.chain_problems.contains(&ChainProblem::TailCut {
            checkpoint_seq: 12,
            last_seq: 8
        }),
        "{report:?}"
    );

    // Cut after the checkpoint at 5, with every line after it: the file is consistent in
    // itself, so only a checkpoint kept elsewhere shows the cut.
    let at_5 = lines
        .iter()
        .position(|l| is_checkpoint(l) && seq_of(l) == 5)
        .expect("checkpoint 5");
    rewrite(&path, &lines[..=at_5]);
    assert!(
        verify_jsonl_with_key(&path, &public)
            .expect("readable")
            .is_intact()
    );
    let report = verify_jsonl_with_checkpoints(&path, &public, std::slice::from_ref(&last))
        .expect("readable");
    assert_eq!(
        report.chain_problems,
        [ChainProblem::TailCut {
            checkpoint_seq: 12,
            last_seq: 5
        }]
    );
}

#[test]
fn a_recomputed_chain_is_caught_with_the_key() {
    let path = scratch("recomputed.jsonl");
    let (public, _, lines) = signed_trail(&path);

    // Record 3 edited, and every later hash computed again with the public `compute_hash`.
    let mut forged = Vec::new();
    let mut prev = String::new();
    for line in &lines {
        if is_checkpoint(line) || is_tree_checkpoint(line) {
            forged.push(line.clone());
            continue;
        }
        let mut record: AuditRecord = serde_json::from_str(line).expect("a record");
        if record.seq == 3 {
            record.input = json!({ "i": 999 });
        }
        if record.seq > 3 {
            record.prev = prev.clone();
        }
        if record.seq >= 3 {
            record.hash = record.compute_hash();
        }
        prev = record.hash.clone();
        forged.push(record.to_line());
    }
    assert_ne!(forged, lines);
    rewrite(&path, &forged);
    let report = verify_jsonl(&path).expect("readable");
    assert!(
        report.is_intact(),
        "without the key it looks whole: {report:?}"
    );
    let report = verify_jsonl_with_key(&path, &public).expect("readable");
    for seq in [5, 10, 12] {
        assert!(
            report
                .chain_problems
                .contains(&ChainProblem::Recomputed { seq }),
            "{report:?}"
        );
    }
}

#[test]
fn a_checkpoint_signed_by_another_key_is_caught() {
    let path = scratch("other_key.jsonl");
    let (public, _, lines) = signed_trail(&path);
    let intruder = SecretKey::generate().expect("key");

    // Every checkpoint replaced by one the attacker signs, over the same chain.
    let swapped: Vec<String> = lines
        .iter()
        .map(|line| {
            if !is_checkpoint(line) {
                return line.clone();
            }
            let value: Value = serde_json::from_str(line).expect("json");
            let real: Checkpoint =
                serde_json::from_value(value["checkpoint"].clone()).expect("a checkpoint");
            let fake = Checkpoint::sign(&real.writer, real.seq, &real.head, &intruder);
            capability::json::to_canonical_json(&json!({ "checkpoint": fake }))
        })
        .collect();
    assert_ne!(swapped, lines);
    rewrite(&path, &swapped);
    assert!(verify_jsonl(&path).expect("readable").is_intact());
    let report = verify_jsonl_with_key(&path, &public).expect("readable");
    assert!(
        report
            .chain_problems
            .contains(&ChainProblem::BadCheckpoint { seq: 5 }),
        "{report:?}"
    );
    assert!(
        report.chain_problems.contains(&ChainProblem::Unvouched),
        "{report:?}"
    );

    // A trail with no checkpoint at all is not vouched for either.
    let records_only: Vec<String> = lines
        .iter()
        .filter(|l| !is_checkpoint(l))
        .cloned()
        .collect();
    rewrite(&path, &records_only);
    let report = verify_jsonl_with_key(&path, &public).expect("readable");
    assert_eq!(report.chain_problems, [ChainProblem::Unvouched]);
}

#[test]
fn a_dropped_sink_signs_its_final_checkpoint_and_a_closed_one_refuses_records() {
    let path = scratch("dropped.jsonl");
    let key = SecretKey::generate().expect("key");
    let public = key.public_key();
    {
        let sink = Arc::new(
            JsonlSink::open(&path, FlushPolicy::Every(100))
                .expect("open")
                .with_checkpoints(Arc::new(key), CheckpointEvery::default()),
        );
        let dispatch = AuditedDispatch::new(sink);
        for i in 0..3u32 {
            let _: Outcome<u32, String> = dispatch.call(
                &monitor("s"),
                Caller::new("watcher"),
                &list_pods(),
                &json!({ "i": i }),
                || Ok(i),
            );
        }
    }
    let report = verify_jsonl_with_key(&path, &public).expect("readable");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(
        report.checkpoints.iter().map(|c| c.seq).collect::<Vec<_>>(),
        [6],
        "three calls, six records"
    );

    let sink = Arc::new(JsonlSink::open(&path, FlushPolicy::EveryRecord).expect("reopen"));
    sink.close().expect("close");
    let dispatch = AuditedDispatch::new(sink);
    let out: Outcome<u32, String> = dispatch.call(
        &monitor("s"),
        Caller::new("watcher"),
        &list_pods(),
        &json!({}),
        || Ok(1),
    );
    assert!(
        matches!(out, Outcome::AuditFailed(_)),
        "a closed sink takes no record"
    );
}
