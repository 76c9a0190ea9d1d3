//! Where the gate remembers which approvals were used: the [`ApprovalLedger`] seam, a
//! [`StoreError`] for stores that cannot be reached, and the in-memory ledger for tests.
//!
//! A ledger shared by every process that runs a [`WriteGate`](crate::WriteGate) for one audience
//! makes "an approval executes once" hold across restarts and replicas: the SQLite and
//! PostgreSQL ledgers of the `capability-store` crate are. The in-memory one holds only within
//! one process, and is named for it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

/// Whether consuming an approval id was its first use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Consumed {
    /// First use: it is now recorded as used.
    First,
    /// It was used before: refuse it.
    Again,
}

/// The set of used approval ids, shared by every gate that must refuse a replay.
///
/// [`consume`](Self::consume) must be atomic: when several processes consume one id at once,
/// exactly one gets [`Consumed::First`]. An id is remembered at least until its approval
/// expires (after that, the gate refuses the approval as expired anyway). An error means the
/// ledger could not be reached: the gate then refuses the approval (fail-closed), and the id
/// is not consumed.
pub trait ApprovalLedger: Send + Sync + fmt::Debug {
    /// Records `approval_id` as used, atomically; `expires_at` (Unix seconds) is when the
    /// approval expires, after which the ledger may forget the id.
    fn consume(&self, approval_id: &str, expires_at: u64) -> Result<Consumed, StoreError>;
}

impl<L: ApprovalLedger + ?Sized> ApprovalLedger for std::sync::Arc<L> {
    fn consume(&self, approval_id: &str, expires_at: u64) -> Result<Consumed, StoreError> {
        (**self).consume(approval_id, expires_at)
    }
}

/// A ledger in this process's memory: for tests and single-process programs. A restarted
/// process, or a second replica, does not see its ids: use a shared ledger
/// (`capability_store`) wherever an approval must not run twice across processes.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    used: Mutex<HashMap<String, u64>>,
}

impl MemoryLedger {
    /// An empty in-memory ledger.
    pub fn new() -> Self {
        MemoryLedger::default()
    }
}

impl ApprovalLedger for MemoryLedger {
    fn consume(&self, approval_id: &str, expires_at: u64) -> Result<Consumed, StoreError> {
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if used.contains_key(approval_id) {
            return Ok(Consumed::Again);
        }
        used.insert(approval_id.to_owned(), expires_at);
        Ok(Consumed::First)
    }
}

/// A shared store (a ledger, a revocation store) could not be reached or refused a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError {
    /// Which store: `sqlite:/var/lib/capability/state.db`, `postgres://host/db` (without
    /// credentials), `memory`.
    pub store: String,
    /// What went wrong.
    pub message: String,
}

impl StoreError {
    /// An error of `store`.
    pub fn new(store: impl Into<String>, message: impl Into<String>) -> Self {
        StoreError {
            store: store.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "store {} unavailable: {}", self.store, self.message)
    }
}

impl std::error::Error for StoreError {}
