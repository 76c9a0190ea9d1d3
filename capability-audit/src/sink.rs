//! Where records go: the `AuditSink` seam, and the in-memory sink for tests.

use std::sync::Mutex;

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

    /// Drops the records that could not be written and returns how many; the trail goes on
    /// from the last record written, so it stays valid (with those records missing).
    fn discard_pending(&self) -> u64 {
        0
    }
}

/// A sink that keeps the records in memory: for tests and short-lived programs.
#[derive(Debug, Default)]
pub struct MemorySink {
    records: Mutex<Vec<AuditRecord>>,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> Self {
        MemorySink::default()
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
}
