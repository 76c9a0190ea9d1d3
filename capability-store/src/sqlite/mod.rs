//! The SQLite store: one database file shared by every process of a host, no server.
//!
//! [`SqliteStore::open`] opens (or creates) the file in WAL mode, so readers do not wait for
//! the writer, with a busy timeout ([`DEFAULT_BUSY_TIMEOUT`]): a process that finds the
//! database locked waits that long, then gets an error, and the gate refuses. The store keeps
//! one connection, behind a mutex, for the ledger, the revocations and the reads; each audit
//! sink has a connection of its own, so audit commits never hold up a gate decision.
//!
//! Commits are durable (`synchronous = FULL`): a record [`append`](capability_audit::AuditSink::append)
//! returned survives the process being killed, and the machine losing power.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capability_agent::guard::{LeaseStore, ResultCache};
use capability_audit::{AuditError, AuditSink};
use capability_gate::{ApprovalLedger, RevocationStore, StoreError};
use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::{
    DailyStats, KeptProposal, SCHEMA_VERSION, SinkOptions, Store, ToolHash, ToolVersion, Trail,
};

mod guards;
mod ledger;
mod migrate;
mod records;
mod sink;
mod stats;
mod tree;

pub use guards::{SqliteLeases, SqliteLoopCache};
pub use ledger::{PRUNE_AFTER_SECS, SqliteLedger, SqliteRevocations};
pub use sink::SqliteSink;

/// How long an operation waits for a database another process has locked, by default.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A SQLite database holding the approval ledger, the revocations and the audit trail.
///
/// ```
/// use capability_store::Store;
/// use capability_store::sqlite::SqliteStore;
///
/// # let dir = std::env::temp_dir().join(format!("store-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let store = SqliteStore::open(dir.join("state.db"))?;
/// assert_eq!(store.migrate()?, capability_store::SCHEMA_VERSION);
/// let ledger = store.ledger();
/// assert_eq!(ledger.consume("approval-1", u64::MAX)?, capability::gate::Consumed::First);
/// assert_eq!(ledger.consume("approval-1", u64::MAX)?, capability::gate::Consumed::Again);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct SqliteStore {
    db: Arc<Db>,
}

/// The database: its path, the store's connection, whether its schema was checked.
pub(crate) struct Db {
    path: PathBuf,
    name: String,
    busy_timeout: Duration,
    conn: Mutex<Connection>,
    checked: AtomicBool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("name", &self.name).finish()
    }
}

impl SqliteStore {
    /// Opens (or creates) the database at `path`, waiting up to [`DEFAULT_BUSY_TIMEOUT`] for
    /// locks. A directory, or a file that is not a SQLite database, is an error.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with_timeout(path, DEFAULT_BUSY_TIMEOUT)
    }

    /// Opens the database at `path`, waiting up to `busy_timeout` for locks other processes
    /// hold before an operation fails.
    pub fn open_with_timeout(
        path: impl AsRef<Path>,
        busy_timeout: Duration,
    ) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        let name = format!("sqlite:{}", path.display());
        let conn = connect(&path, &name, busy_timeout)?;
        Ok(SqliteStore {
            db: Arc::new(Db {
                path,
                name,
                busy_timeout,
                conn: Mutex::new(conn),
                checked: AtomicBool::new(false),
            }),
        })
    }

    /// The shared ledger, as its own type.
    pub fn sqlite_ledger(&self) -> SqliteLedger {
        SqliteLedger::new(self.db.clone())
    }

    /// The shared revocation store, as its own type.
    pub fn sqlite_revocations(&self) -> SqliteRevocations {
        SqliteRevocations::new(self.db.clone())
    }

    /// Inserts complete records (chain fields included) in one transaction, as they are: an
    /// import of a trail, and the direct-insert baseline of the store benchmark. Nothing is
    /// checked or chained here; `verify_chains` over the trail tells whether they hold.
    pub fn insert_records(
        &self,
        records: &[capability_audit::AuditRecord],
    ) -> Result<(), StoreError> {
        self.db.with(|conn| {
            let tx = conn.transaction()?;
            records::insert_records(&tx, records)?;
            tx.commit()
        })
    }

    /// An audit sink writing as one writer, as its own type (see [`SqliteSink`]).
    pub fn sink(&self, options: SinkOptions) -> Result<SqliteSink, AuditError> {
        SqliteSink::open(&self.db, options)
    }
}

impl Store for SqliteStore {
    fn describe(&self) -> String {
        self.db.name.clone()
    }

    fn migrate(&self) -> Result<u32, StoreError> {
        let mut conn = self.db.lock();
        // A migration is one transaction: refused at once while another connection switches
        // the file to WAL, it is tried again (nothing of it was applied).
        let deadline = std::time::Instant::now().checked_add(self.db.busy_timeout);
        let version = loop {
            match migrate::run(&mut conn) {
                Err(migrate::Failure::Sqlite(error))
                    if matches!(
                        error.sqlite_error_code(),
                        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                    ) && before(deadline) =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                other => break other,
            }
        };
        let version = match version {
            Ok(version) => version,
            Err(migrate::Failure::Newer(version)) => return Err(self.db.newer(version)),
            Err(migrate::Failure::Sqlite(error)) => return Err(self.db.error(error)),
        };
        self.db.checked.store(true, Ordering::Release);
        Ok(version)
    }

    fn ledger(&self) -> Arc<dyn ApprovalLedger> {
        Arc::new(self.sqlite_ledger())
    }

    fn revocations(&self) -> Arc<dyn RevocationStore> {
        Arc::new(self.sqlite_revocations())
    }

    fn leases(&self) -> Arc<dyn LeaseStore> {
        Arc::new(SqliteLeases::new(self.db.clone()))
    }

    fn loop_cache(&self) -> Arc<dyn ResultCache> {
        Arc::new(SqliteLoopCache::new(self.db.clone()))
    }

    fn audit_sink(&self, options: SinkOptions) -> Result<Arc<dyn AuditSink>, AuditError> {
        let sink = Arc::new(self.sink(options)?);
        // Signed checkpoints when idle too: a missing one is a finding.
        sink::keep_idle_checkpoints(&sink);
        Ok(sink)
    }

    fn read_trail(&self) -> Result<Trail, StoreError> {
        self.db.with(records::read_trail)
    }

    fn store_cosigned(
        &self,
        note: &capability_audit::tlog::SignedCheckpoint,
    ) -> Result<bool, StoreError> {
        self.db.with(|conn| tree::store_cosigned(conn, note))
    }

    fn daily_stats(&self) -> Result<Vec<DailyStats>, StoreError> {
        self.db.with(|conn| {
            // The view is exact either way; folding the tail first keeps it cheap to read. A
            // database this process may not write is read as it is.
            let _ = fold_stats(conn);
            records::daily_stats(conn)
        })
    }

    fn keep_proposal(&self, p: &KeptProposal) -> Result<(), StoreError> {
        use crate::proposals::{KEEP, secs};
        self.db.with(|conn| {
            conn.execute(
                KEEP,
                rusqlite::params![
                    p.id,
                    p.audience,
                    p.server,
                    p.tool,
                    p.proposer,
                    secs(p.created_at),
                    secs(p.expires_at),
                    p.body
                ],
            )
            .map(|_| ())
        })
    }

    fn proposals(&self, now: u64) -> Result<Vec<KeptProposal>, StoreError> {
        use crate::proposals::{WAITING, secs, unsecs};
        self.db.with(|conn| {
            let mut statement = conn.prepare_cached(WAITING)?;
            let rows = statement.query_map(rusqlite::params![secs(now)], |row| {
                Ok(KeptProposal {
                    id: row.get(0)?,
                    audience: row.get(1)?,
                    server: row.get(2)?,
                    tool: row.get(3)?,
                    proposer: row.get(4)?,
                    created_at: unsecs(row.get(5)?),
                    expires_at: unsecs(row.get(6)?),
                    body: row.get(7)?,
                })
            })?;
            rows.collect()
        })
    }

    fn drop_proposal(&self, id: &str) -> Result<bool, StoreError> {
        self.db.with(|conn| {
            conn.execute(crate::proposals::DROP, rusqlite::params![id])
                .map(|n| n > 0)
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
        self.db.with(|conn| {
            let mut statement = conn.prepare_cached(crate::versions::SQLITE_READ)?;
            let rows = statement.query_map(rusqlite::params![server, tool], |row| {
                Ok(ToolVersion {
                    server: row.get(0)?,
                    tool: row.get(1)?,
                    descriptor_hash: row.get(2)?,
                    first_seen: unsecs(row.get(3)?),
                    last_seen: unsecs(row.get(4)?),
                    pinned_by: row.get(5)?,
                    pinned_at: row.get::<_, Option<i64>>(6)?.map(unsecs),
                })
            })?;
            rows.collect()
        })
    }
}

impl SqliteStore {
    /// [`Store::saw_tools`] (`by` is `None`) and [`Store::pinned_tools`].
    fn record_tools(
        &self,
        tools: &[ToolHash],
        by: Option<&str>,
        at: u64,
    ) -> Result<(), StoreError> {
        let at = crate::proposals::secs(at);
        self.db.with(|conn| {
            let tx = conn.transaction()?;
            {
                let mut statement = tx.prepare_cached(crate::versions::SQLITE_SEEN)?;
                for t in tools {
                    statement.execute(rusqlite::params![
                        t.server,
                        t.tool,
                        t.descriptor_hash,
                        at,
                        by
                    ])?;
                }
            }
            tx.commit()
        })
    }
}

impl Db {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new connection to the database, for an audit sink.
    pub(crate) fn connect(&self) -> Result<Connection, StoreError> {
        let conn = connect(&self.path, &self.name, self.busy_timeout)?;
        self.check(&conn)?;
        Ok(conn)
    }

    /// Runs `f` on the store's connection, once the schema is known to be this build's.
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, rusqlite::Error>,
    ) -> Result<T, StoreError> {
        let mut conn = self.lock();
        if !self.checked.load(Ordering::Acquire) {
            self.check(&conn)?;
            self.checked.store(true, Ordering::Release);
        }
        f(&mut conn).map_err(|e| self.error(e))
    }

    /// Refuses a database that is not migrated, or at another schema version.
    fn check(&self, conn: &Connection) -> Result<(), StoreError> {
        match migrate::version(conn).map_err(|e| self.error(e))? {
            Some(version) if version == SCHEMA_VERSION => Ok(()),
            Some(version) if version > SCHEMA_VERSION => Err(self.newer(version)),
            found => Err(StoreError::new(
                &self.name,
                format!(
                    "the database is not migrated (schema version {}, this build needs {}): run \
                     `capability db migrate {}`",
                    found.unwrap_or(0),
                    SCHEMA_VERSION,
                    self.path.display()
                ),
            )),
        }
    }

    fn newer(&self, version: u32) -> StoreError {
        StoreError::new(&self.name, migrate::newer_message(version))
    }

    /// A SQLite error as a store error, in words.
    pub(crate) fn error(&self, error: rusqlite::Error) -> StoreError {
        StoreError::new(&self.name, explain(&error, self.busy_timeout))
    }
}

/// Opens a connection in WAL mode with durable commits.
fn connect(path: &Path, name: &str, busy_timeout: Duration) -> Result<Connection, StoreError> {
    let fail = |e: rusqlite::Error| StoreError::new(name, explain(&e, busy_timeout));
    if path.is_dir() {
        return Err(StoreError::new(
            name,
            "this is a directory, not a SQLite database file",
        ));
    }
    // The header is SQLite's to read. Opening the file here (to read it) and closing it would
    // drop every POSIX lock this process holds on it (`close` releases a process's locks
    // on the file, whichever descriptor took them): another process closing its connection
    // would then take this one's WAL for unused, checkpoint it and delete it under its writers.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(fail)?;
    // SQLite takes the wait in milliseconds as a C `int` (about 24.8 days; rusqlite panics
    // past it): a longer one waits that long at each lock.
    let most = Duration::from_millis(i32::MAX.unsigned_abs().into());
    conn.busy_timeout(busy_timeout.min(most)).map_err(fail)?;
    // Switching a new file to WAL while other connections open it can be refused at once
    // (SQLite does not call the busy handler for it): try again until the busy timeout.
    let mode: String = retry_busy(busy_timeout, || {
        conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
    })
    .map_err(|e| match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => StoreError::new(
            name,
            "the file is not a SQLite database (its header is not `SQLite format 3`)",
        ),
        _ => fail(e),
    })?;
    crate::target::opened_sqlite(path);
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::new(
            name,
            format!("cannot switch the database to WAL mode (it stays in `{mode}` mode)"),
        ));
    }
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
        .map_err(fail)?;
    Ok(conn)
}

/// `attempt`, again every 10 ms while SQLite says the database is busy or locked without
/// having waited, until `busy_timeout` has passed.
pub(crate) fn retry_busy<T>(
    busy_timeout: Duration,
    mut attempt: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now().checked_add(busy_timeout);
    loop {
        match attempt() {
            Err(error)
                if matches!(
                    error.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ) && before(deadline) =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            result => return result,
        }
    }
}

/// Whether `deadline` (`None`: a wait past what the clock can hold, so none) is still ahead.
fn before(deadline: Option<std::time::Instant>) -> bool {
    deadline.is_none_or(|deadline| std::time::Instant::now() < deadline)
}

/// What a SQLite error means for the user.
pub(crate) fn explain(error: &rusqlite::Error, busy_timeout: Duration) -> String {
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => format!(
            "the database is locked by another connection (waited {} ms): {error}",
            busy_timeout.as_millis()
        ),
        Some(ErrorCode::NotADatabase) => format!("the file is not a SQLite database: {error}"),
        Some(ErrorCode::DatabaseCorrupt) => format!("the database file is corrupt: {error}"),
        Some(ErrorCode::CannotOpen) => format!(
            "cannot open the database file (does its directory exist, may this user write \
             it?): {error}"
        ),
        Some(ErrorCode::ReadOnly) => format!("the database is read-only: {error}"),
        Some(ErrorCode::DiskFull) => format!("the disk is full: {error}"),
        _ => error.to_string(),
    }
}

/// Seconds since the Unix epoch (0 for a clock before 1970).
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Folds the log's tail into `mcp_daily_stats`' sums (migration 6), in one transaction that
/// holds the write lock.
fn fold_stats(conn: &mut Connection) -> Result<(), rusqlite::Error> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let last: i64 = tx.query_row(
        "SELECT COALESCE(MAX(rowid), 0) FROM mcp_audit_log",
        [],
        |row| row.get(0),
    )?;
    tx.execute(stats::FOLD, [last])?;
    tx.execute(stats::FOLD_LATENCY, [last])?;
    tx.execute(stats::FOLDED, [last])?;
    tx.commit()
}
