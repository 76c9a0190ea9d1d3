//! `capability audit rotate`: a JSON Lines trail's checkpoint key handed over to the next, the
//! statement a record of the trail; `audit verify --key old --key new` accepts the old key's
//! checkpoints up to the hand-over and the new key's after it, and names a checkpoint the old
//! key signs after it; `check-proof --rotation` takes the statement the command printed. A
//! store's key hands over between its writers' runs, at a place in its registrations.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capability::audit::{AuditSink, CheckpointEvery, CheckpointSigner, FlushPolicy, JsonlSink};
use capability::gate::SecretKey;
use capability_store::{SinkOptions, Store};

use crate::trails::{capability, record};

const EVERY_5: CheckpointEvery = CheckpointEvery {
    records: 5,
    interval: Duration::from_secs(3600),
};

fn secret(dir: &Path, name: &str) -> Arc<SecretKey> {
    let text = std::fs::read_to_string(dir.join(name)).expect("key");
    Arc::new(SecretKey::from_text(&text).expect("a key"))
}

/// `n` more records of `replica-1`, checkpoints signed by `key`.
fn write(path: &Path, key: Arc<SecretKey>, n: usize) {
    let sink = JsonlSink::open(path, FlushPolicy::EveryRecord)
        .expect("open")
        .with_writer("replica-1")
        .expect("writer")
        .with_checkpoints(key, EVERY_5);
    for i in 0..n {
        sink.append(record(&format!("t-{i}"))).expect("append");
    }
    sink.close().expect("close");
}

fn verify(dir: &Path, keys: &[&str]) -> (i32, String) {
    let mut args = vec!["audit", "verify", "trail.jsonl"];
    for key in keys {
        args.extend(["--key", key]);
    }
    capability(dir, &args)
}

#[test]
fn a_rotated_key_is_a_record_and_the_retired_key_signs_nothing_after_it() {
    let dir = crate::trails::scratch("audit_rotate", "jsonl");
    for key in ["old.key", "new.key"] {
        let (code, text) = capability(&dir, &["keygen", "--out", key]);
        assert_eq!(code, 0, "{text}");
    }
    let path = dir.join("trail.jsonl");
    write(&path, secret(&dir, "old.key"), 3);

    let args = [
        "audit",
        "rotate",
        "trail.jsonl",
        "--old-key",
        "old.key",
        "--new-key",
        "new.key.pub",
    ];
    let (code, statement) = capability(&dir, &args);
    assert_eq!(code, 0, "{statement}");
    assert!(
        statement.starts_with("capability/key-rotation/v1\ncapability/replica-1\n4\n"),
        "{statement}"
    );
    std::fs::write(dir.join("rotation.note"), &statement).expect("write");
    let (_, report) = capability::audit::read_jsonl(&path).expect("read");
    assert_eq!(report.records, 4, "the rotation is record 4");

    write(&path, secret(&dir, "new.key"), 2);
    let (code, text) = verify(&dir, &["old.key.pub", "new.key.pub"]);
    assert_eq!(code, 0, "{text}");
    let (code, text) = verify(&dir, &["old.key.pub"]);
    assert_eq!(code, 1, "the new key not given: {text}");
    assert!(text.contains("which is not given"), "{text}");
    let (code, text) = verify(&dir, &["new.key.pub"]);
    assert_eq!(code, 1, "the old key not given: {text}");

    // Proofs of a record before the hand-over and one after, each under its own key.
    for (seq, key) in [("2", "old.key"), ("6", "new.key")] {
        let record = format!("replica-1:{seq}");
        let out = format!("r{seq}.tlog-proof");
        let prove = [
            "audit",
            "prove",
            "trail.jsonl",
            "--record",
            &record,
            "--key",
            key,
            "--out",
            &out,
        ];
        let (code, text) = capability(&dir, &prove);
        assert_eq!(code, 0, "{text}");
        let check = [
            "audit",
            "check-proof",
            &out,
            "--key",
            "old.key.pub",
            "--key",
            "new.key.pub",
            "--rotation",
            "rotation.note",
        ];
        let (code, text) = capability(&dir, &check);
        assert_eq!(code, 0, "record {seq}: {text}");
    }

    // Whoever still holds the retired key writes on and signs: a finding.
    write(&path, secret(&dir, "old.key"), 1);
    let (code, text) = verify(&dir, &["old.key.pub", "new.key.pub"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("the checkpoint of 7 records is signed by key")
            && text.contains("which handed over at size 4"),
        "{text}"
    );

    // Whoever holds the new key writes the whole log again under it, the rotation record left
    // out: the trail alone no longer says when the new key took over, so both keys pass it.
    // The statement kept apart (`--rotation`) still does, and names the forgery.
    write(&dir.join("forged.jsonl"), secret(&dir, "new.key"), 6);
    let forged = |extra: &[&'static str]| {
        let mut args = vec![
            "audit",
            "verify",
            "forged.jsonl",
            "--key",
            "old.key.pub",
            "--key",
            "new.key.pub",
        ];
        args.extend_from_slice(extra);
        capability(&dir, &args)
    };
    let (code, text) = forged(&[]);
    assert_eq!(code, 0, "the trail alone cannot tell: {text}");
    let (code, text) = forged(&["--rotation", "rotation.note"]);
    assert_eq!(code, 1, "the statement kept apart tells: {text}");
    assert!(
        text.contains("rotation") || text.contains("handed over"),
        "{text}"
    );
}

/// One run of a store's writer `writer`: `n` records, checkpoints signed by `key`.
fn run(db: &Path, writer: &str, key: Arc<SecretKey>, n: usize) {
    let store = capability_store::sqlite::SqliteStore::open(db).expect("open");
    let mut options = SinkOptions::writer(writer);
    let signer: Arc<dyn CheckpointSigner> = key;
    options.checkpoints = Some((signer, EVERY_5));
    let sink = store.audit_sink(options).expect("sink");
    for i in 0..n {
        sink.append(record(&format!("t-{i}"))).expect("append");
    }
    sink.close().expect("close");
}

#[test]
fn a_stores_key_hands_over_between_runs_and_a_run_registered_after_it_under_the_retired_key_is_named()
 {
    let dir = crate::trails::scratch("audit_rotate", "store");
    for key in ["old.key", "new.key"] {
        let (code, text) = capability(&dir, &["keygen", "--out", key]);
        assert_eq!(code, 0, "{text}");
    }
    let (code, text) = capability(&dir, &["db", "migrate", "state.db"]);
    assert_eq!(code, 0, "{text}");
    let db = dir.join("state.db");
    run(&db, "gw/1", secret(&dir, "old.key"), 3);
    run(&db, "gw/2", secret(&dir, "old.key"), 2);

    // The rotation's own run is the store's registration 3; the new key signs from 4.
    let rotate = [
        "audit",
        "rotate",
        "state.db",
        "--old-key",
        "old.key",
        "--new-key",
        "new.key.pub",
    ];
    let (code, statement) = capability(&dir, &rotate);
    assert_eq!(code, 0, "{statement}");
    assert!(
        statement.starts_with("capability/key-rotation/v1\ncapability:store\n4\n"),
        "{statement}"
    );
    std::fs::write(dir.join("rotation.note"), &statement).expect("write");
    run(&db, "gw/3", secret(&dir, "new.key"), 2);
    let verify = |keys: &[&str]| {
        let mut args = vec!["audit", "verify", "state.db"];
        for key in keys {
            args.extend(["--key", key]);
        }
        capability(&dir, &args)
    };
    let (code, text) = verify(&["old.key.pub", "new.key.pub"]);
    assert_eq!(code, 0, "{text}");

    // Whoever still holds the retired key starts a run after the hand-over: named.
    run(&db, "gw/4", secret(&dir, "old.key"), 1);
    let (code, text) = verify(&["old.key.pub", "new.key.pub"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "writer \"gw/4\" is the store's registration 5, signed by the key that \
             handed over at registration 4"
        ),
        "{text}"
    );
    assert!(
        !text.contains("\"gw/3\" is"),
        "the new key's run is not named: {text}"
    );

    // And a run of the new key's before the hand-over cannot be made to pass: a store where
    // the new key signed registration 2 is named too.
    let early = dir.join("early.db");
    let (code, text) = capability(&dir, &["db", "migrate", "early.db"]);
    assert_eq!(code, 0, "{text}");
    run(&early, "gw/1", secret(&dir, "old.key"), 1);
    run(&early, "gw/2", secret(&dir, "new.key"), 1);
    let rotate_early = [
        "audit",
        "rotate",
        "early.db",
        "--old-key",
        "old.key",
        "--new-key",
        "new.key.pub",
    ];
    let (code, text) = capability(&dir, &rotate_early);
    assert_eq!(code, 0, "{text}");
    let args = [
        "audit",
        "verify",
        "early.db",
        "--key",
        "old.key.pub",
        "--key",
        "new.key.pub",
    ];
    let (code, text) = capability(&dir, &args);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "writer \"gw/2\" is the store's registration 2, signed by a key that takes \
             over only at registration 4"
        ),
        "{text}"
    );
}

#[test]
fn a_busy_trail_is_refused() {
    let dir = crate::trails::scratch("audit_rotate", "refused");
    for key in ["old.key", "new.key"] {
        let (code, text) = capability(&dir, &["keygen", "--out", key]);
        assert_eq!(code, 0, "{text}");
    }
    let args = |trail: &'static str| {
        [
            "audit",
            "rotate",
            trail,
            "--old-key",
            "old.key",
            "--new-key",
            "new.key.pub",
        ]
    };

    let path = dir.join("trail.jsonl");
    write(&path, secret(&dir, "old.key"), 2);
    let running = JsonlSink::open(&path, FlushPolicy::EveryRecord).expect("open");
    let (code, text) = capability(&dir, &args("trail.jsonl"));
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("another writer has this trail open"),
        "{text}"
    );
    drop(running);
}
