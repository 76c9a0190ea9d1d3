//! The migrations this build ships, applied in order inside one transaction and recorded in
//! `capability_schema_version` (version, applied_at).
//!
//! The transaction begins `IMMEDIATE`, taking the database's write lock first: when two
//! processes migrate at once, the second waits for the first, then finds nothing left to do.

use rusqlite::{Connection, TransactionBehavior, params};

use crate::SCHEMA_VERSION;

/// Each migration: the version it brings the schema to, and its SQL.
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../../migrations/sqlite/0001_init.sql")),
    (2, include_str!("../../migrations/sqlite/0002_calls.sql")),
    (
        3,
        include_str!("../../migrations/sqlite/0003_principal.sql"),
    ),
    (
        4,
        include_str!("../../migrations/sqlite/0004_loop_guards.sql"),
    ),
    (
        5,
        include_str!("../../migrations/sqlite/0005_proposals.sql"),
    ),
    (
        6,
        include_str!("../../migrations/sqlite/0006_stats_and_versions.sql"),
    ),
    (
        7,
        include_str!("../../migrations/sqlite/0007_tree_checkpoints.sql"),
    ),
];

/// Why a migration did not happen.
pub(crate) enum Failure {
    /// SQLite failed (locked, read-only, not a database, ...).
    Sqlite(rusqlite::Error),
    /// The database is at this version, newer than [`SCHEMA_VERSION`]: nothing was changed.
    Newer(u32),
}

impl From<rusqlite::Error> for Failure {
    fn from(error: rusqlite::Error) -> Self {
        Failure::Sqlite(error)
    }
}

/// Applies the migrations the database lacks; returns its schema version.
pub(crate) fn run(conn: &mut Connection) -> Result<u32, Failure> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS capability_schema_version (
             version    INTEGER PRIMARY KEY,
             applied_at TEXT    NOT NULL
         )",
    )?;
    let current: u32 = tx.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM capability_schema_version",
        [],
        |row| row.get(0),
    )?;
    if current > SCHEMA_VERSION {
        // Dropping the transaction rolls it back: nothing changes.
        return Err(Failure::Newer(current));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.execute_batch(sql)?;
        tx.execute(
            "INSERT INTO capability_schema_version (version, applied_at) VALUES (?1, ?2)",
            params![version, capability_audit::utc_now()],
        )?;
    }
    tx.commit()?;
    Ok(current.max(SCHEMA_VERSION))
}

/// The database's schema version; `None` when it was never migrated.
pub(crate) fn version(conn: &Connection) -> Result<Option<u32>, rusqlite::Error> {
    let exists: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master
                        WHERE type = 'table' AND name = 'capability_schema_version')",
        [],
        |row| row.get(0),
    )?;
    if !exists {
        return Ok(None);
    }
    conn.query_row(
        "SELECT MAX(version) FROM capability_schema_version",
        [],
        |row| row.get(0),
    )
}

/// The message for a database at a newer schema version.
pub(crate) fn newer_message(version: u32) -> String {
    format!(
        "the database is at schema version {version}, newer than this build's schema version \
         {SCHEMA_VERSION}: it was migrated by a newer capability; use that one (nothing was \
         changed)"
    )
}
