//! Approvers' keys, under our own names: a [`SecretKey`] signs approvals, a [`PublicKey`] is what
//! a [`WriteGate`](crate::WriteGate) trusts.
//!
//! Ed25519 (the `ed25519-dalek` crate) does the work, but none of its types is part of this
//! crate's API: the signature scheme or the crate behind it can change without changing the
//! API, and the only ways in and out of a key are the ones here (generate, the key file text,
//! the public half). Key files hold the 32 key bytes as 64 hex digits and a newline.

use std::fmt;

use capability_rules::hex;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

use crate::error::GateError;

/// An approver's secret key: it signs approvals (`capability approve`). Keep it out of the agent
/// process; the gate needs only the [`PublicKey`].
///
/// It is not `Clone`, and `Debug` shows only the public half. The key bytes are wiped from
/// memory when it is dropped.
///
/// ```compile_fail,E0599
/// let key = capability::gate::SecretKey::generate().unwrap();
/// let copy = key.clone(); // a secret key is not copied around
/// ```
pub struct SecretKey(SigningKey);

/// An approver's public key: what a [`WriteGate`](crate::WriteGate) checks signatures with.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(VerifyingKey);

impl SecretKey {
    /// A fresh key, from the operating system's randomness.
    pub fn generate() -> Result<SecretKey, GateError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| GateError::Malformed {
            what: "the key".to_owned(),
            why: format!("no randomness available: {e}"),
        })?;
        Ok(SecretKey(SigningKey::from_bytes(&seed)))
    }

    /// Its public half, for the gate.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// The text of a secret key file: the 32-byte Ed25519 seed as 64 hex digits, and a newline.
    pub fn to_text(&self) -> String {
        format!("{}\n", hex::encode(self.0.as_bytes()))
    }

    /// Reads a secret key file (white space around the digits is ignored).
    pub fn from_text(text: &str) -> Result<SecretKey, GateError> {
        match hex::decode_array::<32>(text.trim()) {
            Some(seed) => Ok(SecretKey(SigningKey::from_bytes(&seed))),
            None => Err(GateError::Malformed {
                what: "the secret key file".to_owned(),
                why: "expected 64 hex digits (an Ed25519 seed)".to_owned(),
            }),
        }
    }

    /// Signs a re-pin of a tool descriptor (`capability pin --approve`), as 128 hex digits.
    /// The message must begin with `capability re-pin v1` and a line break (what
    /// `capability::mcp::Repin::message` writes), so that a re-pin's signature is never an
    /// approval's, a grant's or a checkpoint's; any other message is refused.
    pub fn sign_repin(&self, message: &[u8]) -> Result<String, GateError> {
        if !is_repin(message) {
            return Err(GateError::Malformed {
                what: "the re-pin message".to_owned(),
                why: format!("it does not begin with `{REPIN_DOMAIN}`"),
            });
        }
        Ok(self.sign_hex(message))
    }

    /// The signature of `message`, as 128 hex digits.
    pub(crate) fn sign_hex(&self, message: &[u8]) -> String {
        hex::encode(&self.0.sign(message).to_bytes())
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretKey")
            .field("public_key", &self.public_key())
            .finish_non_exhaustive()
    }
}

impl PublicKey {
    /// The text of a public key file: the 32-byte Ed25519 public key as 64 hex digits, and a
    /// newline.
    pub fn to_text(&self) -> String {
        format!("{self}\n")
    }

    /// Reads a public key file (white space around the digits is ignored). A weak key (a point
    /// of small order, for which signatures can be forged) is refused.
    pub fn from_text(text: &str) -> Result<PublicKey, GateError> {
        let malformed = |why: &str| GateError::Malformed {
            what: "the public key file".to_owned(),
            why: why.to_owned(),
        };
        let key = hex::decode_array::<32>(text.trim())
            .and_then(|bytes| VerifyingKey::from_bytes(&bytes).ok())
            .ok_or_else(|| malformed("expected 64 hex digits (an Ed25519 public key)"))?;
        if key.is_weak() {
            return Err(malformed(
                "a weak Ed25519 public key (a point of small order), which anyone can forge \
                 signatures for; generate a key pair with `capability keygen`",
            ));
        }
        Ok(PublicKey(key))
    }

    /// Whether `signature` (128 hex digits) is this key's signature of the re-pin `message`
    /// (which must begin with `capability re-pin v1`), checked strictly.
    pub fn verify_repin(&self, message: &[u8], signature: &str) -> bool {
        is_repin(message) && self.verify_hex(message, signature)
    }

    /// Whether `signature` (128 hex digits) is this key's signature of `message`. Verification is
    /// strict: a signature that only a weak key or a non-canonical encoding would accept is
    /// refused.
    pub(crate) fn verify_hex(&self, message: &[u8], signature: &str) -> bool {
        match hex::decode_array::<64>(signature) {
            Some(bytes) => self
                .0
                .verify_strict(message, &Signature::from_bytes(&bytes))
                .is_ok(),
            None => false,
        }
    }
}

/// What a re-pin message begins with (`capability::mcp::lock::REPIN_DOMAIN`, repeated here so
/// that this crate needs no MCP code), then a line break.
const REPIN_DOMAIN: &str = "capability re-pin v1";

fn is_repin(message: &[u8]) -> bool {
    message
        .strip_prefix(REPIN_DOMAIN.as_bytes())
        .is_some_and(|rest| rest.starts_with(b"\n"))
}

/// The 64 hex digits of the key, as in its key file.
impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0.as_bytes()))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

/// An approver's key also signs audit checkpoints (`capability_audit::Checkpoint`).
impl capability_audit::CheckpointSigner for SecretKey {
    fn public_key_hex(&self) -> String {
        self.public_key().to_string()
    }

    fn sign_checkpoint(&self, message: &[u8]) -> String {
        self.sign_hex(message)
    }
}

/// Verifies audit checkpoints strictly, as approvals.
impl capability_audit::CheckpointVerifier for PublicKey {
    fn public_key_hex(&self) -> String {
        self.to_string()
    }

    fn verify_checkpoint(&self, message: &[u8], signature: &str) -> bool {
        self.verify_hex(message, signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_with_its_own_public_key_only() {
        let alice = SecretKey::generate().expect("randomness");
        let mallory = SecretKey::generate().expect("randomness");
        let signature = alice.sign_hex(b"restart api-0");
        assert_eq!(signature.len(), 128);
        assert!(alice.public_key().verify_hex(b"restart api-0", &signature));
        assert!(!alice.public_key().verify_hex(b"restart api-1", &signature));
        assert!(
            !mallory
                .public_key()
                .verify_hex(b"restart api-0", &signature)
        );
        // Not hex, too short, too long: refused, no panic.
        for bad in ["", "zz", &signature[..126], &format!("{signature}00")] {
            assert!(
                !alice.public_key().verify_hex(b"restart api-0", bad),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn weak_public_keys_are_refused() {
        // The identity point (y = 1): every signature with R = identity and s = 0 verifies
        // under a lax check, whatever the message.
        let identity = format!("01{}", "00".repeat(31));
        let error = PublicKey::from_text(&identity).expect_err("weak");
        assert!(
            error.to_string().contains("weak Ed25519 public key"),
            "{error}"
        );
        // Such a key, if it got in, could not be used to approve a forgery either.
        let mut bytes = [0u8; 32];
        bytes[0] = 1;
        let weak = VerifyingKey::from_bytes(&bytes).expect("a point");
        let forged_bytes: [u8; 64] = std::array::from_fn(|i| u8::from(i == 0));
        let forged = hex::encode(&forged_bytes);
        let lax = ed25519_dalek::Verifier::verify(
            &weak,
            b"anything",
            &Signature::from_bytes(&forged_bytes),
        );
        assert!(lax.is_ok(), "the lax check accepts the forgery");
        assert!(!PublicKey(weak).verify_hex(b"anything", &forged));
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let key = SecretKey::from_text(&"07".repeat(32)).expect("a seed");
        let debug = format!("{key:?}");
        assert!(!debug.contains(&"07".repeat(32)), "{debug}");
        assert!(debug.contains(&key.public_key().to_string()), "{debug}");
    }
}
