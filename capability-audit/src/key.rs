//! The secret key of a trail's digests.
//!
//! The trail keeps no sensitive value, and no digest anyone could recompute from a guess: each
//! sensitive field, the input digest and the output digest are HMAC-SHA-256 under a
//! [`DigestKey`] that the sink holds and never writes. Whoever holds the trail alone cannot
//! confirm a guessed password; whoever holds the key can (hash the guess with
//! [`DigestKey::digest_json`] and compare), and the same value under the same key always gives
//! the same digest, so the key holder can still correlate records.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;

/// How a keyed digest starts in the trail: `hmac-sha256:` and 64 lowercase hex digits.
pub const KEYED_DIGEST_PREFIX: &str = "hmac-sha256:";

/// The length of a [`DigestKey`], in bytes (64 hex digits as text).
pub const DIGEST_KEY_LEN: usize = 32;

/// The secret key of a trail's keyed digests (HMAC-SHA-256): 32 bytes.
///
/// Configure one on the sink ([`MemorySink::with_digest_key`](crate::MemorySink::with_digest_key),
/// [`JsonlSink::with_digest_key`](crate::JsonlSink::with_digest_key)) and keep it apart from the
/// trail: with it, a guess can be confirmed, so it is as secret as the values it protects. A sink
/// without one uses a random key of its own (see
/// [`AuditSink::digest_key`](crate::AuditSink::digest_key)).
///
/// The key never appears in the trail, in `tracing` events, in errors or in `Debug` output; only
/// [`expose_hex`](Self::expose_hex) gives it out.
///
/// ```
/// use capability::audit::DigestKey;
///
/// let key = DigestKey::from_hex(&"ab".repeat(32))?;
/// assert_eq!(format!("{key:?}"), "DigestKey(<secret>)");
/// let digest = key.digest_json(&serde_json::json!("hunter2"));
/// assert!(digest.starts_with("hmac-sha256:") && digest.len() == 12 + 64);
/// assert!(DigestKey::from_hex("not a key").is_err());
/// # Ok::<(), capability::audit::KeyError>(())
/// ```
#[derive(Clone)]
pub struct DigestKey {
    bytes: [u8; DIGEST_KEY_LEN],
    /// The HMAC state after the key: cloned for each digest, so the key is hashed once.
    mac: Hmac<Sha256>,
}

impl DigestKey {
    /// A new random key, from the operating system's randomness.
    pub fn generate() -> Result<DigestKey, KeyError> {
        let mut bytes = [0u8; DIGEST_KEY_LEN];
        getrandom::fill(&mut bytes).map_err(|e| KeyError::NoRandomness(e.to_string()))?;
        Ok(DigestKey::new(bytes))
    }

    /// A key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<DigestKey, KeyError> {
        let bytes = <[u8; DIGEST_KEY_LEN]>::try_from(bytes)
            .map_err(|_| KeyError::Length { found: bytes.len() })?;
        Ok(DigestKey::new(bytes))
    }

    /// A key from its text: 64 hex digits (either case), with surrounding whitespace (a key
    /// file's newline) ignored. The error never repeats the text.
    pub fn from_hex(text: &str) -> Result<DigestKey, KeyError> {
        let text = text.trim().as_bytes();
        if !text.iter().all(u8::is_ascii_hexdigit) {
            return Err(KeyError::NotHex);
        }
        if text.len() != 2 * DIGEST_KEY_LEN {
            return Err(KeyError::HexLength { found: text.len() });
        }
        let mut bytes = [0u8; DIGEST_KEY_LEN];
        for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
            *byte = (nibble(pair[0]) << 4) | nibble(pair[1]);
        }
        Ok(DigestKey::new(bytes))
    }

    /// The key as 64 lowercase hex digits, to store it (a key file, a secret manager). This is
    /// the secret itself: keep it away from the trail and from logs.
    pub fn expose_hex(&self) -> String {
        hex(&self.bytes)
    }

    /// The keyed digest of some bytes: `hmac-sha256:<HMAC-SHA-256 under this key, in hex>`.
    pub fn digest(&self, bytes: &[u8]) -> String {
        let mut mac = self.mac.clone();
        mac.update(bytes);
        let mut digest = String::with_capacity(KEYED_DIGEST_PREFIX.len() + 64);
        digest.push_str(KEYED_DIGEST_PREFIX);
        hex_to(&mut digest, &mac.finalize().into_bytes());
        digest
    }

    /// The keyed digest of a JSON value's canonical JSON: what the trail stores for a
    /// sensitive field, and (over the whole input or output) its `input_digest` and
    /// `output_digest`.
    pub fn digest_json(&self, value: &Value) -> String {
        self.digest(capability_core::json::to_canonical_json(value).as_bytes())
    }

    fn new(bytes: [u8; DIGEST_KEY_LEN]) -> DigestKey {
        // HMAC pads a key shorter than the hash's 64-byte block with zeros (RFC 2104), so
        // the padded block is the same key, taken without a fallible length check.
        let mut block = [0u8; 64];
        block[..DIGEST_KEY_LEN].copy_from_slice(&bytes);
        let mac = <Hmac<Sha256> as KeyInit>::new(&block.into());
        DigestKey { bytes, mac }
    }
}

impl fmt::Debug for DigestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DigestKey(<secret>)")
    }
}

/// A digest key that could not be made or read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The bytes are not 32.
    Length {
        /// How many there are.
        found: usize,
    },
    /// The text is not all hex digits.
    NotHex,
    /// The text is hex, but not 64 digits.
    HexLength {
        /// How many digits there are.
        found: usize,
    },
    /// The operating system gave no randomness.
    NoRandomness(String),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Length { found } => write!(
                f,
                "a digest key is {DIGEST_KEY_LEN} bytes, found {found}; make one with \
                 `DigestKey::generate` or `openssl rand -hex 32`"
            ),
            KeyError::NotHex => write!(
                f,
                "a digest key's text is {} hex digits, and this one has other characters",
                2 * DIGEST_KEY_LEN
            ),
            KeyError::HexLength { found } => write!(
                f,
                "a digest key's text is {} hex digits, found {found}",
                2 * DIGEST_KEY_LEN
            ),
            KeyError::NoRandomness(why) => {
                write!(f, "no randomness for a digest key: {why}")
            }
        }
    }
}

impl std::error::Error for KeyError {}

fn nibble(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        b'A'..=b'F' => digit - b'A' + 10,
        // Not reached: the text is checked to be hex first.
        _ => 0,
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 * bytes.len());
    hex_to(&mut out, bytes);
    out
}

fn hex_to(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
}
