//! The approval ledger and the revocation store on SQLite: every call reads and writes the
//! database (no cache), so each process sees every other's at its next decision.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use capability_gate::{ApprovalLedger, Consumed, RevocationStore, StoreError};
use rusqlite::{TransactionBehavior, params, params_from_iter};

use super::{Db, unix_now};

/// Ids of approvals that expired this long ago (seconds) may be pruned: a day, far beyond any
/// clock tolerance, so an id is always remembered while its approval could still be accepted.
pub const PRUNE_AFTER_SECS: i64 = 86_400;

/// The ledger prunes expired ids once every this many consumptions.
const PRUNE_EVERY: u64 = 256;

/// The used approval ids in `capability_approval_ledger`, shared by every process using the
/// database. [`consume`](ApprovalLedger::consume) is one `INSERT ... ON CONFLICT DO NOTHING`:
/// SQLite serializes writers, so of several processes consuming one id exactly one inserts it.
#[derive(Debug, Clone)]
pub struct SqliteLedger {
    db: Arc<Db>,
    consumed: Arc<AtomicU64>,
}

impl SqliteLedger {
    pub(crate) fn new(db: Arc<Db>) -> Self {
        SqliteLedger {
            db,
            consumed: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Forgets the ids of approvals that expired more than [`PRUNE_AFTER_SECS`] before `now`
    /// (Unix seconds); returns how many. [`consume`](ApprovalLedger::consume) also does this
    /// now and then, with the system clock.
    pub fn prune(&self, now: u64) -> Result<u64, StoreError> {
        let before = i64::try_from(now).unwrap_or(i64::MAX) - PRUNE_AFTER_SECS;
        self.db.with(|conn| {
            let n = conn.execute(
                "DELETE FROM capability_approval_ledger WHERE expires_at < ?1",
                params![before],
            )?;
            Ok(n as u64)
        })
    }
}

impl ApprovalLedger for SqliteLedger {
    fn consume(&self, approval_id: &str, expires_at: u64) -> Result<Consumed, StoreError> {
        let expires_at = i64::try_from(expires_at).unwrap_or(i64::MAX);
        let prune = self.consumed.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1;
        self.db.with(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = unix_now();
            if prune {
                tx.execute(
                    "DELETE FROM capability_approval_ledger WHERE expires_at < ?1",
                    params![now - PRUNE_AFTER_SECS],
                )?;
            }
            let inserted = tx.execute(
                "INSERT INTO capability_approval_ledger (approval_id, expires_at, used_at)
                 VALUES (?1, ?2, ?3) ON CONFLICT (approval_id) DO NOTHING",
                params![approval_id, expires_at, now],
            )?;
            tx.commit()?;
            Ok(if inserted == 1 {
                Consumed::First
            } else {
                Consumed::Again
            })
        })
    }
}

/// The revoked grant ids in `capability_revocation`, shared by every process using the
/// database; each question reads the database, so a revocation is seen by every process at its
/// next decision.
#[derive(Debug, Clone)]
pub struct SqliteRevocations {
    db: Arc<Db>,
}

impl SqliteRevocations {
    pub(crate) fn new(db: Arc<Db>) -> Self {
        SqliteRevocations { db }
    }
}

impl RevocationStore for SqliteRevocations {
    fn revoke(&self, grant_id: &str) -> Result<(), StoreError> {
        self.db.with(|conn| {
            conn.execute(
                "INSERT INTO capability_revocation (grant_id, revoked_at) VALUES (?1, ?2)
                 ON CONFLICT (grant_id) DO NOTHING",
                params![grant_id, unix_now()],
            )?;
            Ok(())
        })
    }

    fn revoked_among(&self, grant_ids: &[&str]) -> Result<Vec<String>, StoreError> {
        if grant_ids.is_empty() {
            return Ok(Vec::new());
        }
        let revoked: HashSet<String> = self.db.with(|conn| {
            // SQLite binds at most 32,766 parameters; a grant chain is far shorter.
            let mut found = HashSet::new();
            for chunk in grant_ids.chunks(500) {
                let marks = vec!["?"; chunk.len()].join(", ");
                let sql = format!(
                    "SELECT grant_id FROM capability_revocation WHERE grant_id IN ({marks})"
                );
                let mut statement = conn.prepare_cached(&sql)?;
                let rows = statement.query_map(params_from_iter(chunk.iter()), |row| row.get(0))?;
                for row in rows {
                    found.insert(row?);
                }
            }
            Ok(found)
        })?;
        Ok(grant_ids
            .iter()
            .filter(|id| revoked.contains(**id))
            .map(|id| (*id).to_owned())
            .collect())
    }
}
