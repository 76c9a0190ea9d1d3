//! Where records go: the `AuditSink` seam, and the in-memory sink for tests.

use std::sync::{Mutex, OnceLock};

use crate::*;

/// Where audit records go.
pub trait AuditSink: Send + Sync {
    /// Appends one record, completing its `seq`, `prev` and `hash`. An error means the record
    /// is not yet durable: it is kept and retried by [`ready`](Self::ready), unless
    /// [`discard_pending`](Self::discard_pending) drops it.
    fn append(&self, record: AuditRecord) -> Result<AuditRecord, AuditError>;

    /// Whether the sink can take records now: retries what is pending. The dispatcher asks
    /// before every call it is about to run, so a failing trail stops calls (fail-closed).
    fn ready(&self) -> Result<(), AuditError> {
        Ok(())
    }

    /// Stops the sink: writes what is pending and, for a sink that signs checkpoints, a final
    /// checkpoint. Records appended afterwards are refused. Called on shutdown; a sink also
    /// closes itself when dropped, as far as it can.
    fn close(&self) -> Result<(), AuditError> {
        Ok(())
    }

    /// Drops the records that could not be written and returns how many; the trail goes on
    /// from the last record written, so it stays valid (with those records missing).
    fn discard_pending(&self) -> u64 {
        0
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
#[derive(Debug, Default)]
pub struct MemorySink {
    records: Mutex<Vec<AuditRecord>>,
    key: SinkKey,
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
        lock(&self.records).clone()
    }
}

impl AuditSink for MemorySink {
    fn append(&self, mut record: AuditRecord) -> Result<AuditRecord, AuditError> {
        let mut records = lock(&self.records);
        record.seq = records.len() as u64 + 1;
        record.prev = records
            .last()
            .map_or_else(|| GENESIS.to_owned(), |r| r.hash.clone());
        record.hash = record.compute_hash();
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
