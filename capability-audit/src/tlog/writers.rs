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
//! a registration that names one no longer there: a finding. What it cannot show: the latest
//! registration deleted (with its writer's records), since no registration names it yet; nor
//! a registration made before this line existed (it names none, and is not checked).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::encoding::hex;
use super::error::TlogError;
use super::note::{SignedCheckpoint, TreeHead};
use super::stored::{TIME_EXTENSION, WriterTree, checkpoint_writer};
use crate::checkpoint::{ChainProblem, CheckpointSigner};

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
