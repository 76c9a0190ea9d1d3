//! `capability audit witness-submit` and `audit verify --witness-key/--witnesses`, with real
//! `capability audit witness` processes on loopback: a trail whose writers' latest tree
//! checkpoints carry no cosignature, one of the two required, a stranger's, two, and an edited
//! one; and `audit verify --at` finding the span a cut took with its checkpoints.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use capability::audit::tlog::cosignature::public_key_bytes;
use capability::audit::tlog::{SignedCheckpoint, cosigner_key_id};
use capability::audit::{CheckpointSigner, CheckpointVerifier};
use capability::gate::{PublicKey, SecretKey};
use capability_store::{SinkOptions, Store};

use crate::trails::{EVERY_5, WitnessProcess, capability, record, seven_records};

/// A folder with keys `writer.key`, `w1.key`, `w2.key` and `stranger.key` (and their `.pub`).
fn keys(name: &str) -> (PathBuf, Arc<SecretKey>) {
    let dir = crate::trails::scratch("audit_witnessed", name);
    for key in ["writer.key", "w1.key", "w2.key", "stranger.key"] {
        let (code, text) = capability(&dir, &["keygen", "--out", key]);
        assert_eq!(code, 0, "{text}");
    }
    let text = std::fs::read_to_string(dir.join("writer.key")).expect("key");
    (dir, Arc::new(SecretKey::from_text(&text).expect("a key")))
}

fn start_witness(dir: &Path, key: &str, log: &str) -> WitnessProcess {
    crate::trails::start_witness(dir, key, &format!("{key}.state.json"), log)
}

fn verify(dir: &Path, trail: &str, needed: &str) -> (i32, String) {
    let args = [
        "audit",
        "verify",
        trail,
        "--key",
        "writer.key.pub",
        "--witness-key",
        "w1.key.pub",
        "--witness-key",
        "w2.key.pub",
        "--witnesses",
        needed,
    ];
    capability(dir, &args)
}

fn submit(dir: &Path, trail: &str, url: &str) -> (i32, String) {
    capability(dir, &["audit", "witness-submit", trail, "--witness", url])
}

#[test]
fn verify_counts_the_cosignatures_of_the_witnesses_given_and_refuses_an_edited_one() {
    let (dir, key) = keys("jsonl");
    seven_records(&dir.join("trail.jsonl"), key);
    let log = "capability/replica-1=writer.key.pub";
    let (w1, w2) = (
        start_witness(&dir, "w1.key", log),
        start_witness(&dir, "w2.key", log),
    );
    let stranger = start_witness(&dir, "stranger.key", log);

    let (code, text) = verify(&dir, "trail.jsonl", "1");
    assert_eq!(code, 1, "no cosignature yet: {text}");
    assert!(
        text.contains("not witnessed: the latest tree checkpoint (the tree of 7 records)")
            && text.contains("0 valid cosignature(s) where 1 are required")
            && text.contains("w1.key.pub (no cosignature)"),
        "{text}"
    );

    let (code, text) = submit(&dir, "trail.jsonl", &w1.url);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("the tree of 7 records cosigned by"), "{text}");
    assert_eq!(verify(&dir, "trail.jsonl", "1").0, 0);
    let (code, text) = verify(&dir, "trail.jsonl", "2");
    assert_eq!(code, 1, "one of the two required: {text}");
    assert!(text.contains("w2.key.pub (no cosignature)"), "{text}");

    // A witness whose key the verifier did not give: its cosignature does not count.
    let (code, text) = submit(&dir, "trail.jsonl", &stranger.url);
    assert_eq!(code, 0, "{text}");
    let (code, text) = verify(&dir, "trail.jsonl", "2");
    assert_eq!(code, 1, "a stranger's cosignature counted: {text}");

    let (code, text) = submit(&dir, "trail.jsonl", &w2.url);
    assert_eq!(code, 0, "{text}");
    let (code, text) = verify(&dir, "trail.jsonl", "2");
    assert_eq!(code, 0, "two of two: {text}");

    // A record's proof is made under the stored checkpoint, so it carries the cosignatures.
    let prove = [
        "audit",
        "prove",
        "trail.jsonl",
        "--record",
        "replica-1:7",
        "--key",
        "writer.key",
        "--out",
        "r7.tlog-proof",
    ];
    let (code, text) = capability(&dir, &prove);
    assert_eq!(code, 0, "{text}");
    let check = [
        "audit",
        "check-proof",
        "r7.tlog-proof",
        "--key",
        "writer.key.pub",
        "--witness-key",
        "w1.key.pub",
        "--witness-key",
        "w2.key.pub",
    ];
    let (code, text) = capability(&dir, &check);
    assert_eq!(code, 0, "{text}");

    // w2's cosignature edited (one bit of its signature) in the line that carries it.
    let w2_key = std::fs::read_to_string(dir.join("w2.key.pub")).expect("read");
    let w2_key = PublicKey::from_text(&w2_key).expect("a key");
    let w2_bytes = public_key_bytes(&w2_key.public_key_hex()).expect("32 bytes");
    let path = dir.join("trail.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&path)
        .expect("read")
        .lines()
        .map(|line| {
            let Ok(serde_json::Value::Object(mut value)) = serde_json::from_str(line) else {
                return line.to_owned();
            };
            let Some(tree) = value.get_mut("tree_checkpoint") else {
                return line.to_owned();
            };
            let text = tree["note"].as_str().expect("a note").to_owned();
            let mut note = SignedCheckpoint::parse(&text).expect("a note");
            for signature in &mut note.signatures {
                if signature.key_id == cosigner_key_id(&signature.name, &w2_bytes) {
                    let last = signature.signature.len() - 1;
                    signature.signature[last] ^= 1;
                }
            }
            tree["note"] = note.to_text().into();
            serde_json::to_string(&value).expect("json")
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").expect("write");
    let (code, text) = verify(&dir, "trail.jsonl", "2");
    assert_eq!(code, 1, "an edited cosignature counted: {text}");
    assert!(
        text.contains("w2.key.pub (its cosignature is forged)"),
        "{text}"
    );
    assert_eq!(verify(&dir, "trail.jsonl", "1").0, 0, "w1's still holds");
}

/// `w-db` writes 3 records to `store` (`target`), signed with `key`; witnesses cosign its
/// latest checkpoint, stored over the note in the database.
fn cosigned_in_place(dir: &Path, target: &str, store: &dyn Store, key: Arc<SecretKey>) {
    let mut options = SinkOptions::writer("w-db");
    let signer: Arc<dyn CheckpointSigner> = key;
    options.checkpoints = Some((signer, EVERY_5));
    let sink = store.audit_sink(options).expect("sink");
    for i in 0..3 {
        sink.append(record(&format!("t-{i}"))).expect("append");
    }
    sink.close().expect("close");
    drop(sink);
    let w1 = start_witness(dir, "w1.key", "capability/w-db=writer.key.pub");
    let w2 = start_witness(dir, "w2.key", "capability/w-db=writer.key.pub");
    let (code, text) = verify(dir, target, "2");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("writer w-db: not witnessed"), "{text}");
    for url in [&w1.url, &w2.url] {
        let (code, text) = submit(dir, target, url);
        assert_eq!(code, 0, "{text}");
    }
    let (code, text) = verify(dir, target, "2");
    assert_eq!(code, 0, "{text}");
}

#[test]
fn a_sqlite_writers_checkpoint_is_cosigned_in_place() {
    let (dir, key) = keys("sqlite");
    let db = dir.join("state.db");
    let store = capability_store::sqlite::SqliteStore::open(&db).expect("open");
    store.migrate().expect("migrate");
    cosigned_in_place(&dir, "state.db", &store, key);
}

#[test]
fn a_postgres_writers_checkpoint_is_cosigned_in_place() {
    let Some(url) = capability_testkit::pg::schema_url("cli_cosigned") else {
        return;
    };
    let (dir, key) = keys("postgres");
    let store = capability_store::open(&url).expect("open");
    store.migrate().expect("migrate");
    cosigned_in_place(&dir, &url, store.as_ref(), key);
}

/// A tail cut with every checkpoint after it leaves a trail consistent in itself; the time
/// since its last checkpoint, with no `stopped` one, is what `audit verify` names.
#[test]
fn verify_names_the_span_a_cut_took_with_its_checkpoints() {
    let (dir, key) = keys("gap");
    let path = dir.join("trail.jsonl");
    seven_records(&path, key);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let later = capability::audit::time::utc_at(secs + 120);
    let args = [
        "audit",
        "verify",
        "trail.jsonl",
        "--key",
        "writer.key.pub",
        "--at",
        &later,
    ];
    let (code, text) = capability(&dir, &args);
    assert_eq!(code, 0, "it stopped, and said so: {text}");

    // Records 6 and 7 cut, and every line after record 5: its checkpoints with them.
    let text = std::fs::read_to_string(&path).expect("read");
    let kept: Vec<&str> = text
        .lines()
        .take_while(|l| !l.contains("\"seq\":6,"))
        .collect();
    std::fs::write(&path, kept.join("\n") + "\n").expect("write");
    let (code, text) = capability(&dir, &args);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "missing checkpoints: writer \"replica-1\" signed none after its record 5 from 20"
        ) && text.contains(&format!("to {later}")),
        "{text}"
    );
    let (code, text) = capability(&dir, &args[..5]);
    assert_eq!(code, 0, "as of now, within the interval: {text}");
}
