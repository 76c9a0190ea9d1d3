//! The tree a JSON Lines writer keeps beside its records (`tlog::stored`): signed tree
//! checkpoints in the trail, resumed on restart, and what they catch: a cut tail, a rewritten
//! record (with the chain's hashes computed again), a proof file for another record, a trail
//! rewritten while the writer was stopped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use capability::audit::tlog::{
    Frontier, Receipt, SignedCheckpoint, TlogError, check_proof, checkpoint_time, leaf_hash,
    prove_stored, verify_jsonl_with_trees, wants_receipt, writer_tree,
};
use capability::audit::{
    AuditRecord, AuditSink, ChainProblem, CheckpointEvery, FlushPolicy, JsonlSink, read_jsonl,
};
use capability::gate::{PublicKey, SecretKey};
use serde_json::json;

const EVERY_5: CheckpointEvery = CheckpointEvery {
    records: 5,
    interval: Duration::from_secs(3600),
};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tree_sinks");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// A record of tool `tool-<i>` (shared with `witness_feed`).
pub(crate) fn record(i: u64) -> AuditRecord {
    serde_json::from_value(json!({
        "seq": 0, "time": "2026-12-05T02:00:00.000Z", "agent": "a", "role": "r",
        "session": "s", "step": null, "provider": null, "tool": format!("tool-{i}"),
        "descriptor_hash": "", "policy_version": null, "verdict": "allowed", "reasons": [],
        "input": {"i": i}, "input_digest": "", "input_size": 0, "output_digest": null,
        "output_size": null, "latency_us": null, "success": null, "error": null,
        "prev": "", "hash": ""
    }))
    .expect("a record")
}

fn sink(path: &Path, key: &Arc<SecretKey>) -> JsonlSink {
    JsonlSink::open(path, FlushPolicy::EveryRecord)
        .expect("open")
        .with_writer("replica-1")
        .expect("writer")
        .with_checkpoints(key.clone(), EVERY_5)
}

/// `n` records written by a fresh writer, closed: tree checkpoints at 5, 10, ... and `n`.
fn trail(path: &Path, n: u64) -> (Arc<SecretKey>, PublicKey) {
    let key = Arc::new(SecretKey::generate().expect("key"));
    let sink = sink(path, &key);
    for i in 0..n {
        sink.append(record(i)).expect("append");
    }
    sink.close().expect("close");
    let public = key.public_key();
    (key, public)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("write");
}

fn notes(path: &Path) -> Vec<SignedCheckpoint> {
    let (_, report) = read_jsonl(path).expect("read");
    report
        .tree_checkpoints
        .iter()
        .map(|t| SignedCheckpoint::parse(t).expect("a note"))
        .collect()
}

#[test]
fn a_writer_signs_its_tree_beside_its_chain_and_the_notes_match_the_records() {
    let path = scratch("signed.jsonl");
    let (_, public) = trail(&path, 12);
    let notes = notes(&path);
    let sizes: Vec<u64> = notes.iter().map(|n| n.head.size).collect();
    assert_eq!(sizes, [5, 10, 12], "beside each chain checkpoint");
    let (records, _) = read_jsonl(&path).expect("read");
    let tree = writer_tree(&records, "replica-1");
    for note in &notes {
        assert_eq!(note.head.origin, "capability/replica-1");
        note.verify(&note.head.origin, &public)
            .expect("signed by the key");
        assert_eq!(Ok(note.head.root), tree.root(note.head.size));
        assert!(checkpoint_time(note).is_some_and(|t| t.starts_with("20")));
    }
    let report = verify_jsonl_with_trees(&path, &public).expect("verify");
    assert!(report.is_intact(), "{:?}", report.chain_problems);
}

#[test]
fn a_cut_tail_is_caught_by_the_tree_checkpoint_that_covers_it() {
    let path = scratch("cut.jsonl");
    let (_, public) = trail(&path, 12);
    // Records 8..12 cut; every checkpoint line kept.
    let kept: Vec<String> = lines(&path)
        .into_iter()
        .filter(|l| {
            !l.starts_with("{\"agent\"")
                || serde_json::from_str::<AuditRecord>(l).is_ok_and(|r| r.seq <= 7)
        })
        .collect();
    write_lines(&path, &kept);
    let report = verify_jsonl_with_trees(&path, &public).expect("verify");
    assert!(
        report.chain_problems.contains(&ChainProblem::TreeCut {
            size: 12,
            records: 7
        }),
        "{:?}",
        report.chain_problems
    );
    let said = ChainProblem::TreeCut {
        size: 12,
        records: 7,
    }
    .to_string();
    assert!(said.contains("tail cut off"), "{said}");
}

#[test]
fn a_record_rewritten_with_its_chain_computed_again_is_caught_by_the_root() {
    let path = scratch("rewritten.jsonl");
    let (_, public) = trail(&path, 12);
    // Record 3 says another tool; its hash and every later one computed again, in place.
    let (records, _) = read_jsonl(&path).expect("read");
    let mut head = capability::audit::ChainHead::new("replica-1", 0, capability::audit::GENESIS);
    let mut rewritten = Vec::new();
    for mut r in records {
        if r.seq == 3 {
            r.tool = "innocent".to_owned();
        }
        rewritten.push(head.seal(r).to_line());
    }
    let mut at = 0;
    let out: Vec<String> = lines(&path)
        .into_iter()
        .map(|l| {
            if l.starts_with("{\"agent\"") {
                at += 1;
                rewritten[at - 1].clone()
            } else {
                l
            }
        })
        .collect();
    write_lines(&path, &out);
    let report = verify_jsonl_with_trees(&path, &public).expect("verify");
    assert!(report.problem.is_none(), "the chain itself is consistent");
    for size in [5, 10, 12] {
        assert!(
            report
                .chain_problems
                .contains(&ChainProblem::TreeRewritten { size }),
            "size {size}: {:?}",
            report.chain_problems
        );
    }
    assert!(
        ChainProblem::TreeRewritten { size: 5 }
            .to_string()
            .contains("record rewritten")
    );
}

#[test]
fn a_restarted_writer_resumes_its_tree_and_its_checkpoints_extend_the_old_ones() {
    let path = scratch("resumed.jsonl");
    let (key, public) = trail(&path, 7);
    let first = notes(&path).last().cloned().expect("a note");
    assert_eq!(first.head.size, 7);
    let again = sink(&path, &key);
    assert_eq!(again.last_tree_checkpoint(), Some(first.clone()));
    for i in 7..9 {
        again.append(record(i)).expect("append");
    }
    again.close().expect("close");
    let last = again.last_tree_checkpoint().expect("a note");
    assert_eq!(last.head.size, 9);
    let (records, _) = read_jsonl(&path).expect("read");
    let tree = writer_tree(&records, "replica-1");
    assert_eq!(tree.root(9), Ok(last.head.root));
    let consistency = tree.consistency_proof(7, 9).expect("proof");
    capability::audit::tlog::verify_consistency(
        7,
        9,
        &first.head.root,
        &last.head.root,
        &consistency,
    )
    .expect("the resumed tree extends the first");
    assert!(
        verify_jsonl_with_trees(&path, &public)
            .expect("verify")
            .is_intact()
    );
}

#[test]
fn a_writer_does_not_resume_over_records_rewritten_while_it_was_stopped() {
    let path = scratch("resume-rewritten.jsonl");
    let (key, _) = trail(&path, 6);
    let (records, _) = read_jsonl(&path).expect("read");
    let mut head = capability::audit::ChainHead::new("replica-1", 0, capability::audit::GENESIS);
    let mut out = Vec::new();
    for mut r in records {
        if r.seq == 2 {
            r.tool = "innocent".to_owned();
        }
        out.push(head.seal(r).to_line());
    }
    let notes_only: Vec<String> = lines(&path)
        .into_iter()
        .filter(|l| l.starts_with("{\"tree_checkpoint\""))
        .collect();
    out.extend(notes_only);
    write_lines(&path, &out);
    let again = sink(&path, &key);
    let refused = again.append(record(9)).expect_err("refused");
    let said = refused.to_string();
    assert!(said.contains("cannot be resumed"), "{said}");
    assert!(said.contains("rewritten"), "{said}");
}

#[test]
fn a_proof_from_the_writers_own_checkpoint_checks_and_refuses_another_record() {
    let path = scratch("proof.jsonl");
    let (_, public) = trail(&path, 12);
    let (records, _) = read_jsonl(&path).expect("read");
    let notes = notes(&path);
    let proof = prove_stored(&records, &notes, "replica-1", 3)
        .expect("prove")
        .expect("a checkpoint covers record 3");
    assert_eq!(proof.checkpoint.head.size, 12, "the latest one covering it");
    assert!(notes.contains(&proof.checkpoint), "the writer's own");
    let text = proof.to_text();
    let parsed = capability::audit::tlog::TlogProof::parse(&text).expect("parse");
    let proven = check_proof(&parsed, &public, None).expect("checks");
    assert_eq!((proven.writer.as_str(), proven.seq), ("replica-1", 3));
    let other = records[3].to_line();
    assert!(matches!(
        check_proof(&parsed, &public, Some(&other)),
        Err(TlogError::OtherRecord { .. })
    ));
    // A receipt for record 3 names the proof's leaf.
    let receipt = Receipt::of(&records[2]).expect("receipt");
    assert_eq!(
        (receipt.index, receipt.record_ref()),
        (2, "replica-1:3".to_owned())
    );
    assert_eq!(
        receipt.leaf_hash,
        capability::audit::tlog::encoding::base64(&leaf_hash(records[2].to_line().as_bytes()))
    );
    assert!(wants_receipt(
        json!({"capability/receipt": true}).as_object()
    ));
    assert!(!wants_receipt(
        json!({"capability/receipt": "yes"}).as_object()
    ));
}

#[test]
fn a_record_not_yet_checkpointed_has_no_stored_proof() {
    let path = scratch("uncovered.jsonl");
    let key = Arc::new(SecretKey::generate().expect("key"));
    let sink = sink(&path, &key);
    for i in 0..7 {
        sink.append(record(i)).expect("append");
    }
    sink.flush().expect("flush");
    let (records, _) = read_jsonl(&path).expect("read");
    assert_eq!(notes(&path).len(), 1);
    assert_eq!(
        prove_stored(&records, &notes(&path), "replica-1", 6).expect("prove"),
        None,
        "the next checkpoint will cover it"
    );
    assert!(
        prove_stored(&records, &notes(&path), "replica-1", 5)
            .expect("prove")
            .is_some()
    );
    let mut frontier = Frontier::new();
    for r in &records {
        frontier.push(r.to_line().as_bytes());
    }
    assert_eq!(frontier.size(), 7);
}

#[test]
fn an_approved_calls_outcome_carries_the_signed_approval_and_one_proof_covers_both() {
    use capability::CapabilityManifest;
    use capability::audit::{AuditedDispatch, Caller, Consent, ConsentKind, Outcome, Request};
    use capability::authz::{Action, Ceiling, ToolContext};

    let path = scratch("approved.jsonl");
    let key = Arc::new(SecretKey::generate().expect("key"));
    let public = key.public_key();
    let sink = Arc::new(sink(&path, &key));
    let dispatch = AuditedDispatch::new(sink.clone());
    let ctx = ToolContext::new("operator", "s-1", Ceiling::Unrestricted);
    let restart = CapabilityManifest::builder("restart_pod")
        .destructive(true)
        .build()
        .expect("tool");
    // What the gateway records for a call let through by a signed approval (`serve/held.rs`).
    let signed = json!({
        "id": "a-7", "tool": "restart_pod", "tool_type": "mcp:ops/restart_pod",
        "audience": "gw", "descriptor_hash": "ab", "args_digest": "cd", "proposer": "role:operator",
        "approver": "bob", "issued_at": 1, "expires_at": 2, "signature": "ef".repeat(64)
    });
    let consent = Consent {
        kind: ConsentKind::Signed,
        id: "a-7".into(),
        by: "bob".into(),
        approval: Some(signed.clone()),
    };
    let input = json!({"name": "web-1"});
    let request = Request::mcp("tools/call", Action::CallTool(&restart), &input);
    let run = async { Ok::<_, String>("restarted") };
    let (outcome, receipt) = futures_block_on(dispatch.act_async_with_receipt(
        &ctx,
        Caller::new("agent").consent(&consent),
        &request,
        run,
        true,
    ));
    assert!(matches!(outcome, Outcome::Done("restarted")));
    let receipt = receipt.expect("a receipt");
    sink.close().expect("close");

    let (records, report) = read_jsonl(&path).expect("read");
    let outcome = &records[usize::try_from(receipt.index).expect("index")];
    assert_eq!(outcome.seq, receipt.seq);
    let recorded = outcome
        .reasons
        .iter()
        .find_map(|r| r.as_consent())
        .expect("the consent on record");
    assert_eq!(
        recorded.approval,
        Some(signed),
        "the signed approval, whole"
    );
    let notes: Vec<SignedCheckpoint> = report
        .tree_checkpoints
        .iter()
        .map(|t| SignedCheckpoint::parse(t).expect("a note"))
        .collect();
    let proof = prove_stored(&records, &notes, &receipt.writer, receipt.seq)
        .expect("prove")
        .expect("the closing checkpoint covers it");
    check_proof(&proof, &public, Some(&outcome.to_line()))
        .expect("one proof: who approved what, and what ran");
    assert_eq!(
        capability::audit::tlog::encoding::base64(&leaf_hash(
            proof.extra.as_deref().expect("the record")
        )),
        receipt.leaf_hash
    );
}

/// Runs a future that never waits (the dispatcher's, around a ready tool) to its end.
fn futures_block_on<F: std::future::Future>(future: F) -> F::Output {
    let waker = std::task::Waker::noop();
    let mut context = std::task::Context::from_waker(waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut context) {
            return out;
        }
    }
}

#[test]
fn an_idle_writer_signs_checkpoints_and_a_cut_with_its_checkpoints_leaves_a_gap() {
    use capability::audit::jsonl::keep_idle_checkpoints;
    use capability::audit::tlog::{checkpoint_gaps, checkpoint_stopped};

    let path = scratch("idle.jsonl");
    let key = Arc::new(SecretKey::generate().expect("key"));
    let every = CheckpointEvery {
        records: 1_000,
        interval: Duration::from_millis(50),
    };
    let sink = Arc::new(
        JsonlSink::open(&path, FlushPolicy::EveryRecord)
            .expect("open")
            .with_writer("replica-1")
            .expect("writer")
            .with_checkpoints(key.clone(), every),
    );
    keep_idle_checkpoints(&sink);
    for i in 0..3 {
        sink.append(record(i)).expect("append");
    }
    // Idle: the sink signs again every interval (polled, never a fixed wait).
    let idle = |notes: Vec<SignedCheckpoint>| notes.iter().filter(|n| n.head.size == 3).count();
    assert!(
        capability_testkit::wait_for(|| idle(notes(&path)) >= 2),
        "checkpoints signed while nothing was written"
    );
    for i in 3..6 {
        sink.append(record(i)).expect("append");
    }
    sink.close().expect("close");

    let all = notes(&path);
    let idle = all.iter().filter(|n| n.head.size == 3).count();
    assert!(
        idle >= 2,
        "checkpoints signed while nothing was written: {idle}"
    );
    let last = all.last().expect("a note");
    assert!(
        checkpoint_stopped(last) && last.head.size == 6,
        "{}",
        last.body
    );
    let later = "2099-01-01T00:00:00.000Z";
    assert!(
        checkpoint_gaps(&all, every.interval, later).is_empty(),
        "it stopped"
    );
    let public = key.public_key();
    assert!(
        verify_jsonl_with_trees(&path, &public)
            .expect("verify")
            .is_intact()
    );

    // Records 4..6 cut, with every checkpoint line after record 3.
    let mut kept = Vec::new();
    for line in lines(&path) {
        if line.starts_with("{\"agent\"") {
            let record: AuditRecord = serde_json::from_str(&line).expect("a record");
            if record.seq > 3 {
                break;
            }
        }
        kept.push(line);
    }
    write_lines(&path, &kept);
    let report = verify_jsonl_with_trees(&path, &public).expect("verify");
    // Consistent in itself: the idle checkpoint after record 3 signed the chain too (records
    // had come since its last), so the chain's checks find nothing; only the gap tells.
    assert_eq!(report.problem, None);
    assert_eq!(report.chain_problems, []);
    let gaps = checkpoint_gaps(&notes(&path), every.interval, later);
    let found = gaps.get("replica-1").expect("a gap");
    assert!(
        matches!(&found[0], ChainProblem::CheckpointGap { to, .. } if to == later),
        "{found:?}"
    );
}
