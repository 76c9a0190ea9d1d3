//! Checkpoints as C2SP signed notes (`c2sp.org/signed-note`, `c2sp.org/tlog-checkpoint`).
//!
//! ```text
//! capability/replica-1
//! 4
//! 0+/vVZ0ReWMHZBZ9PRr1Jx7rNwIexW0l6ZVovHPBl9g=
//!
//! — capability/replica-1 qH7rQ2V...base64(key id || Ed25519 signature)...
//! ```
//!
//! The body is the origin, the tree size and the root hash (base64), one a line; the signature
//! is Ed25519 over the body, prefixed with the key id: the first 4 bytes of
//! `SHA-256(key name || 0x0A || 0x01 || public key)`. The key name is the origin.
//!
//! What a verified checkpoint proves: the holder of the key signed that the writer's tree had
//! that size and root. What it cannot: that the writer's host, which holds the key, did not sign
//! a different tree for the same size elsewhere. Without a witness (someone outside who keeps
//! the checkpoints it has seen and refuses to co-sign one that does not extend them), that host
//! can rewrite everything and sign again; two checkpoints that disagree
//! ([`verify_consistency`](super::verify::verify_consistency)) are the evidence when it does.

use sha2::{Digest, Sha256};

use super::encoding::{base64, from_base64, from_hex, hex};
use super::error::TlogError;
use super::hash::Hash;
use crate::checkpoint::{CheckpointSigner, CheckpointVerifier};

/// The signature type byte of Ed25519 in `c2sp.org/signed-note`.
pub const ED25519: u8 = 0x01;

/// How many signature lines a note may carry (the spec asks for at least 16).
const MAX_SIGNATURES: usize = 64;

/// The key id of an Ed25519 key: `SHA-256(name || 0x0A || 0x01 || public key)[..4]`.
pub fn key_id(name: &str, public_key: &[u8; 32]) -> [u8; 4] {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update([0x0a, ED25519]);
    hasher.update(public_key);
    let digest = hasher.finalize();
    [digest[0], digest[1], digest[2], digest[3]]
}

/// The verifier key (`vkey`) of `c2sp.org/signed-note`: `name+hex(key id)+base64(0x01 || key)`,
/// what other tools (Go's `sumdb/note`) take to verify our checkpoints.
pub fn verifier_key(name: &str, public_key: &[u8; 32]) -> String {
    let mut material = vec![ED25519];
    material.extend_from_slice(public_key);
    format!(
        "{name}+{}+{}",
        hex(&key_id(name, public_key)),
        base64(&material)
    )
}

/// Checks a key name (or origin) is usable: not empty, no spaces, no `+`, no control character.
pub fn check_key_name(name: &str) -> Result<(), TlogError> {
    if name.is_empty()
        || name
            .chars()
            .any(|c| c.is_whitespace() || c == '+' || c.is_control())
    {
        return Err(TlogError::Malformed(format!(
            "{name:?} cannot name a key or a log: it must be non-empty, without spaces or `+`"
        )));
    }
    Ok(())
}

/// A tree head: what a checkpoint states.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeHead {
    /// The log's name: `capability/<writer>` for a writer's records.
    pub origin: String,
    /// The number of leaves.
    pub size: u64,
    /// The RFC 6962 root hash.
    pub root: Hash,
}

impl TreeHead {
    /// The note's text: origin, size and root (base64), each ending in a newline.
    pub fn body(&self) -> String {
        format!("{}\n{}\n{}\n", self.origin, self.size, base64(&self.root))
    }

    /// The checkpoint signed by `signer`, under the key name `origin`.
    pub fn sign(&self, signer: &dyn CheckpointSigner) -> Result<SignedCheckpoint, TlogError> {
        self.sign_with(&[], signer)
    }

    /// [`sign`](Self::sign), with `extensions` (lines without their newline, none empty) after
    /// the root: readers that do not know them ignore them, as `c2sp.org/tlog-checkpoint` says.
    pub fn sign_with(
        &self,
        extensions: &[String],
        signer: &dyn CheckpointSigner,
    ) -> Result<SignedCheckpoint, TlogError> {
        check_key_name(&self.origin)?;
        if extensions.iter().any(|l| l.is_empty() || l.contains('\n')) {
            return Err(TlogError::Malformed(
                "an extension line is empty or holds a newline".into(),
            ));
        }
        let public_key = public_key(&signer.public_key_hex())?;
        let mut body = self.body();
        for line in extensions {
            body.push_str(line);
            body.push('\n');
        }
        let signature = from_hex(&signer.sign_checkpoint(body.as_bytes()))
            .filter(|s| s.len() == 64)
            .ok_or_else(|| TlogError::Malformed("the signer gave no Ed25519 signature".into()))?;
        Ok(SignedCheckpoint {
            head: self.clone(),
            body,
            signatures: vec![NoteSignature {
                name: self.origin.clone(),
                key_id: key_id(&self.origin, &public_key),
                signature,
            }],
        })
    }
}

/// One signature line: `— <name> base64(key id || signature)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteSignature {
    /// The key name.
    pub name: String,
    /// The key id.
    pub key_id: [u8; 4],
    /// The signature (64 bytes for Ed25519).
    pub signature: Vec<u8>,
}

impl NoteSignature {
    /// The signature line, newline included: `— <name> base64(key id || signature)`.
    pub fn line(&self) -> String {
        let mut bytes = self.key_id.to_vec();
        bytes.extend_from_slice(&self.signature);
        format!("\u{2014} {} {}\n", self.name, base64(&bytes))
    }

    /// Reads one signature line (without its newline); `None` when it is not one.
    pub fn parse(line: &str) -> Option<NoteSignature> {
        parse_signature(line)
    }
}

/// A checkpoint as a signed note: the tree head, its text as signed, and its signatures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedCheckpoint {
    /// What the body says.
    pub head: TreeHead,
    /// The body exactly as signed (extension lines included).
    pub body: String,
    /// Every signature line, in order (including those of keys not known here).
    pub signatures: Vec<NoteSignature>,
}

impl SignedCheckpoint {
    /// The note's text: the body, a blank line, the signature lines.
    pub fn to_text(&self) -> String {
        let mut text = self.body.clone();
        text.push('\n');
        for s in &self.signatures {
            text.push_str(&s.line());
        }
        text
    }

    /// Reads a signed checkpoint (strictly: the formats of `c2sp.org/signed-note` and
    /// `c2sp.org/tlog-checkpoint`). The signatures are not checked here: see
    /// [`verify`](Self::verify).
    pub fn parse(text: &str) -> Result<SignedCheckpoint, TlogError> {
        let bad = |why: &str| TlogError::Malformed(format!("not a signed checkpoint: {why}"));
        // The spec's control characters: those below U+0020, newline aside.
        if text.chars().any(|c| c < ' ' && c != '\n') {
            return Err(bad("a control character other than newline"));
        }
        if !text.ends_with('\n') {
            return Err(bad("it does not end with a newline"));
        }
        let split = text
            .rfind("\n\n")
            .ok_or_else(|| bad("no blank line before the signatures"))?;
        let (body, signatures) = (&text[..=split], &text[split + 2..]);
        let signatures = signatures
            .lines()
            .map(|line| parse_signature(line).ok_or_else(|| bad("a malformed signature line")))
            .collect::<Result<Vec<_>, _>>()?;
        if signatures.is_empty() {
            return Err(bad("no signature"));
        }
        if signatures.len() > MAX_SIGNATURES {
            return Err(bad("too many signatures"));
        }
        let mut lines = body.lines();
        let origin = lines.next().filter(|l| !l.is_empty());
        let origin = origin.ok_or_else(|| bad("no origin line"))?;
        let size = lines.next().ok_or_else(|| bad("no tree size line"))?;
        let canonical = size == "0" || !size.starts_with('0');
        let size = size
            .parse::<u64>()
            .ok()
            .filter(|_| canonical && size.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| bad("the tree size is not a decimal number"))?;
        let root = lines.next().ok_or_else(|| bad("no root hash line"))?;
        let root = from_base64(root)
            .and_then(|r| Hash::try_from(r).ok())
            .ok_or_else(|| bad("the root hash is not 32 bytes in base64"))?;
        if lines.any(str::is_empty) {
            return Err(bad("an empty extension line"));
        }
        Ok(SignedCheckpoint {
            head: TreeHead {
                origin: origin.to_owned(),
                size,
                root,
            },
            body: body.to_owned(),
            signatures,
        })
    }

    /// Checks the note is signed by `key` under the key name `name`: some signature line has
    /// that name and the key's id, and every such line verifies. Signatures of other keys
    /// (witnesses, a rotated key) are ignored, as the spec says.
    pub fn verify(&self, name: &str, key: &dyn CheckpointVerifier) -> Result<(), TlogError> {
        let public_key = public_key(&key.public_key_hex())?;
        let id = key_id(name, &public_key);
        let mine: Vec<&NoteSignature> = self
            .signatures
            .iter()
            .filter(|s| s.name == name && s.key_id == id)
            .collect();
        if mine.is_empty() {
            return Err(TlogError::WrongKey {
                name: name.to_owned(),
                key_id: hex(&id),
                found: self
                    .signatures
                    .iter()
                    .map(|s| format!("{} {}", s.name, hex(&s.key_id)))
                    .collect(),
            });
        }
        for signature in mine {
            if !key.verify_checkpoint(self.body.as_bytes(), &hex(&signature.signature)) {
                return Err(TlogError::BadSignature {
                    name: name.to_owned(),
                });
            }
        }
        Ok(())
    }
}

fn parse_signature(line: &str) -> Option<NoteSignature> {
    let rest = line.strip_prefix("\u{2014} ")?;
    let (name, signature) = rest.split_once(' ')?;
    check_key_name(name).ok()?;
    let bytes = from_base64(signature)?;
    if bytes.len() < 5 {
        return None;
    }
    Some(NoteSignature {
        name: name.to_owned(),
        key_id: [bytes[0], bytes[1], bytes[2], bytes[3]],
        signature: bytes[4..].to_vec(),
    })
}

fn public_key(key_hex: &str) -> Result<[u8; 32], TlogError> {
    from_hex(key_hex)
        .and_then(|k| <[u8; 32]>::try_from(k).ok())
        .ok_or_else(|| TlogError::Malformed("the key is not a 32-byte Ed25519 public key".into()))
}
