//! Witnesses, cosignatures and key rotation (`capability_audit::tlog`): cross-checked against
//! an independent implementation (aics-tlog, `testdata/witness/`), and against a log that
//! forks, a stale request, an unknown log or key, a witness nobody trusts, a rotated key, and a
//! state file torn or edited.

use std::collections::BTreeMap;

use capability::audit::tlog::encoding::from_hex;
use capability::audit::tlog::note::NoteSignature;
use capability::audit::tlog::{
    AddCheckpoint, Cosigner, KeyRotation, LogKey, LogKeys, SignedCheckpoint, TlogError, Tree,
    TreeHead, Witness, WitnessError, WitnessQuorum, cosigner_vkey, verifier_key,
};
use capability::audit::{CheckpointSigner, CheckpointVerifier};
use capability::gate::{PublicKey, SecretKey};
use serde_json::Value;

const ORIGIN: &str = "capability/replica-1";

fn key_from_seed(hex: &str) -> SecretKey {
    SecretKey::from_text(hex).expect("a seed")
}

/// A second handle on a key (the key type is deliberately not `Clone`).
fn dup(key: &SecretKey) -> SecretKey {
    SecretKey::from_text(&key.to_text()).expect("its own text")
}

fn public_bytes(key: &dyn CheckpointVerifier) -> [u8; 32] {
    from_hex(&key.public_key_hex())
        .and_then(|k| <[u8; 32]>::try_from(k).ok())
        .expect("32 bytes")
}

fn tree(records: &[&str]) -> Tree {
    let mut tree = Tree::new();
    for r in records {
        tree.push(r.as_bytes());
    }
    tree
}

fn signed(tree: &Tree, size: u64, key: &SecretKey) -> SignedCheckpoint {
    TreeHead {
        origin: ORIGIN.into(),
        size,
        root: tree.root(size).unwrap(),
    }
    .sign(key)
    .unwrap()
}

fn witness_at(path: &std::path::Path, witness: &SecretKey, log: &SecretKey) -> Witness {
    let cosigner = Cosigner::new("witness.test/w1", Box::new(dup(witness))).unwrap();
    let keys: Vec<LogKey> = vec![Box::new(log.public_key())];
    Witness::open(cosigner, BTreeMap::from([(ORIGIN.to_owned(), keys)]), path).unwrap()
}

fn add(old: u64, proof: Vec<[u8; 32]>, checkpoint: &SignedCheckpoint) -> AddCheckpoint {
    // Through the wire format, as the HTTP server reads it.
    let request = AddCheckpoint {
        old,
        proof,
        checkpoint: checkpoint.clone(),
    };
    AddCheckpoint::parse(&request.to_text()).unwrap()
}

#[test]
fn cosignatures_are_byte_for_byte_those_of_an_independent_implementation() {
    let vectors: Value =
        serde_json::from_str(include_str!("../testdata/witness/cosignatures.json"))
            .expect("the vectors");
    let log = key_from_seed(vectors["log_seed"].as_str().unwrap());
    let witness = key_from_seed(vectors["witness_seed"].as_str().unwrap());
    let name = vectors["witness_name"].as_str().unwrap();
    let cosigner = Cosigner::new(name, Box::new(dup(&witness))).unwrap();
    assert_eq!(cosigner.vkey(), vectors["witness_vkey"].as_str().unwrap());
    assert_eq!(
        cosigner_vkey(name, &public_bytes(&witness.public_key())),
        cosigner.vkey()
    );
    assert_eq!(
        verifier_key(ORIGIN, &public_bytes(&log.public_key())),
        vectors["log_vkey"].as_str().unwrap()
    );
    let witness_public = witness.public_key();
    for case in vectors["cases"].as_array().unwrap() {
        let text = case["note"].as_str().unwrap();
        let note = SignedCheckpoint::parse(text).unwrap();
        assert_eq!(note.to_text(), text);
        note.verify(ORIGIN, &log.public_key()).unwrap();
        // Their cosignature verifies here...
        let quorum = WitnessQuorum::new(vec![("w1".into(), &witness_public)], 1);
        let cosigned = quorum.check(&note).unwrap();
        assert_eq!(cosigned[0].time, case["time"].as_u64().unwrap());
        // ... and ours, for the same key, time and note, is the same line (Ed25519 is
        // deterministic), so their verifier takes ours.
        let mine = cosigner
            .cosign(&note, case["time"].as_u64().unwrap())
            .unwrap();
        assert_eq!(&mine, note.signatures.last().unwrap());
        // The log's own signature is no cosignature (another key id algorithm byte).
        let log_public = log.public_key();
        let as_witness = WitnessQuorum::new(vec![("log".into(), &log_public)], 1);
        assert!(matches!(
            as_witness.check(&note),
            Err(TlogError::Quorum { .. })
        ));
    }
}

#[test]
fn a_witness_cosigns_growth_and_refuses_a_fork_leaving_its_state_unchanged() {
    let dir = capability_testkit::Scratch::new("witness-1");
    let state = dir.join("witness.json");
    let (log, w) = (
        SecretKey::generate().unwrap(),
        SecretKey::generate().unwrap(),
    );
    let witness = witness_at(&state, &w, &log);
    let honest = tree(&["a", "b", "c", "d", "e", "f"]);
    let first = signed(&honest, 3, &log);
    let lines = witness
        .add_checkpoint(&add(0, vec![], &first), 1_000)
        .unwrap();
    let mut cosigned = first.clone();
    cosigned.add_signatures(lines);
    let trusted = w.public_key();
    let quorum = WitnessQuorum::new(vec![("w1".into(), &trusted)], 1);
    assert_eq!(quorum.check(&cosigned).unwrap()[0].time, 1_000);

    let grown = signed(&honest, 5, &log);
    let proof = honest.consistency_proof(3, 5).unwrap();
    witness
        .add_checkpoint(&add(3, proof, &grown), 1_001)
        .unwrap();
    // The same checkpoint again: cosigned again (same size, same root).
    witness
        .add_checkpoint(&add(5, vec![], &grown), 1_002)
        .unwrap();
    let before = std::fs::read(&state).unwrap();

    // A fork: another tree of 5 records, signed by the log's own key.
    let forked = tree(&["a", "b", "c", "X", "e"]);
    let fork = witness
        .add_checkpoint(&add(5, vec![], &signed(&forked, 5, &log)), 1_003)
        .unwrap_err();
    assert_eq!(fork.status(), 422);
    assert!(fork.to_string().starts_with("fork: "), "{fork}");
    // The forked tree grown to 6, with its own (valid) proof from 5: not the tree held.
    let grown_fork = tree(&["a", "b", "c", "X", "e", "f"]);
    let proof = grown_fork.consistency_proof(5, 6).unwrap();
    let rewrite = witness
        .add_checkpoint(&add(5, proof, &signed(&grown_fork, 6, &log)), 1_004)
        .unwrap_err();
    assert_eq!(rewrite.status(), 422);
    assert!(rewrite.to_string().contains("does not extend"), "{rewrite}");
    // A smaller tree.
    let smaller = witness
        .add_checkpoint(&add(5, vec![], &signed(&honest, 4, &log)), 1_005)
        .unwrap_err();
    assert_eq!(smaller.status(), 400);
    assert!(smaller.to_string().contains("would shrink"), "{smaller}");
    assert_eq!(
        std::fs::read(&state).unwrap(),
        before,
        "the state is unchanged"
    );
    assert_eq!(witness.held(ORIGIN).unwrap().head.size, 5);
}

#[test]
fn a_stale_request_gets_409_with_the_size_held() {
    let dir = capability_testkit::Scratch::new("witness-2");
    let (log, w) = (
        SecretKey::generate().unwrap(),
        SecretKey::generate().unwrap(),
    );
    let witness = witness_at(&dir.join("state.json"), &w, &log);
    let t = tree(&["a", "b", "c", "d"]);
    witness
        .add_checkpoint(&add(0, vec![], &signed(&t, 2, &log)), 1)
        .unwrap();
    let stale = witness
        .add_checkpoint(&add(0, vec![], &signed(&t, 4, &log)), 2)
        .unwrap_err();
    assert_eq!(
        stale,
        WitnessError::Conflict {
            origin: ORIGIN.into(),
            old: 0,
            held: 2
        }
    );
    assert_eq!(stale.status(), 409);
    assert!(
        stale
            .to_string()
            .contains("holds a checkpoint of 2 records"),
        "{stale}"
    );
    // With the proof from the size held, it goes through.
    let proof = t.consistency_proof(2, 4).unwrap();
    witness
        .add_checkpoint(&add(2, proof, &signed(&t, 4, &log)), 3)
        .unwrap();
}

#[test]
fn an_unknown_log_key_or_a_forged_signature_is_refused() {
    let dir = capability_testkit::Scratch::new("witness-3");
    let (log, w) = (
        SecretKey::generate().unwrap(),
        SecretKey::generate().unwrap(),
    );
    let witness = witness_at(&dir.join("state.json"), &w, &log);
    let t = tree(&["a", "b"]);
    let other_log = TreeHead {
        origin: "capability/replica-2".into(),
        size: 2,
        root: t.root(2).unwrap(),
    }
    .sign(&log)
    .unwrap();
    let unknown = witness
        .add_checkpoint(&add(0, vec![], &other_log), 1)
        .unwrap_err();
    assert_eq!(unknown.status(), 404);
    assert!(unknown.to_string().contains("unknown log"), "{unknown}");

    let stranger = SecretKey::generate().unwrap();
    let wrong_key = witness
        .add_checkpoint(&add(0, vec![], &signed(&t, 2, &stranger)), 1)
        .unwrap_err();
    assert_eq!(wrong_key.status(), 403);
    assert!(
        wrong_key
            .to_string()
            .contains("not signed by a key this witness trusts")
    );

    let text = signed(&t, 2, &log).to_text().replacen("\n2\n", "\n1\n", 1);
    let forged = SignedCheckpoint::parse(&text).unwrap();
    let forged = witness
        .add_checkpoint(&add(0, vec![], &forged), 1)
        .unwrap_err();
    assert_eq!(forged.status(), 403);
    assert!(forged.to_string().contains("forged signature"), "{forged}");
    assert!(witness.held(ORIGIN).is_none());
}

#[test]
fn malformed_requests_are_400s_that_say_what() {
    for (body, what) in [
        ("old 01\n\nx\n", "`old <decimal size>`"),
        ("new 1\n\nx\n", "`old <decimal size>`"),
        ("old 1\n", "no blank line"),
        ("old 1\nnot base64!\n\nx\n", "32-byte hash"),
        ("old 0\n\norigin\n2\n", "not a signed checkpoint"),
    ] {
        let error = AddCheckpoint::parse(body).unwrap_err();
        assert_eq!(error.status(), 400);
        assert!(error.to_string().contains(what), "{error} for {body:?}");
    }
    let lines = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n".repeat(64);
    let error = AddCheckpoint::parse(&format!("old 1\n{lines}\nx\n")).unwrap_err();
    assert!(error.to_string().contains("more than 63"), "{error}");
}

#[test]
fn a_witness_nobody_trusts_does_not_count_and_the_quorum_names_who_is_missing() {
    let log = SecretKey::generate().unwrap();
    let (w1, w2, rogue) = (
        SecretKey::generate().unwrap(),
        SecretKey::generate().unwrap(),
        SecretKey::generate().unwrap(),
    );
    let t = tree(&["a"]);
    let mut note = signed(&t, 1, &log);
    for (name, key) in [("w1.test", &w1), ("rogue.test", &rogue)] {
        let cosigner = Cosigner::new(name, Box::new(dup(key))).unwrap();
        note.add_signatures([cosigner.cosign(&note, 7).unwrap()]);
    }
    let (p1, p2) = (w1.public_key(), w2.public_key());
    let keys: Vec<(String, &dyn CheckpointVerifier)> =
        vec![("w1.pub".into(), &p1), ("w2.pub".into(), &p2)];
    assert_eq!(
        WitnessQuorum::new(keys.clone(), 1)
            .check(&note)
            .unwrap()
            .len(),
        1
    );
    let short = WitnessQuorum::new(keys.clone(), 2)
        .check(&note)
        .unwrap_err();
    assert_eq!(
        short.to_string(),
        "witnesses: 1 valid cosignature(s) where 2 are required (cosigned: [w1.pub]; missing: \
         [w2.pub (no cosignature)])"
    );
    // w1 given twice under two names still counts once.
    let twice: Vec<(String, &dyn CheckpointVerifier)> =
        vec![("w1.pub".into(), &p1), ("w1-again.pub".into(), &p1)];
    assert!(WitnessQuorum::new(twice, 2).check(&note).is_err());
    // A cosignature line of w1 altered: named as forged.
    let mut altered = note.clone();
    altered.signatures[1].signature[20] ^= 1;
    let forged = WitnessQuorum::new(keys, 1).check(&altered).unwrap_err();
    assert!(
        forged
            .to_string()
            .contains("w1.pub (its cosignature is forged)"),
        "{forged}"
    );
}

#[test]
fn a_rotated_key_verifies_within_its_span_only() {
    let (old, new, never) = (
        SecretKey::generate().unwrap(),
        SecretKey::generate().unwrap(),
        SecretKey::generate().unwrap(),
    );
    let rotation = KeyRotation::sign(ORIGIN, 4, &new.public_key_hex(), &old).unwrap();
    let text = rotation.to_text();
    assert!(text.starts_with("capability/key-rotation/v1\ncapability/replica-1\n4\n"));
    assert_eq!(KeyRotation::parse(&text).unwrap(), rotation);
    assert!(
        SignedCheckpoint::parse(&text).is_err(),
        "a rotation is no checkpoint"
    );

    let (po, pn) = (old.public_key(), new.public_key());
    let keys: [&dyn CheckpointVerifier; 2] = [&pn, &po];
    let log = LogKeys::new(ORIGIN, &keys, std::slice::from_ref(&rotation)).unwrap();
    let t = tree(&["a", "b", "c", "d", "e", "f"]);
    assert!(
        log.verify(&signed(&t, 3, &old)).is_ok(),
        "old keys keep verifying old trees"
    );
    assert!(log.verify(&signed(&t, 4, &old)).is_ok());
    assert!(log.verify(&signed(&t, 4, &new)).is_ok());
    assert!(log.verify(&signed(&t, 6, &new)).is_ok());
    let early = log.verify(&signed(&t, 3, &new)).err().unwrap();
    assert!(
        early.to_string().contains("takes over only at size 4"),
        "{early}"
    );
    let late = log.verify(&signed(&t, 5, &old)).err().unwrap();
    assert!(late.to_string().contains("handed over at size 4"), "{late}");
    let stranger = log.verify(&signed(&t, 5, &never)).err().unwrap();
    assert!(matches!(stranger, TlogError::WrongKey { .. }), "{stranger}");

    // A hand-over signed by a key that is not the one it retires.
    let usurper = KeyRotation::sign(ORIGIN, 4, &never.public_key_hex(), &never).unwrap();
    let pv = never.public_key();
    let keys: [&dyn CheckpointVerifier; 2] = [&po, &pv];
    let refused = LogKeys::new(ORIGIN, &keys, &[usurper]).err().unwrap();
    assert!(
        refused
            .to_string()
            .contains("not signed by the key it retires"),
        "{refused}"
    );
    let keys: [&dyn CheckpointVerifier; 3] = [&po, &pn, &pv];
    let stray = LogKeys::new(ORIGIN, &keys, &[rotation]).err().unwrap();
    assert!(
        stray.to_string().contains("no rotation hands over to it"),
        "{stray}"
    );
    // An edited rotation (another size) no longer verifies.
    let edited = text.replacen("\n4\n", "\n2\n", 1);
    let edited = KeyRotation::parse(&edited).unwrap();
    let keys: [&dyn CheckpointVerifier; 2] = [&po, &pn];
    let refused = LogKeys::new(ORIGIN, &keys, &[edited]).err().unwrap();
    assert!(
        refused
            .to_string()
            .contains("not signed by the key it retires"),
        "{refused}"
    );
}

#[test]
fn a_restarted_witness_keeps_its_state_and_an_edited_or_torn_file_is_an_error() {
    let dir = capability_testkit::Scratch::new("witness-4");
    let state = dir.join("state.json");
    let (log, w) = (
        SecretKey::generate().unwrap(),
        SecretKey::generate().unwrap(),
    );
    let t = tree(&["a", "b", "c"]);
    witness_at(&state, &w, &log)
        .add_checkpoint(&add(0, vec![], &signed(&t, 3, &log)), 1)
        .unwrap();
    let again = witness_at(&state, &w, &log);
    assert_eq!(again.held(ORIGIN).unwrap().head.size, 3);
    let stale = again.add_checkpoint(&add(0, vec![], &signed(&t, 3, &log)), 2);
    assert_eq!(stale.unwrap_err().status(), 409);

    let good = std::fs::read_to_string(&state).unwrap();
    let open = |text: &str| {
        std::fs::write(&state, text).unwrap();
        let cosigner = Cosigner::new("witness.test/w1", Box::new(dup(&w))).unwrap();
        let keys: Vec<LogKey> = vec![Box::new(log.public_key())];
        Witness::open(
            cosigner,
            BTreeMap::from([(ORIGIN.to_owned(), keys)]),
            &state,
        )
        .unwrap_err()
        .to_string()
    };
    let torn = open(&good[..good.len() / 2]);
    assert!(
        torn.contains("not a state file (torn or edited?)"),
        "{torn}"
    );
    assert!(torn.contains("state.json"), "{torn}");
    let rolled_back = open(&good.replacen("\\n3\\n", "\\n2\\n", 1));
    assert!(
        rolled_back.contains("edited: the witness's signature"),
        "{rolled_back}"
    );
    let emptied = open("");
    assert!(emptied.contains("not a state file"), "{emptied}");
    // Another witness key over the same file.
    std::fs::write(&state, &good).unwrap();
    let cosigner = Cosigner::new("witness.test/w1", Box::new(dup(&log))).unwrap();
    let other = Witness::open(cosigner, BTreeMap::new(), &state).unwrap_err();
    assert!(other.to_string().contains("kept by witness key"), "{other}");
}

#[test]
fn a_cosignature_line_round_trips() {
    let w = SecretKey::generate().unwrap();
    let log = SecretKey::generate().unwrap();
    let note = signed(&tree(&["a"]), 1, &log);
    let line = Cosigner::new("w.test", Box::new(w))
        .unwrap()
        .cosign(&note, 9)
        .unwrap();
    let text = line.line();
    assert!(text.starts_with("\u{2014} w.test ") && text.ends_with('\n'));
    assert_eq!(NoteSignature::parse(text.trim_end()), Some(line));
    let _: &PublicKey = &log.public_key();
}
