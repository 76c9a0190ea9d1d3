//! The agent loop's lease store and result cache on PostgreSQL (`capability_loop_lease`,
//! `capability_loop_cache`), shared by every replica of the fleet. A take is one `INSERT ...
//! ON CONFLICT DO UPDATE ... WHERE` the lease has lapsed: of several processes racing one key,
//! exactly one row update wins.

use std::fmt;
use std::sync::Arc;

use capability_agent::guard::{Acquire, GuardError, Lease, LeaseStore, ResultCache};

use super::pool::Pool;
use crate::guards::{guard_error, ms, unsigned};

/// The loop leases in `capability_loop_lease`.
pub struct PgLeases {
    pub(crate) pool: Arc<Pool>,
}

/// The loop results in `capability_loop_cache`.
pub struct PgLoopCache {
    pub(crate) pool: Arc<Pool>,
}

impl fmt::Debug for PgLeases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PgLeases").field(&self.pool.name).finish()
    }
}

impl fmt::Debug for PgLoopCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PgLoopCache").field(&self.pool.name).finish()
    }
}

fn lease(key: &str, row: &postgres::Row) -> Lease {
    Lease {
        key: key.to_owned(),
        holder: row.get(0),
        generation: unsigned(row.get(1)),
        since_ms: unsigned(row.get(2)),
        expires_ms: unsigned(row.get(3)),
    }
}

impl LeaseStore for PgLeases {
    fn acquire(
        &self,
        key: &str,
        holder: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Acquire, GuardError> {
        self.pool.ensure_schema().map_err(guard_error)?;
        let (now, expires) = (ms(now_ms), ms(now_ms.saturating_add(ttl_ms)));
        // A lease released between the take that lost and the read is free again: try twice.
        for _ in 0..2 {
            let taken = self
                .pool
                .with("cannot take the loop's lease", |c| {
                    c.query_opt(
                        "INSERT INTO capability_loop_lease AS l
                             (lease_key, holder, generation, since_ms, expires_ms)
                         VALUES ($1, $2, 1, $3, $4)
                         ON CONFLICT (lease_key) DO UPDATE SET holder = EXCLUDED.holder,
                             generation = l.generation + 1, since_ms = EXCLUDED.since_ms,
                             expires_ms = EXCLUDED.expires_ms
                         WHERE l.expires_ms <= $3
                         RETURNING holder, generation, since_ms, expires_ms",
                        &[&key, &holder, &now, &expires],
                    )
                })
                .map_err(guard_error)?;
            if let Some(row) = taken {
                return Ok(Acquire::Held(lease(key, &row)));
            }
            let held = self
                .pool
                .with("cannot read the loop's lease", |c| {
                    c.query_opt(
                        "SELECT holder, generation, since_ms, expires_ms FROM capability_loop_lease
                         WHERE lease_key = $1 AND expires_ms > $2",
                        &[&key, &now],
                    )
                })
                .map_err(guard_error)?;
            if let Some(row) = held {
                return Ok(Acquire::InFlight(lease(key, &row)));
            }
        }
        Err(GuardError::new(
            self.pool.name.clone(),
            format!("the lease of `{key}` changed hands twice while it was taken; try again"),
        ))
    }

    fn renew(&self, lease: &Lease, now_ms: u64, ttl_ms: u64) -> Result<bool, GuardError> {
        self.pool.ensure_schema().map_err(guard_error)?;
        let expires = ms(now_ms.saturating_add(ttl_ms));
        let n = self
            .pool
            .with("cannot renew the loop's lease", |c| {
                c.execute(
                    "UPDATE capability_loop_lease SET expires_ms = $1
                     WHERE lease_key = $2 AND holder = $3 AND generation = $4",
                    &[&expires, &lease.key, &lease.holder, &ms(lease.generation)],
                )
            })
            .map_err(guard_error)?;
        Ok(n == 1)
    }

    fn release(&self, lease: &Lease) -> Result<(), GuardError> {
        self.pool.ensure_schema().map_err(guard_error)?;
        self.pool
            .with("cannot release the loop's lease", |c| {
                c.execute(
                    "UPDATE capability_loop_lease SET expires_ms = 0
                     WHERE lease_key = $1 AND holder = $2 AND generation = $3",
                    &[&lease.key, &lease.holder, &ms(lease.generation)],
                )
            })
            .map_err(guard_error)?;
        Ok(())
    }
}

impl ResultCache for PgLoopCache {
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<String>, GuardError> {
        self.pool.ensure_schema().map_err(guard_error)?;
        let row = self
            .pool
            .with("cannot read the loop cache", |c| {
                c.query_opt(
                    "SELECT entry FROM capability_loop_cache WHERE cache_key = $1 AND expires_ms > $2",
                    &[&key, &ms(now_ms)],
                )
            })
            .map_err(guard_error)?;
        Ok(row.map(|row| row.get(0)))
    }

    fn put(&self, key: &str, entry: &str, now_ms: u64, expires_ms: u64) -> Result<(), GuardError> {
        self.pool.ensure_schema().map_err(guard_error)?;
        self.pool
            .with("cannot write the loop cache", |c| {
                c.execute(
                    "DELETE FROM capability_loop_cache WHERE expires_ms <= $1",
                    &[&ms(now_ms)],
                )?;
                c.execute(
                    "INSERT INTO capability_loop_cache (cache_key, entry, expires_ms) VALUES ($1, $2, $3)
                     ON CONFLICT (cache_key) DO UPDATE SET entry = EXCLUDED.entry,
                         expires_ms = EXCLUDED.expires_ms",
                    &[&key, &entry, &ms(expires_ms)],
                )
            })
            .map_err(guard_error)?;
        Ok(())
    }
}
