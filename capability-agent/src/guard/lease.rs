//! The in-flight lock: one holder of an incident's key at a time, across every process that
//! shares the store; a lease that is not renewed lapses after its TTL, so a crashed holder's
//! key is taken over.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::GuardError;

/// A lease held: the key, who holds it, and its generation (one more at every take-over, so a
/// holder whose lease lapsed and was taken cannot renew or release its successor's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The incident's key.
    pub key: String,
    /// Who holds it (a process: [`LoopGuard::holder`](super::LoopGuard::holder)).
    pub holder: String,
    /// Taken for the `generation`-th time.
    pub generation: u64,
    /// Taken at (ms since the Unix epoch).
    pub since_ms: u64,
    /// Lapses at, unless renewed.
    pub expires_ms: u64,
}

/// What [`LeaseStore::acquire`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// The key was free (or its lease had lapsed): it is ours.
    Held(Lease),
    /// Someone else holds it, and their lease has not lapsed.
    InFlight(Lease),
}

/// The seam: where leases live. In memory ([`MemoryLeases`], one process), or in a database
/// every replica shares (`capability-store`: SQLite, PostgreSQL). Each method is one atomic
/// step of the store.
pub trait LeaseStore: Send + Sync {
    /// Takes `key` for `holder` until `now_ms + ttl_ms` if nobody holds it or its lease has
    /// lapsed (`expires_ms <= now_ms`); otherwise says who holds it.
    fn acquire(
        &self,
        key: &str,
        holder: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Acquire, GuardError>;

    /// Extends `lease` to `now_ms + ttl_ms` if it is still this holder's, in this generation.
    /// `Ok(false)`: it was taken over (or released); the holder no longer holds it.
    fn renew(&self, lease: &Lease, now_ms: u64, ttl_ms: u64) -> Result<bool, GuardError>;

    /// Lets `lease` go (if it is still this holder's, in this generation): the key is free.
    fn release(&self, lease: &Lease) -> Result<(), GuardError>;
}

/// Leases in this process's memory: one process's loops.
#[derive(Debug, Default)]
pub struct MemoryLeases {
    leases: Mutex<HashMap<String, Lease>>,
}

impl MemoryLeases {
    /// No lease held.
    pub fn new() -> Self {
        MemoryLeases::default()
    }
}

impl LeaseStore for MemoryLeases {
    fn acquire(
        &self,
        key: &str,
        holder: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Acquire, GuardError> {
        let mut leases = self.leases.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = match leases.get(key) {
            Some(held) if held.expires_ms > now_ms => return Ok(Acquire::InFlight(held.clone())),
            Some(lapsed) => lapsed.generation.saturating_add(1),
            None => 1,
        };
        let lease = Lease {
            key: key.to_owned(),
            holder: holder.to_owned(),
            generation,
            since_ms: now_ms,
            expires_ms: now_ms.saturating_add(ttl_ms),
        };
        leases.insert(key.to_owned(), lease.clone());
        Ok(Acquire::Held(lease))
    }

    fn renew(&self, lease: &Lease, now_ms: u64, ttl_ms: u64) -> Result<bool, GuardError> {
        let mut leases = self.leases.lock().unwrap_or_else(PoisonError::into_inner);
        match leases.get_mut(&lease.key) {
            Some(held) if held.holder == lease.holder && held.generation == lease.generation => {
                held.expires_ms = now_ms.saturating_add(ttl_ms);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn release(&self, lease: &Lease) -> Result<(), GuardError> {
        let mut leases = self.leases.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = leases.get_mut(&lease.key)
            && held.holder == lease.holder
            && held.generation == lease.generation
        {
            // Kept, lapsed: the next take-over counts the next generation.
            held.expires_ms = 0;
        }
        Ok(())
    }
}
