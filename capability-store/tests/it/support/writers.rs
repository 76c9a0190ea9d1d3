//! A writer deleted with its registration, even the latest one, the same scenarios on SQLite
//! (`sqlite_tree`) and PostgreSQL (`pg_tree`): every tree checkpoint a writer signs names the
//! store's latest registration as it is stored, so once another writer checkpoints after the
//! latest registration (on its record count, idle, or stopping), deleting the latest writer
//! with its registration is a finding naming the writer whose checkpoint names it. Deleted
//! before any other writer checkpointed, it is not (the limit, asserted); an honest store with
//! writers registering while others checkpoint never is.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use capability::audit::tlog::SignedCheckpoint;
use capability::audit::tlog::writers::{LatestRegistration, named_registration};
use capability::audit::{AuditSink, ChainProblem, CheckpointEvery, CheckpointSigner};
use capability::gate::{PublicKey, SecretKey};
use capability_store::{SinkOptions, Store};

use super::tree::{Tamper, key, record, write};

/// Signs every 5 records, and after an hour idle: only the record count triggers.
const EVERY_5: CheckpointEvery = CheckpointEvery {
    records: 5,
    interval: Duration::from_secs(3600),
};

fn sink(
    store: &dyn Store,
    writer: &str,
    key: &Arc<SecretKey>,
    every: CheckpointEvery,
) -> Arc<dyn AuditSink> {
    let mut options = SinkOptions::writer(writer);
    let signer: Arc<dyn CheckpointSigner> = key.clone();
    options.checkpoints = Some((signer, every));
    store.audit_sink(options).expect("sink")
}

fn append(sink: &dyn AuditSink, from: u64, to: u64) {
    for i in from..to {
        sink.append(record(i)).expect("append");
    }
}

/// `writer`'s tree checkpoints, as stored.
fn notes(store: &dyn Store, writer: &str) -> Vec<SignedCheckpoint> {
    let trail = store.read_trail().expect("trail");
    (trail.tree_checkpoints.iter())
        .map(|t| SignedCheckpoint::parse(t).expect("a note"))
        .filter(|n| n.head.origin == format!("capability/{writer}"))
        .collect()
}

/// `writer`'s registration, as the store's latest of `count`.
fn registration(store: &dyn Store, writer: &str, count: u64) -> LatestRegistration {
    let trail = store.read_trail().expect("trail");
    let registered = (trail.writers.iter())
        .find(|w| w.writer == writer)
        .expect("registered");
    LatestRegistration::new(count, &registered.note)
}

/// Deletes every record, checkpoint and the registration of `writer`.
fn delete(tamper: &dyn Tamper, writer: &str) {
    tamper.remove(writer);
    tamper.unregister(writer);
}

fn problems(store: &dyn Store, public: &PublicKey) -> Vec<(String, Vec<ChainProblem>)> {
    let trail = store.read_trail().expect("trail");
    trail.tree_problems(Some(public)).into_iter().collect()
}

/// The one finding of `writer`, a [`ChainProblem::RegistrationRemoved`] of the tree of
/// `size`, naming the latest of `counted` registrations gone; what it says.
fn removed(found: &[(String, Vec<ChainProblem>)], writer: &str, size: u64, counted: u64) -> String {
    let [(named, problems)] = found else {
        panic!("one writer's finding: {found:?}");
    };
    assert_eq!(named, writer, "{found:?}");
    assert!(
        matches!(
            &problems[..],
            [ChainProblem::RegistrationRemoved { writer: w, size: s, counted: c, latest_gone: true, .. }]
                if w == writer && *s == size && *c == counted
        ),
        "{problems:?}"
    );
    problems[0].to_string()
}

/// w-a writes; w-b registers and writes after it; w-a's checkpoint of 5 (its record count)
/// names w-b's registration. The honest store is clean; w-b deleted with its records, its
/// checkpoints and its registration is a finding naming w-a, and stays one once w-a stops.
pub fn finds_the_latest_writer_removed(store: &dyn Store, tamper: &dyn Tamper) {
    let (key, public) = key();
    let a = sink(store, "w-a", &key, EVERY_5);
    append(&*a, 0, 2);
    write(store, "w-b", &key, 3).expect("w-b");
    append(&*a, 2, 5);
    let at_5 = (notes(store, "w-a").into_iter())
        .find(|n| n.head.size == 5)
        .expect("w-a's checkpoint of 5");
    assert_eq!(
        named_registration(&at_5),
        Some(registration(store, "w-b", 2)),
        "{}",
        at_5.body
    );
    assert_eq!(problems(store, &public), [], "the honest store");

    delete(tamper, "w-b");
    let found = problems(store, &public);
    let said = removed(&found, "w-a", 5, 2);
    assert!(
        said.starts_with(
            "removed writer: the tree checkpoint of size 5 that writer \"w-a\" signed at 20"
        ),
        "{said}"
    );
    assert!(
        said.contains("names the store's latest registration as it signed (of 2), and the store no longer holds it"),
        "{said}"
    );
    a.close().expect("close");
    assert_eq!(
        problems(store, &public),
        found,
        "its stopped checkpoint adds nothing"
    );
}

/// The same with w-a idle: its idle checkpoint (interval 50 ms, polled) names w-b's
/// registration; and w-c registering later is named by w-a's `stopped` checkpoint.
pub fn idle_and_stopped_checkpoints_name_the_latest(store: &dyn Store, tamper: &dyn Tamper) {
    let (key, public) = key();
    let every = CheckpointEvery {
        records: 1_000,
        interval: Duration::from_millis(50),
    };
    let a = sink(store, "w-a", &key, every);
    append(&*a, 0, 1);
    write(store, "w-b", &key, 1).expect("w-b");
    let b = registration(store, "w-b", 2);
    assert!(
        capability_testkit::wait_for(|| (notes(store, "w-a").iter()).any(|n| named_registration(
            n
        )
        .as_ref()
            == Some(&b))),
        "w-a's idle checkpoint names w-b's registration"
    );
    assert_eq!(problems(store, &public), [], "the honest store");
    delete(tamper, "w-b");
    let found = problems(store, &public);
    let [(writer, _)] = &found[..] else {
        panic!("{found:?}");
    };
    assert_eq!(writer, "w-a");
    assert!(
        found[0]
            .1
            .iter()
            .all(|p| matches!(p, ChainProblem::RegistrationRemoved { counted: 2, .. })),
        "{found:?}"
    );

    // Stopping: the `stopped` checkpoint names the latest (w-c) too.
    write(store, "w-c", &key, 1).expect("w-c");
    let c = registration(store, "w-c", 2);
    a.close().expect("close");
    let last = notes(store, "w-a").pop().expect("a note");
    assert!(capability::audit::tlog::checkpoint_stopped(&last));
    assert_eq!(named_registration(&last), Some(c), "{}", last.body);
}

/// The limit: w-late registers after w-a's last checkpoint and is deleted before w-a signs
/// another; nothing names it, and nothing is found. (Only a copy of a checkpoint kept
/// elsewhere, or a witness, shows it.)
pub fn the_latest_writer_removed_before_any_checkpoint_names_it_is_not_found(
    store: &dyn Store,
    tamper: &dyn Tamper,
) {
    let (key, public) = key();
    let a = sink(store, "w-a", &key, EVERY_5);
    append(&*a, 0, 5);
    write(store, "w-late", &key, 2).expect("w-late");
    delete(tamper, "w-late");
    assert_eq!(problems(store, &public), [], "not found: the limit");
    append(&*a, 5, 10);
    a.close().expect("close");
    assert_eq!(
        problems(store, &public),
        [],
        "w-a's later checkpoints name its own"
    );
}

/// Honest writers interleaving: w-a signs a checkpoint on every record while six writers
/// register and write one record each; whichever registration each checkpoint names (the
/// one before or after a registration committing meanwhile), nothing is a finding, and the
/// last names the last registration.
pub fn writers_registering_while_another_checkpoints_are_never_a_finding(store: &dyn Store) {
    let (key, public) = key();
    let every = CheckpointEvery {
        records: 1,
        interval: Duration::from_secs(3600),
    };
    let a = sink(store, "w-a", &key, every);
    // Its first checkpoint before any other writer registers: what it names changes at least
    // once below, however the threads are scheduled.
    append(&*a, 0, 1);
    std::thread::scope(|s| {
        let a = a.clone();
        let writing = s.spawn(move || append(&*a, 1, 60));
        for i in 0..6 {
            write(store, &format!("w-{i}"), &key, 1).expect("a writer");
        }
        writing.join().expect("w-a");
    });
    append(&*a, 60, 61);
    let last = notes(store, "w-a").pop().expect("a note");
    assert_eq!(
        named_registration(&last),
        Some(registration(store, "w-5", 7)),
        "{}",
        last.body
    );
    let named: std::collections::BTreeSet<_> = (notes(store, "w-a").iter())
        .filter_map(named_registration)
        .map(|l| l.count)
        .collect();
    assert!(
        named.len() > 1,
        "w-a named several registrations: {named:?}"
    );
    a.close().expect("close");
    assert_eq!(problems(store, &public), [], "an honest store");
}

/// A writer that closes in the millisecond of its last checkpoint, of the same size: its
/// `stopped` checkpoint is stored too, with a later time (a store keeps a writer's checkpoints
/// unique by size and time: SQLite refused the second, so the close failed; PostgreSQL dropped
/// it, so the writer read as killed once the interval passed). Many times over, so that most
/// of them close within the millisecond.
pub fn a_writer_closing_in_the_millisecond_of_its_last_checkpoint_stores_its_stopped_one(
    store: &dyn Store,
) {
    let (key, public) = key();
    let every = CheckpointEvery {
        records: 1,
        interval: Duration::from_secs(3600),
    };
    for i in 0..40 {
        let writer = format!("w-{i}");
        let sink = sink(store, &writer, &key, every);
        append(&*sink, 0, 1);
        sink.close()
            .expect("the close stores its stopped checkpoint");
        let notes = notes(store, &writer);
        let last = notes.last().expect("a note");
        assert!(
            capability::audit::tlog::checkpoint_stopped(last),
            "{writer}: the last checkpoint says it stopped: {}",
            last.body
        );
        let times: std::collections::BTreeSet<_> = (notes.iter())
            .filter_map(capability::audit::tlog::checkpoint_time)
            .collect();
        assert_eq!(times.len(), notes.len(), "{writer}: one time each");
    }
    assert_eq!(problems(store, &public), [], "an honest store");
}
