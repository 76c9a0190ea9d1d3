//! A store's checkpoint key over time. Each run of a store's writer is a log of its own (its
//! origin names the run), so a store's key is not handed over inside one log, as a JSON Lines
//! trail's is ([`KeyRotation`] at a tree size): it is handed over between runs, at a place in
//! the store's chain of registrations ([`super::writers`]). The statement is the same signed
//! note, of the log [`STORE_ORIGIN`], its size the first registration the new key signs:
//!
//! ```text
//! capability/key-rotation/v1
//! capability:store
//! 5
//! capability:store+<key id>+<base64 of 0x01 || the new key>
//!
//! — capability:store <base64 of the old key's id and signature>
//! ```
//!
//! `capability audit rotate <store>` registers a writer of its own signed by the old key (the
//! fourth registration, say), records the statement there (a notice `audit/key-rotated`), and
//! hands over at the next registration (the fifth). Every writer registered from then on must
//! sign with the new key, every one before it with the old (a run that started before the
//! hand-over keeps its key until it stops), and each writer signs all its checkpoints with the
//! key of its registration. What it cannot show: the old key used to sign more checkpoints of a
//! run registered before the hand-over (that run's key is the old one); and, as for a JSON Lines
//! trail, a store written again under the new key with the rotation's record left out (give the
//! statement with `--rotation`).

use std::collections::BTreeMap;

use super::note::SignedCheckpoint;
use super::rotation::{KeyRotation, LogKeys};
use super::stored::checkpoint_writer;
use super::writers::{FIRST, registered_after, registration_hash};
use crate::checkpoint::{ChainProblem, Checkpoint, CheckpointVerifier};

/// The log a store's key rotations are of: its writers, by registration. No writer's log can
/// have this origin (theirs are `capability/<writer>`).
pub const STORE_ORIGIN: &str = "capability:store";

/// The place of each registration (each note's text) in the store's chain: the first is 1, the
/// one that names it 2, and so on (two that name the same one, a fork, share a place). A
/// registration whose chain does not reach the first (one before it deleted, or one made before
/// registrations named the one before) has none.
pub fn registration_places(registrations: &[String]) -> BTreeMap<String, u64> {
    let notes: Vec<(String, Option<SignedCheckpoint>)> = registrations
        .iter()
        .map(|text| (registration_hash(text), SignedCheckpoint::parse(text).ok()))
        .collect();
    let mut places: BTreeMap<String, u64> = BTreeMap::new();
    // Each pass places the registrations that name one already placed; a chain is placed in at
    // most as many passes as it is long.
    for _ in 0..=notes.len() {
        let mut placed = false;
        for (hash, note) in &notes {
            let Some(note) = note else { continue };
            if places.contains_key(hash) {
                continue;
            }
            let place = match registered_after(note) {
                Some(FIRST) => Some(1),
                Some(before) => places.get(before).map(|p| p + 1),
                None => None,
            };
            if let Some(place) = place {
                places.insert(hash.clone(), place);
                placed = true;
            }
        }
        if !placed {
            break;
        }
    }
    places
}

/// What the store's key rotations ([`STORE_ORIGIN`], among `rotations`) show of its writers,
/// given `keys`: a writer registered at a place the key of its registration may not sign (the
/// retired key after the hand-over, the new one before it), and a writer whose tree checkpoints
/// or chain checkpoints are signed by another key than its registration. Nothing without such a
/// rotation. A problem of the rotations themselves (one not signed by the key it retires, one to
/// a key not given) is the store's (writer `""`).
pub fn store_key_problems(
    keys: &[&dyn CheckpointVerifier],
    rotations: &[KeyRotation],
    registrations: &[String],
    notes: &[SignedCheckpoint],
    checkpoints: &[Checkpoint],
) -> BTreeMap<String, Vec<ChainProblem>> {
    let mut found: BTreeMap<String, Vec<ChainProblem>> = BTreeMap::new();
    let mine: Vec<KeyRotation> = (rotations.iter())
        .filter(|r| r.origin == STORE_ORIGIN)
        .cloned()
        .collect();
    if mine.is_empty() {
        return found;
    }
    let spans = match LogKeys::new(STORE_ORIGIN, keys, &mine) {
        Ok(spans) => spans,
        Err(e) => {
            found
                .entry(String::new())
                .or_default()
                .push(rotation(format!(
                    "the store's key rotations cannot be followed: {e}"
                )));
            return found;
        }
    };
    let places = registration_places(registrations);
    for text in registrations {
        let Ok(note) = SignedCheckpoint::parse(text) else {
            continue;
        };
        let Some(writer) = checkpoint_writer(&note) else {
            continue;
        };
        // The key of the registration (a registration no key given signs is reported by the
        // signature checks).
        let Some(key) = keys
            .iter()
            .find(|k| note.verify(&note.head.origin, **k).is_ok())
        else {
            continue;
        };
        let hex = key.public_key_hex();
        let mut problems = Vec::new();
        match (places.get(&registration_hash(text)), spans.span_of(&hex)) {
            (Some(&place), Some((from, until))) => {
                if place < from {
                    problems.push(rotation(format!(
                        "writer {writer:?} is the store's registration {place}, signed by a key \
                         that takes over only at registration {from}"
                    )));
                } else if until.is_some_and(|until| place >= until) {
                    problems.push(rotation(format!(
                        "writer {writer:?} is the store's registration {place}, signed by the \
                         key that handed over at registration {}: a retired key registers no \
                         writer after its hand-over",
                        until.unwrap_or_default()
                    )));
                }
            }
            // A place unknown: the chain of registrations is broken (reported as such).
            (None, _) => {}
            (Some(_), None) => problems.push(rotation(format!(
                "writer {writer:?}'s registration is signed by a key no rotation of the store \
                 hands over to"
            ))),
        }
        let other_note = notes.iter().find(|n| {
            checkpoint_writer(n) == Some(writer) && n.verify(&n.head.origin, *key).is_err()
        });
        if let Some(other) = other_note {
            problems.push(rotation(format!(
                "writer {writer:?}'s tree checkpoint of {} records is not signed by the key of \
                 its registration",
                other.head.size
            )));
        }
        let other_chain = (checkpoints.iter()).find(|c| c.writer == writer && c.key != hex);
        if let Some(other) = other_chain {
            problems.push(rotation(format!(
                "writer {writer:?}'s chain checkpoint at record {} is signed by another key \
                 than its registration",
                other.seq
            )));
        }
        if !problems.is_empty() {
            found.entry(writer.to_owned()).or_default().extend(problems);
        }
    }
    found
}

fn rotation(why: String) -> ChainProblem {
    ChainProblem::Rotation { why }
}
