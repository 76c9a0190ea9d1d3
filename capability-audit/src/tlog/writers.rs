//! The store's writers as a chain: each writer's registration (`mcp_audit_writer`, a signed
//! tree checkpoint of its log when it first wrote to the store) names the registration before
//! it, by the SHA-256 of its note, in an extension line signed with it:
//!
//! ```text
//! capability/w-2
//! 0
//! 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=
//! time 2026-12-05T05:40:00.000Z
//! registered-after 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//! ```
//!
//! So deleting a writer's registration, with every record and checkpoint of the writer, leaves
//! a registration that names one no longer there: a finding ([`registration_problems`]).
//!
//! The latest registration is named by none yet: so every tree checkpoint a store's writer
//! signs (periodic, idle, `stopped`) names, after its `time` line, the store's latest
//! registration and how many the store held, as read in the transaction that stores the
//! checkpoint ([`PendingCheckpoint`]):
//!
//! ```text
//! capability/w-1
//! 7
//! 2Tq6bPYeQ5GZ0yq0vWzQ5r3Ln3y6cV0p3wq1bO3Jm1U=
//! time 2026-12-05T05:40:10.000Z
//! registrations 2 5e1f3a2b5f0c2c3b9a35d0f1c9c8e0b8f0a8b8c1d0e2f3a4b5c6d7e8f9a0b1c2
//! ```
//!
//! When writer `w-2` registers after `w-1`, `w-1`'s next checkpoint (within its interval, idle
//! or not) names `w-2`'s registration; deleting `w-2` with its registration then leaves a
//! checkpoint naming a registration no longer there, or counting more than are left: a finding
//! ([`removed_registration_problems`]). What it cannot show: the latest writer deleted before
//! any other writer signed a checkpoint after its registration, or when it was the only writer
//! (then only a copy of a checkpoint kept elsewhere, or a witness, shows it); nor anything for
//! a registration or checkpoint signed before these lines existed (they name none, and are not
//! checked).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::encoding::hex;
use super::error::TlogError;
use super::frontier::Frontier;
use super::note::{SignedCheckpoint, TreeHead};
use super::stored::{TIME_EXTENSION, WriterTree, checkpoint_time, checkpoint_writer, sign_note};
use crate::checkpoint::{ChainProblem, CheckpointSigner, CheckpointVerifier};

/// The extension line that names the registration before this one.
pub const AFTER_EXTENSION: &str = "registered-after ";

/// What the first registration of a store names.
pub const FIRST: &str = "first";

/// The SHA-256 (hex) of a registration's note, as the next one names it.
pub fn registration_hash(note: &str) -> String {
    hex(&Sha256::digest(note.as_bytes()))
}

/// `tree`'s registration now (`time`), after the registration note `previous` (`None`: the
/// store's first), signed by `signer`.
pub fn sign_registration(
    tree: &WriterTree,
    time: &str,
    previous: Option<&str>,
    signer: &dyn CheckpointSigner,
) -> Result<SignedCheckpoint, TlogError> {
    let frontier = tree.committed();
    let head = TreeHead {
        origin: tree.origin().to_owned(),
        size: frontier.size(),
        root: frontier.root(),
    };
    let after = previous.map_or_else(|| FIRST.to_owned(), registration_hash);
    let lines = [
        format!("{TIME_EXTENSION}{time}"),
        format!("{AFTER_EXTENSION}{after}"),
    ];
    head.sign_with(&lines, signer)
}

/// The registration a note names as the one before it, if it names one.
pub fn registered_after(note: &SignedCheckpoint) -> Option<&str> {
    (note.body.lines().skip(3)).find_map(|line| line.strip_prefix(AFTER_EXTENSION))
}

/// The registrations (each note's text) that name a registration no longer among them: a
/// [`ChainProblem::RegistrationGone`] of the writer whose registration names it.
pub fn registration_problems(notes: &[String]) -> BTreeMap<String, Vec<ChainProblem>> {
    let hashes: Vec<String> = notes.iter().map(|n| registration_hash(n)).collect();
    let mut found: BTreeMap<String, Vec<ChainProblem>> = BTreeMap::new();
    for text in notes {
        let Ok(note) = SignedCheckpoint::parse(text) else {
            continue;
        };
        let Some(after) = registered_after(&note) else {
            continue;
        };
        if after != FIRST && !hashes.iter().any(|h| h == after) {
            let writer = checkpoint_writer(&note).unwrap_or_default().to_owned();
            found
                .entry(writer.clone())
                .or_default()
                .push(ChainProblem::RegistrationGone { writer });
        }
    }
    found
}

/// The extension line of a writer's tree checkpoint that names the store's latest registration
/// as the writer signed: `registrations <count> <SHA-256 of its note, hex>`, `count` the
/// registrations the store held then.
pub const REGISTRATIONS_EXTENSION: &str = "registrations ";

/// The store's latest registration as a writer read it, in the transaction that stores its
/// checkpoint: what the checkpoint's [`REGISTRATIONS_EXTENSION`] line says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatestRegistration {
    /// How many registrations the store held.
    pub count: u64,
    /// The SHA-256 (hex) of the latest one's note ([`registration_hash`]).
    pub hash: String,
}

impl LatestRegistration {
    /// The store's latest registration, its note `note`, of `count` registrations.
    pub fn new(count: u64, note: &str) -> LatestRegistration {
        LatestRegistration {
            count,
            hash: registration_hash(note),
        }
    }

    /// The extension line that names it.
    pub fn line(&self) -> String {
        format!("{REGISTRATIONS_EXTENSION}{} {}", self.count, self.hash)
    }
}

/// The store's latest registration a checkpoint names, if it names one (a line that does not
/// read as one names none).
pub fn named_registration(note: &SignedCheckpoint) -> Option<LatestRegistration> {
    let line = (note.body.lines().skip(3)).find_map(|l| l.strip_prefix(REGISTRATIONS_EXTENSION))?;
    let (count, hash) = line.split_once(' ')?;
    let hex_digest = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
    Some(LatestRegistration {
        count: count.parse().ok()?,
        hash: hex_digest.then(|| hash.to_ascii_lowercase())?,
    })
}

/// A writer's tree checkpoint to sign in the transaction that stores it, once the store's
/// latest registration is read there ([`sign`](Self::sign)): so that it names the latest
/// registration the store held as it was stored, never one read earlier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingCheckpoint {
    origin: String,
    frontier: Frontier,
    time: String,
    stopped: bool,
}

impl PendingCheckpoint {
    /// The checkpoint of `tree`'s records up to `frontier`, signed at `time`.
    pub fn new(tree: &WriterTree, frontier: &Frontier, time: &str) -> PendingCheckpoint {
        PendingCheckpoint {
            origin: tree.origin().to_owned(),
            frontier: frontier.clone(),
            time: time.to_owned(),
            stopped: false,
        }
    }

    /// [`new`](Self::new), the checkpoint of a writer that stops (marked `stopped`).
    pub fn stopped(tree: &WriterTree, frontier: &Frontier, time: &str) -> PendingCheckpoint {
        PendingCheckpoint {
            stopped: true,
            ..PendingCheckpoint::new(tree, frontier, time)
        }
    }

    /// The size of the tree it signs.
    pub fn size(&self) -> u64 {
        self.frontier.size()
    }

    /// Signed by `signer`, naming `latest` (the store's latest registration, read in the
    /// transaction that stores the checkpoint; `None`: the store holds none).
    pub fn sign(
        &self,
        latest: Option<&LatestRegistration>,
        signer: &dyn CheckpointSigner,
    ) -> Result<SignedCheckpoint, TlogError> {
        let line = latest.map(LatestRegistration::line);
        let (time, stopped) = (Some(self.time.as_str()), self.stopped);
        sign_note(
            &self.origin,
            &self.frontier,
            time,
            line.as_deref(),
            stopped,
            signer,
        )
    }
}

/// The writers' tree checkpoints (with `key`, those it signed) that name a registration no
/// longer among `registrations` (each note's text), or count more registrations than are left:
/// a [`ChainProblem::RegistrationRemoved`] of the writer whose checkpoint says so, once for each
/// registration it names. A checkpoint that names none is not checked.
pub fn removed_registration_problems(
    checkpoints: &[SignedCheckpoint],
    registrations: &[String],
    key: Option<&dyn CheckpointVerifier>,
) -> BTreeMap<String, Vec<ChainProblem>> {
    let hashes: Vec<String> = registrations.iter().map(|n| registration_hash(n)).collect();
    let present = hashes.len() as u64;
    let mut found: BTreeMap<String, Vec<ChainProblem>> = BTreeMap::new();
    let mut named: Vec<(String, LatestRegistration)> = Vec::new();
    for checkpoint in checkpoints {
        let (Some(writer), Some(latest)) = (
            checkpoint_writer(checkpoint),
            named_registration(checkpoint),
        ) else {
            continue;
        };
        let latest_gone = !hashes.contains(&latest.hash);
        if !latest_gone && latest.count <= present {
            continue;
        }
        if key.is_some_and(|k| checkpoint.verify(&checkpoint.head.origin, k).is_err()) {
            continue;
        }
        if named.iter().any(|(w, l)| w == writer && l == &latest) {
            continue;
        }
        named.push((writer.to_owned(), latest.clone()));
        found
            .entry(writer.to_owned())
            .or_default()
            .push(ChainProblem::RegistrationRemoved {
                writer: writer.to_owned(),
                size: checkpoint.head.size,
                time: checkpoint_time(checkpoint).unwrap_or_default().to_owned(),
                counted: latest.count,
                present,
                latest_gone,
            });
    }
    found
}
