//! The agent loop's lease store and result cache on SQLite (`capability_loop_lease`,
//! `capability_loop_cache`): every process of the host that opens the file shares them. A take
//! is one `IMMEDIATE` transaction, so of several processes racing one key exactly one gets it.

use std::sync::Arc;

use capability_agent::guard::{Acquire, GuardError, Lease, LeaseStore, ResultCache};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::Db;
use crate::guards::{guard_error, ms, unsigned};

/// The loop leases in `capability_loop_lease`.
#[derive(Debug, Clone)]
pub struct SqliteLeases {
    db: Arc<Db>,
}

/// The loop results in `capability_loop_cache`.
#[derive(Debug, Clone)]
pub struct SqliteLoopCache {
    db: Arc<Db>,
}

impl SqliteLeases {
    pub(crate) fn new(db: Arc<Db>) -> Self {
        SqliteLeases { db }
    }
}

impl SqliteLoopCache {
    pub(crate) fn new(db: Arc<Db>) -> Self {
        SqliteLoopCache { db }
    }
}

impl LeaseStore for SqliteLeases {
    fn acquire(
        &self,
        key: &str,
        holder: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Acquire, GuardError> {
        let expires = now_ms.saturating_add(ttl_ms);
        self.db
            .with(|conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let held: Option<(String, i64, i64, i64)> = tx
                    .query_row(
                        "SELECT holder, generation, since_ms, expires_ms FROM capability_loop_lease
                         WHERE lease_key = ?1",
                        params![key],
                        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
                    )
                    .optional()?;
                let generation = match held {
                    Some((holder, generation, since, until)) if until > ms(now_ms) => {
                        return Ok(Acquire::InFlight(Lease {
                            key: key.to_owned(),
                            holder,
                            generation: unsigned(generation),
                            since_ms: unsigned(since),
                            expires_ms: unsigned(until),
                        }));
                    }
                    Some((_, generation, _, _)) => unsigned(generation).saturating_add(1),
                    None => 1,
                };
                tx.execute(
                    "INSERT INTO capability_loop_lease (lease_key, holder, generation, since_ms, expires_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (lease_key) DO UPDATE SET holder = excluded.holder,
                         generation = excluded.generation, since_ms = excluded.since_ms,
                         expires_ms = excluded.expires_ms",
                    params![key, holder, ms(generation), ms(now_ms), ms(expires)],
                )?;
                tx.commit()?;
                Ok(Acquire::Held(Lease {
                    key: key.to_owned(),
                    holder: holder.to_owned(),
                    generation,
                    since_ms: now_ms,
                    expires_ms: expires,
                }))
            })
            .map_err(guard_error)
    }

    fn renew(&self, lease: &Lease, now_ms: u64, ttl_ms: u64) -> Result<bool, GuardError> {
        self.db
            .with(|conn| {
                let n = conn.execute(
                    "UPDATE capability_loop_lease SET expires_ms = ?1
                     WHERE lease_key = ?2 AND holder = ?3 AND generation = ?4",
                    params![
                        ms(now_ms.saturating_add(ttl_ms)),
                        lease.key,
                        lease.holder,
                        ms(lease.generation)
                    ],
                )?;
                Ok(n == 1)
            })
            .map_err(guard_error)
    }

    fn release(&self, lease: &Lease) -> Result<(), GuardError> {
        self.db
            .with(|conn| {
                conn.execute(
                    "UPDATE capability_loop_lease SET expires_ms = 0
                     WHERE lease_key = ?1 AND holder = ?2 AND generation = ?3",
                    params![lease.key, lease.holder, ms(lease.generation)],
                )?;
                Ok(())
            })
            .map_err(guard_error)
    }
}

impl ResultCache for SqliteLoopCache {
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<String>, GuardError> {
        self.db
            .with(|conn| {
                conn.query_row(
                    "SELECT entry FROM capability_loop_cache WHERE cache_key = ?1 AND expires_ms > ?2",
                    params![key, ms(now_ms)],
                    |row| row.get(0),
                )
                .optional()
            })
            .map_err(guard_error)
    }

    fn put(&self, key: &str, entry: &str, now_ms: u64, expires_ms: u64) -> Result<(), GuardError> {
        self.db
            .with(|conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.execute(
                    "DELETE FROM capability_loop_cache WHERE expires_ms <= ?1",
                    params![ms(now_ms)],
                )?;
                tx.execute(
                    "INSERT INTO capability_loop_cache (cache_key, entry, expires_ms) VALUES (?1, ?2, ?3)
                     ON CONFLICT (cache_key) DO UPDATE SET entry = excluded.entry,
                         expires_ms = excluded.expires_ms",
                    params![key, entry, ms(expires_ms)],
                )?;
                tx.commit()
            })
            .map_err(guard_error)
    }
}
