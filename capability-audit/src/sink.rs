//! Where records go: the `AuditSink` seam, and the in-memory sink for tests.

use std::sync::{Mutex, OnceLock};

use crate::*;

/// Where audit records go: the seam between the dispatcher and a trail.
///
/// A sink only appends. Whether a call may run is the dispatcher's business
/// ([`AuditedDispatch`]): it writes a call's intent before the call runs and its outcome after,
/// keeps every record whose append failed, and runs nothing until they are written. So a sink
/// of your own cannot make a call run unrecorded, however it fails.
pub trait AuditSink: Send + Sync {
    /// Appends one record: seals it onto the sink's chain (its writer, `seq`, `prev` and `hash`,
    /// see [`ChainHead`]) and writes it. `Ok` (the record as sealed) only once it is written as
    /// durably as this sink writes; `Err` when it is not, and then the record is not in the
    /// chain: the next record follows the last one written, and the dispatcher appends this
    /// one again later, as a new link.
    fn append(&self, record: AuditRecord) -> Result<AuditRecord, AuditError>;

    /// [`append`](Self::append) for a record the caller keeps either way: `Ok` when it is
    /// written, `record` then as sealed; `Err` when it is not, `record` then still the record
    /// to append again (its chain fields are sealed anew by the next append). The dispatcher
    /// appends this way, so that a sink that can seal and write a record in place spares it a
    /// copy of every record. By default, [`append`](Self::append) of a copy.
    fn append_in_place(&self, record: &mut AuditRecord) -> Result<(), AuditError> {
        *record = self.append(record.clone())?;
        Ok(())
    }

    /// Whether the sink can take records now, without writing one: a probe the dispatcher
    /// makes before a call runs (a trail file removed or replaced, a database that stopped
    /// answering). An `Err` refuses the call. It does not replace a failed append: the
    /// dispatcher relies on appends alone.
    fn ready(&self) -> Result<(), AuditError> {
        Ok(())
    }

    /// Stops the sink: writes what it buffers and, for a sink that signs checkpoints, a final
    /// checkpoint. Records appended afterwards are refused. Called on shutdown; a sink also
    /// closes itself when dropped, as far as it can.
    fn close(&self) -> Result<(), AuditError> {
        Ok(())
    }

    /// The secret key of this trail's keyed digests: sensitive fields, `input_digest` and
    /// `output_digest` are HMAC-SHA-256 under it, so the trail alone confirms no guessed value.
    /// The sink keeps it and never writes it into a record.
    ///
    /// The sinks of this crate take one with `with_digest_key`; without one, each sink instance
    /// makes a random key of its own on first use, so its digests stay secret but do not
    /// correlate with those of another sink or another process (nor can anyone confirm a guess
    /// against them, the owner included). An error (no key, and no randomness for one) means
    /// no record can be made: the dispatcher then treats the call as one whose record cannot be
    /// written ([`OnAuditFailure`]).
    fn digest_key(&self) -> Result<&DigestKey, AuditError>;
}

/// A sink that keeps the records in memory: for tests and short-lived programs.
#[derive(Debug)]
pub struct MemorySink {
    records: Mutex<(ChainHead, Vec<AuditRecord>)>,
    key: SinkKey,
}

impl Default for MemorySink {
    fn default() -> Self {
        MemorySink {
            records: Mutex::new((ChainHead::new("", 0, GENESIS), Vec::new())),
            key: SinkKey::default(),
        }
    }
}

impl MemorySink {
    /// An empty sink, with a random digest key of its own (see [`AuditSink::digest_key`]).
    pub fn new() -> Self {
        MemorySink::default()
    }

    /// Uses `key` for the keyed digests of the records.
    pub fn with_digest_key(mut self, key: DigestKey) -> Self {
        self.key = SinkKey::configured(key);
        self
    }

    /// A copy of every record so far.
    pub fn records(&self) -> Vec<AuditRecord> {
        lock(&self.records).1.clone()
    }
}

impl AuditSink for MemorySink {
    fn append(&self, record: AuditRecord) -> Result<AuditRecord, AuditError> {
        let mut guard = lock(&self.records);
        let (head, records) = &mut *guard;
        let record = head.seal(record);
        head.commit();
        records.push(record.clone());
        Ok(record)
    }

    fn digest_key(&self) -> Result<&DigestKey, AuditError> {
        self.key.get()
    }
}

/// A sink's digest key: the one configured, or else a random one made on first use (and
/// retried while the operating system gives no randomness).
#[derive(Debug, Default)]
pub(crate) struct SinkKey(OnceLock<DigestKey>);

impl SinkKey {
    pub(crate) fn configured(key: DigestKey) -> SinkKey {
        SinkKey(OnceLock::from(key))
    }

    pub(crate) fn get(&self) -> Result<&DigestKey, AuditError> {
        if let Some(key) = self.0.get() {
            return Ok(key);
        }
        let key = DigestKey::generate().map_err(AuditError::DigestKey)?;
        Ok(self.0.get_or_init(|| key))
    }
}
