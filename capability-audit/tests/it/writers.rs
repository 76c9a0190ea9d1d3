//! The store's writers (`capability_audit::tlog::writers`): each writer's tree checkpoint names
//! the store's latest registration as it signed, in an extension line after its `time` line
//! that every reader of the note still reads past; a checkpoint naming a registration gone, or
//! counting more than are left, is a finding of the writer that signed it; an honest store, a
//! checkpoint naming none (an older build's) and a forgery not signed by the key are not.

use capability::audit::tlog::stored::checkpoint_writer;
use capability::audit::tlog::writers::{
    LatestRegistration, PendingCheckpoint, REGISTRATIONS_EXTENSION, named_registration,
    registration_hash, removed_registration_problems, sign_registration,
};
use capability::audit::tlog::{Frontier, SignedCheckpoint, WriterTree, checkpoint_stopped};
use capability::audit::{ChainProblem, CheckpointSigner};
use capability::gate::SecretKey;

const TIME: &str = "2026-12-05T08:00:00.000Z";

/// `writer`'s registration after `previous`, as text.
fn register(writer: &str, previous: Option<&str>, key: &SecretKey) -> String {
    let tree = WriterTree::new(writer, Frontier::new()).unwrap();
    sign_registration(&tree, TIME, previous, key)
        .unwrap()
        .to_text()
}

/// A tree of `n` leaves of `writer`, and its checkpoint naming `latest`.
fn checkpoint(
    writer: &str,
    n: u64,
    latest: Option<&LatestRegistration>,
    signer: &dyn CheckpointSigner,
) -> SignedCheckpoint {
    let mut frontier = Frontier::new();
    for i in 0..n {
        frontier.push(format!("record {i}").as_bytes());
    }
    let tree = WriterTree::new(writer, frontier.clone()).unwrap();
    PendingCheckpoint::new(&tree, &frontier, TIME)
        .sign(latest, signer)
        .unwrap()
}

#[test]
fn a_checkpoint_names_the_latest_registration_after_its_time_line_and_still_reads_as_a_note() {
    let key = SecretKey::generate().unwrap();
    let a = register("w-a", None, &key);
    let b = register("w-b", Some(&a), &key);
    let latest = LatestRegistration::new(2, &b);
    let note = checkpoint("w-a", 3, Some(&latest), &key);
    let lines: Vec<&str> = note.body.lines().collect();
    assert_eq!(lines[0], "capability/w-a");
    assert_eq!(lines[1], "3");
    assert_eq!(lines[3], format!("time {TIME}"));
    assert_eq!(
        lines[4],
        format!("{REGISTRATIONS_EXTENSION}2 {}", registration_hash(&b))
    );
    assert_eq!(lines.len(), 5);
    let parsed = SignedCheckpoint::parse(&note.to_text()).unwrap();
    parsed.verify("capability/w-a", &key.public_key()).unwrap();
    assert_eq!(parsed.head.size, 3);
    assert_eq!(named_registration(&parsed), Some(latest.clone()));

    // The stopped checkpoint: the registration line, then `stopped`.
    let tree = WriterTree::new("w-a", Frontier::new()).unwrap();
    let stopped = PendingCheckpoint::stopped(&tree, tree.committed(), TIME)
        .sign(Some(&latest), &key)
        .unwrap();
    assert!(checkpoint_stopped(&stopped));
    assert!(
        stopped
            .body
            .ends_with(&format!("{}\nstopped\n", latest.line())),
        "{}",
        stopped.body
    );
    // None known: no line.
    let none = checkpoint("w-a", 3, None, &key);
    assert_eq!(named_registration(&none), None);
    assert_eq!(none.body.lines().count(), 4);
}

#[test]
fn a_checkpoint_naming_a_registration_gone_is_a_removed_writer_of_the_writer_that_signed_it() {
    let key = SecretKey::generate().unwrap();
    let public = key.public_key();
    let a = register("w-a", None, &key);
    let b = register("w-b", Some(&a), &key);
    let c = register("w-c", Some(&b), &key);
    let checkpoints = vec![
        checkpoint("w-a", 1, Some(&LatestRegistration::new(1, &a)), &key),
        checkpoint("w-a", 2, Some(&LatestRegistration::new(3, &c)), &key),
        checkpoint("w-a", 3, Some(&LatestRegistration::new(3, &c)), &key),
        // An older build's checkpoint names none.
        checkpoint("w-a", 4, None, &key),
    ];
    let all = [a.clone(), b.clone(), c.clone()];
    assert!(removed_registration_problems(&checkpoints, &all, Some(&public)).is_empty());

    // The latest (w-c) deleted with its writer: w-a's checkpoints name it, said once.
    let found = removed_registration_problems(&checkpoints, &[a.clone(), b.clone()], Some(&public));
    let expected = ChainProblem::RegistrationRemoved {
        writer: "w-a".into(),
        size: 2,
        time: TIME.into(),
        counted: 3,
        present: 2,
        latest_gone: true,
    };
    assert_eq!(found.get("w-a"), Some(&vec![expected.clone()]), "{found:?}");
    assert_eq!(found.len(), 1);
    assert_eq!(
        expected.to_string(),
        format!(
            "removed writer: the tree checkpoint of size 2 that writer \"w-a\" signed at {TIME} \
             names the store's latest registration as it signed (of 3), and the store no longer \
             holds it: a registered writer was deleted with its records, its checkpoints and \
             its registration"
        )
    );

    // w-b deleted, w-c kept: the latest is there, and fewer than counted.
    let found = removed_registration_problems(&checkpoints, &[a.clone(), c.clone()], Some(&public));
    let said = found["w-a"][0].to_string();
    assert!(
        matches!(
            &found["w-a"][..],
            [ChainProblem::RegistrationRemoved {
                counted: 3,
                present: 2,
                latest_gone: false,
                ..
            }]
        ),
        "{found:?}"
    );
    assert!(
        said.contains("counts 3 registrations in the store, and 2 are left"),
        "{said}"
    );
}

#[test]
fn a_checkpoint_not_signed_by_the_key_names_nothing_and_an_altered_line_breaks_the_signature() {
    let key = SecretKey::generate().unwrap();
    let other = SecretKey::generate().unwrap();
    let a = register("w-a", None, &key);
    let fake = LatestRegistration::new(9, "a registration never made");
    let forged = checkpoint("w-a", 1, Some(&fake), &other);
    let found = removed_registration_problems(
        std::slice::from_ref(&forged),
        std::slice::from_ref(&a),
        Some(&key.public_key()),
    );
    assert!(
        found.is_empty(),
        "only the key's checkpoints count: {found:?}"
    );
    // Without a key every checkpoint counts (its signature is checked elsewhere).
    let found = removed_registration_problems(
        std::slice::from_ref(&forged),
        std::slice::from_ref(&a),
        None,
    );
    assert_eq!(found.len(), 1);

    // An honest checkpoint's line edited to name the registration still there: forged.
    let honest = checkpoint("w-a", 1, Some(&LatestRegistration::new(2, "gone")), &key);
    let text = honest
        .to_text()
        .replace(&registration_hash("gone"), &registration_hash(&a));
    let edited = SignedCheckpoint::parse(&text.replace(" 2 ", " 1 ")).unwrap();
    assert_eq!(checkpoint_writer(&edited), Some("w-a"));
    assert!(edited.verify("capability/w-a", &key.public_key()).is_err());
}

/// The place of each registration in the store's chain (`tlog::store_keys`, by which a store's
/// key rotation tells which key each run must sign with): the first is 1, each next one more;
/// two naming the same one (a fork) share a place; one whose chain does not reach the first
/// (one before it deleted) has none, nor has one that names none.
#[test]
fn each_registration_has_its_place_in_the_chain_and_a_broken_chain_none() {
    use capability::audit::tlog::store_keys::registration_places;
    let key = SecretKey::generate().unwrap();
    let a = register("w-a", None, &key);
    let b = register("w-b", Some(&a), &key);
    let c = register("w-c", Some(&b), &key);
    let fork = register("w-fork", Some(&b), &key);
    let gone = register("w-gone", Some(&c), &key);
    let after_gone = register("w-after", Some(&gone), &key);
    // Given in no particular order, without `w-gone`.
    let places = registration_places(&[
        after_gone.clone(),
        c.clone(),
        fork.clone(),
        a.clone(),
        b.clone(),
    ]);
    let place = |note: &str| places.get(&registration_hash(note)).copied();
    assert_eq!(
        [place(&a), place(&b), place(&c), place(&fork)],
        [Some(1), Some(2), Some(3), Some(3)]
    );
    assert_eq!(
        place(&after_gone),
        None,
        "its chain does not reach the first"
    );
    assert_eq!(places.len(), 4);
}
