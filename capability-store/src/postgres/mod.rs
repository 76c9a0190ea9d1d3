//! PostgreSQL, for fleets: every process of a deployment shares one database.
//!
//! - [`PgStore::connect`] takes a URL (`postgres://user:password@host:port/db`, a unix socket as
//!   `postgres://user@%2Frun%2Fpostgresql/db`); messages name it without its password.
//! - [`migrate`](Store::migrate) applies the migrations this crate ships
//!   (`migrations/postgres/*.sql`) in one transaction holding an advisory lock.
//! - The approval ledger ([`PgLedger`]) and the revocations ([`PgRevocations`]) ask the database
//!   on every call: nothing is cached, so a revocation holds for every process's next decision.
//! - The audit sink ([`PgSink`]) is one writer with group commit: `append` returns once its
//!   record is committed, and concurrent appends share one transaction.
//!
//! The schema is ADR-105's: `mcp_audit_log` (one row per record), `mcp_audit_checkpoint`,
//! `capability_approval_ledger`, `capability_revocation`, and the view `mcp_daily_stats`.
//! Connections are made without TLS: reach the server over a unix socket, a private network or
//! a local TLS proxy.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use capability_agent::guard::{LeaseStore, ResultCache};
use capability_audit::{AuditError, AuditRecord, AuditSink};
use capability_gate::{ApprovalLedger, RevocationStore, StoreError};

use crate::{DailyStats, KeptProposal, SinkOptions, Store, ToolHash, ToolVersion, Trail};

mod clock;
mod guards;
mod migrate;
mod pool;
mod problems;
mod rows;
mod sink;
mod state;
mod tree;

pub use guards::{PgLeases, PgLoopCache};
pub use sink::PgSink;
pub use state::{PgLedger, PgRevocations};

use pool::Pool;

/// A PostgreSQL database holding the shared state.
///
/// ```no_run
/// use capability_store::Store;
/// use capability_store::postgres::PgStore;
///
/// let store = PgStore::connect("postgres://capability@db.internal/capability")?;
/// store.migrate()?;
/// let ledger = store.ledger();
/// # Ok::<(), capability_gate::StoreError>(())
/// ```
pub struct PgStore {
    pool: Arc<Pool>,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PgStore").field(&self.pool.name).finish()
    }
}

impl PgStore {
    /// Connects to the database `url` names. A malformed URL, a server that cannot be reached
    /// and refused credentials are errors here (that never repeat the password). The database
    /// need not be migrated yet; every operation but [`migrate`](Store::migrate) refuses an
    /// unmigrated one.
    pub fn connect(url: &str) -> Result<PgStore, StoreError> {
        let pool = Pool::new(url)?;
        // Connect once now: a wrong URL or password shows at once, not at the first call.
        pool.with("cannot connect", |c| c.simple_query("").map(drop))?;
        Ok(PgStore {
            pool: Arc::new(pool),
        })
    }

    /// Inserts sealed records as they are, in one transaction (one statement per 1,000
    /// records): for imports and for measuring what the sink adds over the inserts it makes.
    /// Nothing is checked here; [`verify_chains`](capability_audit::verify_chains) on
    /// [`read_trail`](Store::read_trail) checks the chains.
    pub fn insert_records(&self, records: &[AuditRecord]) -> Result<(), StoreError> {
        self.pool.ensure_schema()?;
        self.pool.with("cannot insert the records", |c| {
            let mut tx = c.transaction()?;
            for chunk in records.chunks(rows::MAX_BATCH) {
                let mut columns = rows::Columns::default();
                for record in chunk {
                    columns.push(record);
                }
                columns.insert(&mut tx, rows::INSERT)?;
            }
            tx.commit()
        })
    }

    /// The audit sink of one writer, as its own type (see [`Store::audit_sink`]).
    pub fn pg_sink(&self, options: SinkOptions) -> Result<PgSink, AuditError> {
        pool::off_runtime(|| PgSink::open(self.pool.clone(), options))
    }
}

impl Store for PgStore {
    fn describe(&self) -> String {
        self.pool.name.clone()
    }

    fn migrate(&self) -> Result<u32, StoreError> {
        pool::off_runtime(|| migrate::migrate(&self.pool))
    }

    fn ledger(&self) -> Arc<dyn ApprovalLedger> {
        Arc::new(PgLedger {
            pool: self.pool.clone(),
        })
    }

    fn revocations(&self) -> Arc<dyn RevocationStore> {
        Arc::new(PgRevocations {
            pool: self.pool.clone(),
        })
    }

    fn leases(&self) -> Arc<dyn LeaseStore> {
        Arc::new(PgLeases {
            pool: self.pool.clone(),
        })
    }

    fn loop_cache(&self) -> Arc<dyn ResultCache> {
        Arc::new(PgLoopCache {
            pool: self.pool.clone(),
        })
    }

    fn audit_sink(&self, options: SinkOptions) -> Result<Arc<dyn AuditSink>, AuditError> {
        Ok(Arc::new(self.pg_sink(options)?))
    }

    fn read_trail(&self) -> Result<Trail, StoreError> {
        self.pool.ensure_schema()?;
        self.pool
            .with("cannot read the audit trail", |c| {
                let mut tx = c.build_transaction().read_only(true).start()?;
                let trail = rows::read_trail(&mut tx)?;
                tx.commit()?;
                Ok(trail)
            })?
            .map_err(|problem| StoreError::new(self.pool.name.clone(), problem))
    }

    fn store_cosigned(
        &self,
        note: &capability_audit::tlog::SignedCheckpoint,
    ) -> Result<bool, StoreError> {
        self.pool.ensure_schema()?;
        self.pool.with("cannot store the cosigned checkpoint", |c| {
            tree::store_cosigned(c, note)
        })
    }

    fn daily_stats(&self) -> Result<Vec<DailyStats>, StoreError> {
        self.pool.ensure_schema()?;
        // The view is exact either way; compacting first keeps it cheap to read. A reader
        // that may not write (a read-only role) reads it as it is.
        let _ = self.pool.with("cannot compact mcp_daily_stats", |c| {
            c.batch_execute("SELECT capability_daily_stats_compact()")
        });
        self.pool
            .with("cannot read mcp_daily_stats", rows::daily_stats)
    }

    fn keep_proposal(&self, p: &KeptProposal) -> Result<(), StoreError> {
        use crate::proposals::{KEEP, secs};
        self.pool.ensure_schema()?;
        let (created, expires) = (secs(p.created_at), secs(p.expires_at));
        self.pool.with("cannot keep the proposal", |c| {
            c.execute(
                KEEP,
                &[
                    &p.id,
                    &p.audience,
                    &p.server,
                    &p.tool,
                    &p.proposer,
                    &created,
                    &expires,
                    &p.body,
                ],
            )
            .map(|_| ())
        })
    }

    fn proposals(&self, now: u64) -> Result<Vec<KeptProposal>, StoreError> {
        use crate::proposals::{WAITING, secs, unsecs};
        self.pool.ensure_schema()?;
        let now = secs(now);
        let rows = self
            .pool
            .with("cannot read the proposals", |c| c.query(WAITING, &[&now]))?;
        Ok(rows
            .iter()
            .map(|row| KeptProposal {
                id: row.get(0),
                audience: row.get(1),
                server: row.get(2),
                tool: row.get(3),
                proposer: row.get(4),
                created_at: unsecs(row.get(5)),
                expires_at: unsecs(row.get(6)),
                body: row.get(7),
            })
            .collect())
    }

    fn drop_proposal(&self, id: &str) -> Result<bool, StoreError> {
        self.pool.ensure_schema()?;
        self.pool.with("cannot drop the proposal", |c| {
            c.execute(crate::proposals::DROP, &[&id]).map(|n| n > 0)
        })
    }

    fn saw_tools(&self, tools: &[ToolHash], at: u64) -> Result<(), StoreError> {
        self.record_tools(tools, None, at)
    }

    fn pinned_tools(&self, tools: &[ToolHash], by: &str, at: u64) -> Result<(), StoreError> {
        self.record_tools(tools, Some(by), at)
    }

    fn tool_versions(
        &self,
        server: Option<&str>,
        tool: Option<&str>,
    ) -> Result<Vec<ToolVersion>, StoreError> {
        use crate::proposals::unsecs;
        self.pool.ensure_schema()?;
        let rows = self.pool.with("cannot read mcp_tool_versions", |c| {
            c.query(crate::versions::PG_READ, &[&server, &tool])
        })?;
        Ok(rows
            .iter()
            .map(|row| ToolVersion {
                server: row.get(0),
                tool: row.get(1),
                descriptor_hash: row.get(2),
                first_seen: unsecs(row.get(3)),
                last_seen: unsecs(row.get(4)),
                pinned_by: row.get(5),
                pinned_at: row.get::<_, Option<i64>>(6).map(unsecs),
            })
            .collect())
    }
}

impl PgStore {
    /// [`Store::saw_tools`] (`by` is `None`) and [`Store::pinned_tools`].
    fn record_tools(
        &self,
        tools: &[ToolHash],
        by: Option<&str>,
        at: u64,
    ) -> Result<(), StoreError> {
        self.pool.ensure_schema()?;
        let at = crate::proposals::secs(at);
        self.pool.with("cannot write mcp_tool_versions", |c| {
            let mut tx = c.transaction()?;
            let statement = tx.prepare(crate::versions::PG_SEEN)?;
            for t in tools {
                tx.execute(
                    &statement,
                    &[&t.server, &t.tool, &t.descriptor_hash, &at, &by],
                )?;
            }
            tx.commit()
        })
    }
}

/// Locks a mutex, going on after a panic elsewhere (the data stays consistent between
/// statements).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
