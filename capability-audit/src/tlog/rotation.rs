//! Key rotation: a log's signing key hands over to another at a tree size, in a statement the
//! old key signs, so that old checkpoints keep verifying with the old key and no key signs
//! outside its span.
//!
//! ```text
//! capability/key-rotation/v1
//! capability/replica-1
//! 1200
//! capability/replica-1+8c0a35f1+AdWc...   (the new key, as a signed-note vkey)
//!
//! — capability/replica-1 base64(old key id || Ed25519 signature)
//! ```
//!
//! The statement says "the key that signs this hands over to the named key at size 1200": the
//! old key signs trees of at most 1,200 records, the new key trees of at least 1,200 (the log
//! signs the tree of 1,200 with both). Given the log's keys and its rotations, [`LogKeys`]
//! matches a checkpoint's signature to a key by key id and refuses a checkpoint signed by a key
//! outside its span (the new key below the hand-over, the retired key above it), or by a key no
//! rotation hands over to. The statement's body cannot be read as a checkpoint (its second line
//! is no tree size), so a rotation signature is never a checkpoint signature.
//!
//! What it proves: the holder of the old key named its successor. What it cannot: that the old
//! key was not stolen before it signed the hand-over; keep rotation statements where the
//! checkpoints are kept (with the party holding the proofs, at a witness's side).

use super::encoding::{from_base64, hex};
use super::error::TlogError;
use super::note::{ED25519, NoteSignature, SignedCheckpoint, key_id, verifier_key};
use crate::checkpoint::{CheckpointSigner, CheckpointVerifier};

/// The first line of a rotation statement.
pub const ROTATION_HEADER: &str = "capability/key-rotation/v1";

/// A signed hand-over from one log key to the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRotation {
    /// The log.
    pub origin: String,
    /// The tree size at which the new key takes over.
    pub size: u64,
    /// The new key.
    pub new_key: [u8; 32],
    /// The signature lines (the old key's, under the origin's name).
    pub signatures: Vec<NoteSignature>,
}

impl KeyRotation {
    /// The statement's body.
    pub fn body(&self) -> String {
        format!(
            "{ROTATION_HEADER}\n{}\n{}\n{}\n",
            self.origin,
            self.size,
            verifier_key(&self.origin, &self.new_key)
        )
    }

    /// `old` hands `origin` over to the key `new_key_hex` (64 hex digits) at tree size `size`.
    pub fn sign(
        origin: &str,
        size: u64,
        new_key_hex: &str,
        old: &dyn CheckpointSigner,
    ) -> Result<KeyRotation, TlogError> {
        super::note::check_key_name(origin)?;
        let new_key = super::cosignature::public_key_bytes(new_key_hex)?;
        let old_key = super::cosignature::public_key_bytes(&old.public_key_hex())?;
        let mut rotation = KeyRotation {
            origin: origin.to_owned(),
            size,
            new_key,
            signatures: Vec::new(),
        };
        let signature = super::encoding::from_hex(&old.sign_checkpoint(rotation.body().as_bytes()))
            .filter(|s| s.len() == 64)
            .ok_or_else(|| TlogError::Malformed("the old key gave no Ed25519 signature".into()))?;
        rotation.signatures.push(NoteSignature {
            name: origin.to_owned(),
            key_id: key_id(origin, &old_key),
            signature,
        });
        Ok(rotation)
    }

    /// The statement as a signed note.
    pub fn to_text(&self) -> String {
        let mut text = self.body();
        text.push('\n');
        for line in &self.signatures {
            text.push_str(&line.line());
        }
        text
    }

    /// Reads a rotation statement (its signatures are checked by [`LogKeys::new`]).
    pub fn parse(text: &str) -> Result<KeyRotation, TlogError> {
        let bad = |why: &str| TlogError::Malformed(format!("not a key rotation statement: {why}"));
        let (body, signatures) = text
            .split_once("\n\n")
            .ok_or_else(|| bad("no blank line before the signatures"))?;
        let mut lines = body.split('\n');
        if lines.next() != Some(ROTATION_HEADER) {
            return Err(bad(&format!("the first line is not `{ROTATION_HEADER}`")));
        }
        let origin = lines.next().ok_or_else(|| bad("no origin line"))?;
        let size = lines
            .next()
            .filter(|n| *n == "0" || !n.starts_with('0'))
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| bad("the size line is not a decimal number"))?;
        let vkey = lines.next().ok_or_else(|| bad("no new key line"))?;
        if lines.next().is_some() {
            return Err(bad("a line after the new key"));
        }
        let new_key = parse_vkey(origin, vkey).ok_or_else(|| {
            bad(&format!(
                "the new key is not an Ed25519 verifier key named {origin}"
            ))
        })?;
        let signatures = signatures
            .lines()
            .map(|l| NoteSignature::parse(l).ok_or_else(|| bad("a malformed signature line")))
            .collect::<Result<Vec<_>, _>>()?;
        if signatures.is_empty() || signatures.len() > 16 {
            return Err(bad("no signature, or more than 16"));
        }
        let rotation = KeyRotation {
            origin: origin.to_owned(),
            size,
            new_key,
            signatures,
        };
        if rotation.to_text() != text {
            return Err(bad("not in its canonical form"));
        }
        Ok(rotation)
    }
}

fn parse_vkey(origin: &str, vkey: &str) -> Option<[u8; 32]> {
    let mut parts = vkey.splitn(3, '+');
    let (name, id, material) = (parts.next()?, parts.next()?, parts.next()?);
    let material = from_base64(material)?;
    let (&kind, key) = material.split_first()?;
    let key = <[u8; 32]>::try_from(key).ok()?;
    (name == origin && kind == ED25519 && id == hex(&key_id(origin, &key))).then_some(key)
}

/// A log's keys over time: each key with the span of tree sizes it may sign.
pub struct LogKeys<'a> {
    origin: String,
    spans: Vec<Span<'a>>,
}

struct Span<'a> {
    key: &'a dyn CheckpointVerifier,
    public_key: [u8; 32],
    from: u64,
    until: Option<u64>,
}

impl<'a> LogKeys<'a> {
    /// The keys of `origin`: the first (the one no rotation hands over to) signs from size 0;
    /// each rotation, signed by the key before it, hands over at its size. Refused, saying
    /// which: a rotation of another log, one not signed by the key it retires, a rotation to a
    /// key not given, sizes that go back, a given key no rotation reaches.
    pub fn new(
        origin: &str,
        keys: &[&'a dyn CheckpointVerifier],
        rotations: &[KeyRotation],
    ) -> Result<LogKeys<'a>, TlogError> {
        let bytes = keys
            .iter()
            .map(|k| super::cosignature::public_key_bytes(&k.public_key_hex()))
            .collect::<Result<Vec<_>, _>>()?;
        let find = |key: &[u8; 32]| bytes.iter().position(|b| b == key);
        let mut rotations: Vec<&KeyRotation> = rotations.iter().collect();
        rotations.sort_by_key(|r| r.size);
        // The first key: the given key no rotation hands over to.
        let first = (0..keys.len())
            .find(|&i| rotations.iter().all(|r| r.new_key != bytes[i]))
            .ok_or_else(|| TlogError::Rotation(format!("no key of {origin} is the first one")))?;
        let mut spans = vec![Span {
            key: keys[first],
            public_key: bytes[first],
            from: 0,
            until: None,
        }];
        for rotation in rotations {
            let last = spans.len() - 1;
            let current = &spans[last];
            let named = format!("the rotation of {origin} at size {}", rotation.size);
            if rotation.origin != origin {
                return Err(TlogError::Rotation(format!(
                    "{named} is of another log ({})",
                    rotation.origin
                )));
            }
            if rotation.size < current.from {
                return Err(TlogError::Rotation(format!(
                    "{named} goes back below the previous hand-over at size {}",
                    current.from
                )));
            }
            let note = SignedCheckpoint {
                head: super::note::TreeHead {
                    origin: origin.to_owned(),
                    size: 0,
                    root: [0; 32],
                },
                body: rotation.body(),
                signatures: rotation.signatures.clone(),
            };
            note.verify(origin, current.key).map_err(|e| {
                TlogError::Rotation(format!(
                    "{named} is not signed by the key it retires ({}): {e}",
                    hex(&key_id(origin, &current.public_key))
                ))
            })?;
            let next = find(&rotation.new_key).ok_or_else(|| {
                TlogError::Rotation(format!(
                    "{named} hands over to key {}, which is not given",
                    hex(&key_id(origin, &rotation.new_key))
                ))
            })?;
            spans[last].until = Some(rotation.size);
            spans.push(Span {
                key: keys[next],
                public_key: bytes[next],
                from: rotation.size,
                until: None,
            });
        }
        if let Some(stray) = bytes
            .iter()
            .find(|b| !spans.iter().any(|s| &s.public_key == *b))
        {
            return Err(TlogError::Rotation(format!(
                "key {} of {origin} is given, but no rotation hands over to it",
                hex(&key_id(origin, stray))
            )));
        }
        Ok(LogKeys {
            origin: origin.to_owned(),
            spans,
        })
    }

    /// The span of sizes the key `public_key_hex` may sign: from, and until when it handed
    /// over (`None` for a key that is none of the log's).
    pub fn span_of(&self, public_key_hex: &str) -> Option<(u64, Option<u64>)> {
        let key = super::cosignature::public_key_bytes(public_key_hex).ok()?;
        (self.spans.iter())
            .find(|s| s.public_key == key)
            .map(|s| (s.from, s.until))
    }

    /// Whether the key `public_key_hex` may sign this log's tree of `size` records: `Err`
    /// naming the hand-over when its span does not hold the size, or when it is none of the
    /// log's keys (a chain checkpoint says which key signed it).
    pub fn allows(&self, public_key_hex: &str, size: u64) -> Result<(), TlogError> {
        let key = super::cosignature::public_key_bytes(public_key_hex)?;
        let span = (self.spans.iter().find(|s| s.public_key == key)).ok_or_else(|| {
            TlogError::Rotation(format!(
                "the checkpoint of {size} records is signed by key {}, none of {}'s",
                hex(&key_id(&self.origin, &key)),
                self.origin
            ))
        })?;
        let id = hex(&key_id(&self.origin, &key));
        match span.until {
            _ if size < span.from => Err(TlogError::Rotation(format!(
                "the checkpoint of {size} records is signed by key {id}, which takes over only \
                 at size {}: a key signs no tree before its rotation",
                span.from
            ))),
            Some(until) if size > until => Err(TlogError::Rotation(format!(
                "the checkpoint of {size} records is signed by key {id}, which handed over at \
                 size {until}: a retired key signs no larger tree"
            ))),
            _ => Ok(()),
        }
    }

    /// Checks `checkpoint` is of this log and signed by the key whose span holds its size;
    /// returns that key. A signature of a key of the log outside its span is
    /// refused, naming the hand-over; a note signed by none of the keys is [`TlogError::WrongKey`].
    pub fn verify(
        &self,
        checkpoint: &SignedCheckpoint,
    ) -> Result<&'a dyn CheckpointVerifier, TlogError> {
        let head = &checkpoint.head;
        if head.origin != self.origin {
            return Err(TlogError::Malformed(format!(
                "the checkpoint is of log {:?}, not of {:?}",
                head.origin, self.origin
            )));
        }
        let mut refused = None;
        for span in &self.spans {
            let id = key_id(&self.origin, &span.public_key);
            if !checkpoint
                .signatures
                .iter()
                .any(|s| s.key_id == id && s.name == self.origin)
            {
                continue;
            }
            checkpoint.verify(&self.origin, span.key)?;
            let id = hex(&id);
            if head.size < span.from {
                refused = Some(format!(
                    "the checkpoint of {} records is signed by key {id}, which takes over only \
                     at size {}: a key signs no tree before its rotation",
                    head.size, span.from
                ));
            } else if span.until.is_some_and(|until| head.size > until) {
                refused = Some(format!(
                    "the checkpoint of {} records is signed by key {id}, which handed over at \
                     size {}: a retired key signs no larger tree",
                    head.size,
                    span.until.unwrap_or_default()
                ));
            } else {
                return Ok(span.key);
            }
        }
        Err(match refused {
            Some(why) => TlogError::Rotation(why),
            None => TlogError::WrongKey {
                name: self.origin.clone(),
                key_id: self
                    .spans
                    .iter()
                    .map(|s| hex(&key_id(&self.origin, &s.public_key)))
                    .collect::<Vec<_>>()
                    .join(" or "),
                found: checkpoint
                    .signatures
                    .iter()
                    .map(|s| format!("{} {}", s.name, hex(&s.key_id)))
                    .collect(),
            },
        })
    }
}
