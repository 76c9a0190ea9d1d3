//! A witness (`c2sp.org/tlog-witness`): it keeps, per log, the last checkpoint it cosigned, and
//! cosigns a new one only when it extends that one.
//!
//! [`Witness::add_checkpoint`] is the protocol's `add-checkpoint` without the HTTP: the request
//! ([`AddCheckpoint`]: `old <size>`, the consistency proof, a blank line, the checkpoint) is
//! checked as the spec orders, each refusal a [`WitnessError`] with the spec's status code:
//! an unknown log (404), no valid signature of the log's keys (403), an old size above the
//! checkpoint's (400), an old size that is not the one held (409, with the size held), a tree of
//! size 0 with another root, a proof where none belongs, a consistency proof that does not
//! verify, or another root for the size held: a fork (422). Only then is the checkpoint
//! cosigned, and the state written (atomically, before the answer) under one lock, so two
//! requests can never roll the state back. The HTTP server is `capability_http::witness`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::cosignature::Cosigner;
use super::encoding::{base64, from_base64};
use super::error::{TlogError, WitnessError};
use super::hash::{Hash, empty_root};
use super::note::{NoteSignature, SignedCheckpoint};
use super::verify::verify_consistency;
use super::witness_state::{load_state, save_state};
use crate::checkpoint::CheckpointVerifier;

/// The most consistency proof lines a request may carry (the spec's bound).
pub const MAX_PROOF_LINES: usize = 63;

/// A request of `add-checkpoint`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddCheckpoint {
    /// The size of the checkpoint the client believes the witness holds.
    pub old: u64,
    /// The consistency proof from `old` to the checkpoint's size.
    pub proof: Vec<Hash>,
    /// The checkpoint to cosign.
    pub checkpoint: SignedCheckpoint,
}

impl AddCheckpoint {
    /// The request body.
    pub fn to_text(&self) -> String {
        let mut text = format!("old {}\n", self.old);
        for hash in &self.proof {
            text.push_str(&base64(hash));
            text.push('\n');
        }
        text.push('\n');
        text.push_str(&self.checkpoint.to_text());
        text
    }

    /// Reads a request body (strictly); a refusal is a 400.
    pub fn parse(text: &str) -> Result<AddCheckpoint, WitnessError> {
        let bad = |why: &str| WitnessError::BadRequest(format!("add-checkpoint: {why}"));
        let (head, checkpoint) = text
            .split_once("\n\n")
            .ok_or_else(|| bad("no blank line before the checkpoint"))?;
        let mut lines = head.split('\n');
        let old = lines
            .next()
            .and_then(|l| l.strip_prefix("old "))
            .filter(|n| *n == "0" || !n.starts_with('0'))
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| bad("the first line is not `old <decimal size>`"))?;
        let proof = lines
            .map(|l| {
                from_base64(l)
                    .and_then(|h| Hash::try_from(h).ok())
                    .ok_or_else(|| bad("a proof line is not a 32-byte hash in base64"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if proof.len() > MAX_PROOF_LINES {
            return Err(bad("more than 63 consistency proof lines"));
        }
        let checkpoint = SignedCheckpoint::parse(checkpoint).map_err(|e| bad(&e.to_string()))?;
        Ok(AddCheckpoint {
            old,
            proof,
            checkpoint,
        })
    }
}

/// A log's public keys, as the witness keeps them.
pub type LogKey = Box<dyn CheckpointVerifier + Send + Sync>;

/// A witness: its cosigner, the logs it knows, and the last checkpoint cosigned of each.
pub struct Witness {
    cosigner: Cosigner,
    logs: BTreeMap<String, Vec<LogKey>>,
    path: PathBuf,
    held: Mutex<BTreeMap<String, SignedCheckpoint>>,
}

impl fmt::Debug for Witness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Witness({}, {})",
            self.cosigner.vkey(),
            self.path.display()
        )
    }
}

impl Witness {
    /// A witness keeping its state in `path`: read from there when the file exists (a file
    /// that does not parse, was signed by another key, or was edited is an error, never a fresh
    /// start), empty when it does not.
    pub fn open(
        cosigner: Cosigner,
        logs: BTreeMap<String, Vec<LogKey>>,
        path: &Path,
    ) -> Result<Witness, WitnessError> {
        let held = load_state(path, &cosigner)?;
        for (origin, checkpoint) in &held {
            if let Some(keys) = logs.get(origin) {
                verify_log_signature(checkpoint, keys).map_err(|e| {
                    WitnessError::State(format!(
                        "witness state {}: the checkpoint held for {origin} does not verify with \
                         the log's keys ({e})",
                        path.display()
                    ))
                })?;
            }
        }
        tracing::info!(target: "capability_audit::tlog::witness", state = %path.display(), logs = held.len(), "witness state loaded");
        Ok(Witness {
            cosigner,
            logs,
            path: path.to_owned(),
            held: Mutex::new(held),
        })
    }

    /// The cosigner's verifier key.
    pub fn vkey(&self) -> String {
        self.cosigner.vkey()
    }

    /// The last checkpoint cosigned for `origin`, with the cosignature.
    pub fn held(&self, origin: &str) -> Option<SignedCheckpoint> {
        self.lock().get(origin).cloned()
    }

    /// The last checkpoint cosigned for the log whose origin's SHA-256 is `hash` (lowercase hex),
    /// as the monitoring path `/<hash>/checkpoint` names it.
    pub fn held_by_hash(&self, hash: &str) -> Option<SignedCheckpoint> {
        use sha2::{Digest, Sha256};
        self.lock()
            .iter()
            .find(|(origin, _)| super::encoding::hex(&Sha256::digest(origin.as_bytes())) == hash)
            .map(|(_, checkpoint)| checkpoint.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, SignedCheckpoint>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `add-checkpoint`: checks the request, cosigns the checkpoint at `time` (POSIX seconds)
    /// and keeps it; the answer is the cosignature lines.
    pub fn add_checkpoint(
        &self,
        request: &AddCheckpoint,
        time: u64,
    ) -> Result<Vec<NoteSignature>, WitnessError> {
        let checkpoint = &request.checkpoint;
        let head = &checkpoint.head;
        let keys = self
            .logs
            .get(&head.origin)
            .ok_or_else(|| WitnessError::UnknownLog(head.origin.clone()))?;
        verify_log_signature(checkpoint, keys).map_err(|e| {
            WitnessError::NotSigned(format!(
                "the checkpoint of {} is not signed by a key this witness trusts for it: {e}",
                head.origin
            ))
        })?;
        if request.old > head.size {
            return Err(WitnessError::BadRequest(format!(
                "add-checkpoint: the old size {} is above the checkpoint's size {}: the tree \
                 would shrink",
                request.old, head.size
            )));
        }
        let mut held = self.lock();
        let previous = held.get(&head.origin);
        let held_size = previous.map_or(0, |p| p.head.size);
        if request.old != held_size {
            tracing::info!(target: "capability_audit::tlog::witness", origin = %head.origin, old = request.old, held = held_size, "stale add-checkpoint");
            return Err(WitnessError::Conflict {
                origin: head.origin.clone(),
                old: request.old,
                held: held_size,
            });
        }
        check_extends(previous, request)?;
        let cosignature = self
            .cosigner
            .cosign(checkpoint, time)
            .map_err(|e| WitnessError::State(format!("the witness cannot cosign: {e}")))?;
        let mut kept = checkpoint.clone();
        kept.add_signatures([cosignature.clone()]);
        let mut next = held.clone();
        next.insert(head.origin.clone(), kept);
        save_state(&self.path, &self.cosigner, &next)?;
        *held = next;
        tracing::info!(target: "capability_audit::tlog::witness", origin = %head.origin, size = head.size, "cosigned");
        Ok(vec![cosignature])
    }
}

/// The 422 checks: the empty tree's root, no proof from 0, the same root for the same size,
/// and the consistency proof from the tree held.
fn check_extends(
    previous: Option<&SignedCheckpoint>,
    request: &AddCheckpoint,
) -> Result<(), WitnessError> {
    let head = &request.checkpoint.head;
    if head.size == 0 && head.root != empty_root() {
        return Err(WitnessError::Inconsistent(format!(
            "the checkpoint of {} has size 0 and a root that is not the empty tree's",
            head.origin
        )));
    }
    let Some(previous) = previous.filter(|p| p.head.size > 0) else {
        if !request.proof.is_empty() {
            return Err(WitnessError::Inconsistent(
                "a consistency proof from size 0 must be empty".into(),
            ));
        }
        return Ok(());
    };
    let old = &previous.head;
    if old.size == head.size {
        if old.root != head.root {
            tracing::warn!(target: "capability_audit::tlog::witness", origin = %head.origin, size = head.size, "fork: another root for the size held");
            return Err(WitnessError::Inconsistent(format!(
                "{}: the witness holds another root for the tree of {} records of {}",
                TlogError::Fork { size: head.size },
                head.size,
                head.origin
            )));
        }
        return Ok(());
    }
    verify_consistency(old.size, head.size, &old.root, &head.root, &request.proof).map_err(|e| {
        tracing::warn!(target: "capability_audit::tlog::witness", origin = %head.origin, old = old.size, new = head.size, "inconsistent checkpoint");
        WitnessError::Inconsistent(format!(
            "the checkpoint of {} records of {} does not extend the one of {} records the \
             witness holds: {e}",
            head.size, head.origin, old.size
        ))
    })
}

/// Some key of `keys` signed the checkpoint, and no line of a trusted key is forged.
fn verify_log_signature(checkpoint: &SignedCheckpoint, keys: &[LogKey]) -> Result<(), TlogError> {
    let origin = &checkpoint.head.origin;
    let mut verified = false;
    let mut error = None;
    for key in keys {
        match checkpoint.verify(origin, key.as_ref()) {
            Ok(()) => verified = true,
            Err(e @ TlogError::BadSignature { .. }) => return Err(e),
            Err(e) => error = Some(e),
        }
    }
    match (verified, error) {
        (true, _) => Ok(()),
        (false, Some(e)) => Err(e),
        (false, None) => Err(TlogError::Malformed(format!(
            "no key is configured for {origin}"
        ))),
    }
}
