//! `capability audit verify --key` with the tree each writer keeps beside its records: on a
//! database, a writer whose records and checkpoints were all deleted is named from its
//! registration; on a JSON Lines trail, a record rewritten with the whole chain computed again
//! is named by the tree checkpoint whose root no longer matches.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use capability::audit::{ChainHead, CheckpointSigner, GENESIS, read_jsonl};
use capability::gate::SecretKey;
use capability_store::{SinkOptions, Store};

use crate::trails::{EVERY_5, capability, record};

fn scratch(name: &str) -> PathBuf {
    crate::trails::scratch("audit_trees", name)
}

/// `capability keygen` in `dir`; the secret key.
fn keygen(dir: &Path) -> Arc<SecretKey> {
    let (code, text) = capability(dir, &["keygen", "--out", "writer.key"]);
    assert_eq!(code, 0, "{text}");
    let text = std::fs::read_to_string(dir.join("writer.key")).expect("key");
    Arc::new(SecretKey::from_text(&text).expect("a key"))
}

#[test]
fn verify_names_a_writer_whose_records_were_all_deleted_from_a_database() {
    let dir = scratch("removed");
    let key = keygen(&dir);
    let db = dir.join("state.db");
    let store = capability_store::sqlite::SqliteStore::open(&db).expect("open");
    store.migrate().expect("migrate");
    for (writer, n) in [("w-gone", 3), ("w-stays", 2)] {
        let mut options = SinkOptions::writer(writer);
        let signer: Arc<dyn CheckpointSigner> = key.clone();
        options.checkpoints = Some((signer, EVERY_5));
        let sink = store.audit_sink(options).expect("sink");
        for i in 0..n {
            sink.append(record(&format!("t-{i}"))).expect("append");
        }
        sink.close().expect("close");
    }
    let (code, text) = capability(
        &dir,
        &["audit", "verify", "state.db", "--key", "writer.key.pub"],
    );
    assert_eq!(code, 0, "{text}");

    let raw = rusqlite::Connection::open(&db).expect("open");
    for table in [
        "mcp_audit_log",
        "mcp_audit_checkpoint",
        "mcp_audit_tree_checkpoint",
    ] {
        raw.execute(
            &format!("DELETE FROM {table} WHERE writer_id = 'w-gone'"),
            [],
        )
        .expect("delete");
    }
    let (code, text) = capability(
        &dir,
        &["audit", "verify", "state.db", "--key", "writer.key.pub"],
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("removed writer: writer \"w-gone\" registered at 20"),
        "{text}"
    );
}

/// `trail.jsonl` in `dir`: seven records of `replica-1`, checkpointed every five with
/// `writer.key` (made here), closed.
fn seven_records(dir: &Path) -> PathBuf {
    let trail = dir.join("trail.jsonl");
    crate::trails::seven_records(&trail, keygen(dir));
    trail
}

#[test]
fn verify_names_a_record_rewritten_with_its_chain_computed_again_in_a_file() {
    let dir = scratch("rewritten");
    let trail = seven_records(&dir);
    let (code, text) = capability(
        &dir,
        &["audit", "verify", "trail.jsonl", "--key", "writer.key.pub"],
    );
    assert_eq!(code, 0, "{text}");

    // Record 2 says another tool; every chain hash computed again; the checkpoints kept.
    let (records, _) = read_jsonl(&trail).expect("read");
    let mut head = ChainHead::new("replica-1", 0, GENESIS);
    let mut forged = records.into_iter().map(|mut r| {
        if r.seq == 2 {
            r.tool = "innocent".into();
        }
        head.seal(r).to_line()
    });
    let text = std::fs::read_to_string(&trail).expect("read");
    let out: String = text
        .lines()
        .map(|l| match l.starts_with("{\"agent\"") {
            true => forged.next().expect("a record"),
            false => l.to_owned(),
        })
        .map(|l| l + "\n")
        .collect();
    std::fs::write(&trail, out).expect("write");
    let (code, text) = capability(
        &dir,
        &["audit", "verify", "trail.jsonl", "--key", "writer.key.pub"],
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("record rewritten: the first 5 records"),
        "{text}"
    );
}

/// Each registration names the one before it: a writer deleted with its registration is found
/// by the next one's. The latest registration deleted with its writer, every writer having
/// signed its last checkpoint before it registered, is not (nothing names it): said here so
/// that the limit stays known.
#[test]
fn verify_names_a_writer_deleted_with_its_registration_unless_nothing_names_it() {
    let dir = scratch("unregistered");
    let key = keygen(&dir);
    let db = dir.join("state.db");
    let store = capability_store::sqlite::SqliteStore::open(&db).expect("open");
    store.migrate().expect("migrate");
    for writer in ["w-1", "w-2", "w-3"] {
        let mut options = SinkOptions::writer(writer);
        let signer: Arc<dyn CheckpointSigner> = key.clone();
        options.checkpoints = Some((signer, EVERY_5));
        let sink = store.audit_sink(options).expect("sink");
        sink.append(record("t")).expect("append");
        sink.close().expect("close");
    }
    let verify = || {
        capability(
            &dir,
            &["audit", "verify", "state.db", "--key", "writer.key.pub"],
        )
    };
    let (code, text) = verify();
    assert_eq!(code, 0, "{text}");
    let raw = rusqlite::Connection::open(&db).expect("open");
    let delete = |writer: &str| {
        for table in [
            "mcp_audit_log",
            "mcp_audit_checkpoint",
            "mcp_audit_tree_checkpoint",
            "mcp_audit_writer",
        ] {
            raw.execute(
                &format!("DELETE FROM {table} WHERE writer_id = ?1"),
                [writer],
            )
            .expect("delete");
        }
    };
    delete("w-3");
    let (code, text) = verify();
    assert_eq!(
        code, 0,
        "the latest registration is not named by any: {text}"
    );
    delete("w-1");
    let (code, text) = verify();
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "writer w-2: removed registration: the registration of writer \"w-2\" names one \
             before it that is no longer in the store"
        ),
        "{text}"
    );
}

/// Every tree checkpoint a writer signs names the store's latest registration: w-1, still
/// writing when w-2 registered, names w-2's in its checkpoint of 5; w-2 deleted with its
/// records, checkpoints and registration (it registered last) is then named through it.
#[test]
fn verify_names_the_latest_writer_deleted_with_its_registration_once_another_checkpointed() {
    let dir = scratch("latest");
    let key = keygen(&dir);
    let db = dir.join("state.db");
    let store = capability_store::sqlite::SqliteStore::open(&db).expect("open");
    store.migrate().expect("migrate");
    let open = |writer: &str| {
        let mut options = SinkOptions::writer(writer);
        let signer: Arc<dyn CheckpointSigner> = key.clone();
        options.checkpoints = Some((signer, EVERY_5));
        store.audit_sink(options).expect("sink")
    };
    let first = open("w-1");
    first.append(record("t-0")).expect("append");
    let last = open("w-2");
    last.append(record("t-0")).expect("append");
    last.close().expect("close");
    for i in 1..5 {
        first.append(record(&format!("t-{i}"))).expect("append");
    }
    first.close().expect("close");
    let verify = || {
        capability(
            &dir,
            &["audit", "verify", "state.db", "--key", "writer.key.pub"],
        )
    };
    let (code, text) = verify();
    assert_eq!(code, 0, "{text}");
    let raw = rusqlite::Connection::open(&db).expect("open");
    for table in [
        "mcp_audit_log",
        "mcp_audit_checkpoint",
        "mcp_audit_tree_checkpoint",
        "mcp_audit_writer",
    ] {
        raw.execute(&format!("DELETE FROM {table} WHERE writer_id = 'w-2'"), [])
            .expect("delete");
    }
    let (code, text) = verify();
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "writer w-1: removed writer: the tree checkpoint of size 5 that writer \"w-1\" signed \
             at 20"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "names the store's latest registration as it signed (of 2), and the store no longer \
             holds it: a registered writer was deleted with its records, its checkpoints and its \
             registration"
        ),
        "{text}"
    );
}

/// Records appended after a writer's last checkpoint by someone without its key extend the
/// hash chain (it needs no key); past twice the writer's interval of records (1,000) with no
/// checkpoint over them, `verify --key` names them. Fewer read as a writer killed before its
/// next checkpoint, and pass.
#[test]
fn verify_names_records_appended_without_the_key_past_the_checkpoint_interval() {
    let dir = scratch("appended");
    let trail = seven_records(&dir);
    let append = |n: usize| {
        let (records, report) = read_jsonl(&trail).expect("read");
        let mut head = ChainHead::new("replica-1", report.records, &report.last_hash);
        let mut text = std::fs::read_to_string(&trail).expect("read");
        for _ in 0..n {
            text.push_str(&head.seal(record("forged")).to_line());
            text.push('\n');
            head.commit();
        }
        std::fs::write(&trail, text).expect("write");
        records.len() + n
    };
    let verify = || {
        capability(
            &dir,
            &["audit", "verify", "trail.jsonl", "--key", "writer.key.pub"],
        )
    };
    assert_eq!(append(10), 17);
    let (code, text) = verify();
    assert_eq!(
        code, 0,
        "a few: a writer killed before its next checkpoint: {text}"
    );
    assert_eq!(append(2_000), 2_017);
    let (code, text) = verify();
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "records without a checkpoint: no signed tree checkpoint of writer \"replica-1\" \
             covers its records 8 to 2017"
        ),
        "{text}"
    );
}
