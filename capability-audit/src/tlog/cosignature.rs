//! Cosignatures (`c2sp.org/tlog-cosignature`, the Ed25519 `cosignature/v1` type): a witness's
//! statement that, at a given time, the checkpoint's tree is the largest consistent tree it has
//! seen of that log.
//!
//! ```text
//! — witness.example/w1 base64(key id || timestamp (8 bytes, big-endian) || Ed25519 signature)
//! ```
//!
//! The signed message is `cosignature/v1\ntime <timestamp>\n` followed by the checkpoint's whole
//! body (extension lines included); the key id is the first 4 bytes of
//! `SHA-256(name || 0x0A || 0x04 || public key)`, so a log's key and a witness's key never share
//! an id even when they are the same key. The witness keys are the Ed25519 key files of
//! `capability keygen`.
//!
//! What a cosignature proves: a party other than the log, holding its own key, saw this tree
//! and checked, before signing, that it extends every tree of that log it had seen before. What
//! it cannot: that the witness saw every tree the log signed (a log can show another tree to
//! parties that never ask the witness), nor anything about the records themselves.

use sha2::{Digest, Sha256};

use super::encoding::{base64, from_hex, hex};
use super::error::TlogError;
use super::note::{NoteSignature, SignedCheckpoint, check_key_name};
use crate::checkpoint::{CheckpointSigner, CheckpointVerifier};

/// The key id algorithm byte of an Ed25519 `cosignature/v1` key.
pub const COSIGNATURE_V1: u8 = 0x04;

/// The first line of the message a `cosignature/v1` signs.
pub const COSIGNATURE_HEADER: &str = "cosignature/v1";

/// The key id of a cosigner: `SHA-256(name || 0x0A || 0x04 || public key)[..4]`.
pub fn cosigner_key_id(name: &str, public_key: &[u8; 32]) -> [u8; 4] {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update([0x0a, COSIGNATURE_V1]);
    hasher.update(public_key);
    let digest = hasher.finalize();
    [digest[0], digest[1], digest[2], digest[3]]
}

/// A cosigner's verifier key (`vkey`): `name+hex(key id)+base64(0x04 || key)`.
pub fn cosigner_vkey(name: &str, public_key: &[u8; 32]) -> String {
    let mut material = vec![COSIGNATURE_V1];
    material.extend_from_slice(public_key);
    format!(
        "{name}+{}+{}",
        hex(&cosigner_key_id(name, public_key)),
        base64(&material)
    )
}

/// The message a `cosignature/v1` signs: the header, the time line, then the note's body.
pub fn cosignature_message(time: u64, body: &str) -> String {
    format!("{COSIGNATURE_HEADER}\ntime {time}\n{body}")
}

/// The 32 bytes of an Ed25519 public key given as 64 hex digits.
pub fn public_key_bytes(key_hex: &str) -> Result<[u8; 32], TlogError> {
    from_hex(key_hex)
        .and_then(|k| <[u8; 32]>::try_from(k).ok())
        .ok_or_else(|| TlogError::Malformed("the key is not a 32-byte Ed25519 public key".into()))
}

/// A witness's signing half: its name (a schema-less URL, say `witness.example/w1`) and key.
pub struct Cosigner {
    name: String,
    public_key: [u8; 32],
    signer: Box<dyn CheckpointSigner>,
}

impl std::fmt::Debug for Cosigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cosigner({})", self.vkey())
    }
}

impl Cosigner {
    /// A cosigner named `name` signing with `signer`; refused when the name cannot name a key.
    pub fn new(name: &str, signer: Box<dyn CheckpointSigner>) -> Result<Cosigner, TlogError> {
        check_key_name(name)?;
        let public_key = public_key_bytes(&signer.public_key_hex())?;
        Ok(Cosigner {
            name: name.to_owned(),
            public_key,
            signer,
        })
    }

    /// The cosigner's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cosigner's verifier key (`vkey`), what a verifier configures.
    pub fn vkey(&self) -> String {
        cosigner_vkey(&self.name, &self.public_key)
    }

    /// Signs `message` with the witness key (for the witness's own state file).
    pub fn sign_raw(&self, message: &[u8]) -> String {
        self.signer.sign_checkpoint(message)
    }

    /// The cosignature of `checkpoint` at `time` (POSIX seconds, at most 2^63 - 1).
    pub fn cosign(
        &self,
        checkpoint: &SignedCheckpoint,
        time: u64,
    ) -> Result<NoteSignature, TlogError> {
        if time > i64::MAX as u64 {
            return Err(TlogError::Malformed(format!(
                "a cosignature's time must not exceed 2^63 - 1 (got {time})"
            )));
        }
        let message = cosignature_message(time, &checkpoint.body);
        let signature = from_hex(&self.signer.sign_checkpoint(message.as_bytes()))
            .filter(|s| s.len() == 64)
            .ok_or_else(|| {
                TlogError::Malformed("the witness key gave no Ed25519 signature".into())
            })?;
        let mut bytes = time.to_be_bytes().to_vec();
        bytes.extend_from_slice(&signature);
        Ok(NoteSignature {
            name: self.name.clone(),
            key_id: cosigner_key_id(&self.name, &self.public_key),
            signature: bytes,
        })
    }
}

/// Checks one signature line as a `cosignature/v1` of `checkpoint` by `key`, under the line's
/// own name: `None` when the line is not this key's (another key id), else the cosignature's
/// time, or [`TlogError::BadSignature`] when it is this key's and does not verify.
pub fn verify_cosignature(
    checkpoint: &SignedCheckpoint,
    line: &NoteSignature,
    key: &dyn CheckpointVerifier,
) -> Option<Result<u64, TlogError>> {
    let public_key = public_key_bytes(&key.public_key_hex()).ok()?;
    if line.key_id != cosigner_key_id(&line.name, &public_key) {
        return None;
    }
    let forged = || TlogError::BadSignature {
        name: line.name.clone(),
    };
    let Some((time, signature)) = line.signature.split_first_chunk::<8>() else {
        return Some(Err(forged()));
    };
    let time = u64::from_be_bytes(*time);
    if signature.len() != 64 || time > i64::MAX as u64 {
        return Some(Err(forged()));
    }
    let message = cosignature_message(time, &checkpoint.body);
    if key.verify_checkpoint(message.as_bytes(), &hex(signature)) {
        Some(Ok(time))
    } else {
        Some(Err(forged()))
    }
}

/// The witnesses a verifier trusts and how many of them must have cosigned.
pub struct WitnessQuorum<'a> {
    keys: Vec<(String, &'a dyn CheckpointVerifier)>,
    needed: usize,
}

/// A witness's cosignature found valid by [`WitnessQuorum::check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cosigned {
    /// The label the verifier gave the witness's key (its file, say).
    pub witness: String,
    /// The name on the cosignature line.
    pub name: String,
    /// When the witness cosigned (POSIX seconds).
    pub time: u64,
}

impl<'a> WitnessQuorum<'a> {
    /// At least `needed` of `keys` (each with a label that names it in messages) must cosign;
    /// a key given twice counts once.
    pub fn new(keys: Vec<(String, &'a dyn CheckpointVerifier)>, needed: usize) -> Self {
        WitnessQuorum { keys, needed }
    }

    /// The valid cosignatures of the trusted witnesses on `checkpoint`, when there are at least
    /// as many as needed; otherwise [`TlogError::Quorum`] naming the witnesses missing (and
    /// why: no cosignature, or a forged one). Lines of other keys are ignored, as the spec says.
    pub fn check(&self, checkpoint: &SignedCheckpoint) -> Result<Vec<Cosigned>, TlogError> {
        let mut cosigned = Vec::new();
        let mut missing = Vec::new();
        let mut seen = Vec::new();
        for (label, key) in &self.keys {
            // A key given twice (under two labels) counts once.
            let hex = key.public_key_hex();
            if seen.contains(&hex) {
                continue;
            }
            seen.push(hex);
            let mut found = None;
            let mut forged = false;
            for line in &checkpoint.signatures {
                match verify_cosignature(checkpoint, line, *key) {
                    Some(Ok(time)) => {
                        found = Some(Cosigned {
                            witness: label.clone(),
                            name: line.name.clone(),
                            time,
                        });
                        break;
                    }
                    Some(Err(_)) => forged = true,
                    None => {}
                }
            }
            match found {
                Some(c) => cosigned.push(c),
                None if forged => missing.push(format!("{label} (its cosignature is forged)")),
                None => missing.push(format!("{label} (no cosignature)")),
            }
        }
        if cosigned.len() < self.needed {
            return Err(TlogError::Quorum {
                needed: self.needed,
                cosigned: cosigned.into_iter().map(|c| c.witness).collect(),
                missing,
            });
        }
        Ok(cosigned)
    }
}

impl SignedCheckpoint {
    /// Adds `lines` (cosignatures a witness answered) to the note's signatures, leaving out
    /// those it already carries.
    pub fn add_signatures(&mut self, lines: impl IntoIterator<Item = NoteSignature>) {
        for line in lines {
            if !self.signatures.contains(&line) {
                self.signatures.push(line);
            }
        }
    }
}
