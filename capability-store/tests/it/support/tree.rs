//! The tree each writer keeps beside its records in a store, the same scenarios on SQLite
//! (`sqlite_tree`) and PostgreSQL (`pg_tree`): signed tree checkpoints and the writers'
//! registrations stored; a restarted writer resumes its tree; a cut tail, a rewritten record
//! and a removed writer found, each said plainly; a writer refuses to resume over a rewrite.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use capability::audit::tlog::{SignedCheckpoint, writer_tree};
use capability::audit::{AuditRecord, ChainProblem, CheckpointEvery, CheckpointSigner};
use capability::gate::{PublicKey, SecretKey};
use capability_store::{SinkOptions, Store};
use serde_json::json;

/// What a test does to the database behind the store's back (raw SQL).
pub trait Tamper {
    /// Deletes `writer`'s records after `keep_through`.
    fn cut(&self, writer: &str, keep_through: u64);
    /// Makes `writer`'s record `seq` say another tool (its stored content).
    fn rewrite(&self, writer: &str, seq: u64);
    /// Deletes `writer`'s records after `keep_through`, and every checkpoint after them.
    fn cut_with_checkpoints(&self, writer: &str, keep_through: u64);
    /// Deletes every record and checkpoint of `writer` (its registration stays).
    fn remove(&self, writer: &str);
    /// Deletes `writer`'s registration (`mcp_audit_writer`).
    fn unregister(&self, writer: &str);
}

const EVERY_5: CheckpointEvery = CheckpointEvery {
    records: 5,
    interval: Duration::from_secs(3600),
};

pub fn key() -> (Arc<SecretKey>, PublicKey) {
    let key = SecretKey::generate().expect("key");
    let public = key.public_key();
    (Arc::new(key), public)
}

pub fn record(i: u64) -> AuditRecord {
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

/// `n` records of `writer`, signed every 5 and on close; the sink's error if it refuses.
pub fn write(
    store: &dyn Store,
    writer: &str,
    key: &Arc<SecretKey>,
    n: u64,
) -> Result<(), capability::audit::AuditError> {
    let mut options = SinkOptions::writer(writer);
    let signer: Arc<dyn CheckpointSigner> = key.clone();
    options.checkpoints = Some((signer, EVERY_5));
    let sink = store.audit_sink(options)?;
    for i in 0..n {
        sink.append(record(i))?;
    }
    sink.close()
}

fn notes(store: &dyn Store, writer: &str) -> Vec<SignedCheckpoint> {
    let trail = store.read_trail().expect("trail");
    trail
        .tree_checkpoints
        .iter()
        .map(|t| SignedCheckpoint::parse(t).expect("a note"))
        .filter(|n| n.head.origin == format!("capability/{writer}"))
        .collect()
}

fn problems(store: &dyn Store, public: &PublicKey, writer: &str) -> Vec<ChainProblem> {
    let trail = store.read_trail().expect("trail");
    trail
        .tree_problems(Some(public))
        .remove(writer)
        .unwrap_or_default()
}

/// Checkpoints at 5 and 7, registered; restarted, at 10; every note the records' root.
pub fn signs_registers_and_resumes(store: &dyn Store) {
    let (key, public) = key();
    write(store, "w-1", &key, 7).expect("write");
    let sizes: Vec<u64> = notes(store, "w-1").iter().map(|n| n.head.size).collect();
    assert_eq!(sizes, [5, 7]);
    let trail = store.read_trail().expect("trail");
    assert_eq!(trail.writers.len(), 1);
    assert_eq!(trail.writers[0].writer, "w-1");
    let registration = SignedCheckpoint::parse(&trail.writers[0].note).expect("note");
    assert_eq!(
        registration.head.size, 0,
        "registered before its first record"
    );
    write(store, "w-1", &key, 3).expect("resume");
    let notes = notes(store, "w-1");
    assert_eq!(notes.last().map(|n| n.head.size), Some(10));
    let trail = store.read_trail().expect("trail");
    let tree = writer_tree(&trail.records, "w-1");
    for note in &notes {
        note.verify(&note.head.origin, &public).expect("signed");
        assert_eq!(tree.root(note.head.size), Ok(note.head.root));
    }
    assert_eq!(trail.writers.len(), 1, "registered once");
    assert!(trail.tree_problems(Some(&public)).is_empty());
}

/// Records 8..12 deleted: the tree checkpoint of 12 names them.
pub fn finds_a_cut_tail(store: &dyn Store, tamper: &dyn Tamper) {
    let (key, public) = key();
    write(store, "w-cut", &key, 12).expect("write");
    tamper.cut("w-cut", 7);
    let found = problems(store, &public, "w-cut");
    let cut = ChainProblem::TreeCut {
        size: 12,
        records: 7,
    };
    assert!(found.contains(&cut), "{found:?}");
    assert!(cut.to_string().contains("tail cut off"));
}

/// Record 3 says another tool: every tree checkpoint over it says so; the writer does not
/// resume over it.
pub fn finds_a_rewritten_record(store: &dyn Store, tamper: &dyn Tamper) {
    let (key, public) = key();
    write(store, "w-edit", &key, 7).expect("write");
    tamper.rewrite("w-edit", 3);
    let found = problems(store, &public, "w-edit");
    assert!(
        found.contains(&ChainProblem::TreeRewritten { size: 5 })
            && found.contains(&ChainProblem::TreeRewritten { size: 7 }),
        "{found:?}"
    );
    let refused = write(store, "w-edit", &key, 1).expect_err("refused");
    let said = refused.to_string();
    assert!(said.contains("cannot be resumed"), "{said}");
    assert!(said.contains("rewritten"), "{said}");
}

/// Every record and checkpoint of a writer deleted: its registration names it.
pub fn finds_a_removed_writer(store: &dyn Store, tamper: &dyn Tamper) {
    let (key, public) = key();
    write(store, "w-gone", &key, 4).expect("write");
    write(store, "w-stays", &key, 2).expect("write");
    tamper.remove("w-gone");
    let trail = store.read_trail().expect("trail");
    let found = trail.tree_problems(Some(&public));
    let gone = found.get("w-gone").expect("w-gone is a finding");
    let said = gone[0].to_string();
    assert!(
        matches!(&gone[0], ChainProblem::WriterGone { writer, .. } if writer == "w-gone"),
        "{gone:?}"
    );
    assert!(said.contains("\"w-gone\" registered at 20"), "{said}");
    assert!(said.contains("has no records"), "{said}");
    assert!(!found.contains_key("w-stays"), "{found:?}");

    // Its registration deleted too: the next writer's registration names it.
    tamper.unregister("w-gone");
    let found = store
        .read_trail()
        .expect("trail")
        .tree_problems(Some(&public));
    assert!(!found.contains_key("w-gone"), "{found:?}");
    let stays = found
        .get("w-stays")
        .expect("w-stays's registration names w-gone's");
    assert!(
        matches!(&stays[0], ChainProblem::RegistrationGone { writer } if writer == "w-stays"),
        "{stays:?}"
    );
    // And w-stays's checkpoints counted two registrations: one is left.
    assert!(
        matches!(
            &stays[1..],
            [ChainProblem::RegistrationRemoved {
                counted: 2,
                present: 1,
                latest_gone: false,
                ..
            }]
        ),
        "{stays:?}"
    );
}

/// A writer signing every 200 ms: checkpoints while idle, the last one `stopped`, no gap; then
/// records 4..6 cut with every checkpoint after record 3: consistent in itself, and a gap.
pub fn idle_checkpoints_and_a_cut_with_them(store: &dyn Store, tamper: &dyn Tamper) {
    use capability::audit::tlog::checkpoint_stopped;

    let (key, public) = key();
    let every = CheckpointEvery {
        records: 1_000,
        interval: Duration::from_millis(50),
    };
    let mut options = SinkOptions::writer("w-idle");
    let signer: Arc<dyn CheckpointSigner> = key;
    options.checkpoints = Some((signer, every));
    let sink = store.audit_sink(options).expect("sink");
    for i in 0..3 {
        sink.append(record(i)).expect("append");
    }
    // Idle: the sink signs again every interval (polled, never a fixed wait).
    let idle = |notes: Vec<SignedCheckpoint>| notes.iter().filter(|n| n.head.size == 3).count();
    assert!(
        capability_testkit::wait_for(|| idle(notes(store, "w-idle")) >= 2),
        "checkpoints signed while nothing was written"
    );
    for i in 3..6 {
        sink.append(record(i)).expect("append");
    }
    sink.close().expect("close");
    drop(sink);

    let notes = notes(store, "w-idle");
    let idle = notes.iter().filter(|n| n.head.size == 3).count();
    assert!(
        idle >= 2,
        "checkpoints signed while nothing was written: {idle}"
    );
    let last = notes.last().expect("a note");
    assert!(
        checkpoint_stopped(last) && last.head.size == 6,
        "{}",
        last.body
    );
    let later = "2099-01-01T00:00:00.000Z";
    let trail = store.read_trail().expect("trail");
    assert!(trail.tree_problems(Some(&public)).is_empty());
    assert!(
        trail.checkpoint_gaps(every.interval, later).is_empty(),
        "it stopped"
    );

    tamper.cut_with_checkpoints("w-idle", 3);
    let trail = store.read_trail().expect("trail");
    assert!(
        trail.tree_problems(Some(&public)).is_empty(),
        "the cut trail is consistent in itself"
    );
    let gaps = trail.checkpoint_gaps(every.interval, later);
    let found = gaps.get("w-idle").expect("a gap of w-idle");
    assert!(
        matches!(&found[0], ChainProblem::CheckpointGap { to, .. } if to == later),
        "{found:?}"
    );
    let said = found[0].to_string();
    assert!(
        said.contains(
            "missing checkpoints: writer \"w-idle\" signed none after its record 3 from 20"
        ),
        "{said}"
    );
}
