//! The tree each writer keeps beside its records (`capability_audit::tlog::stored`), in SQLite:
//! its signed tree checkpoints in `mcp_audit_tree_checkpoint`, its registration in
//! `mcp_audit_writer`, and resuming it from the stored records on restart.

use capability_audit::tlog::encoding::base64;
use capability_audit::tlog::stored::checkpoint_writer;
use capability_audit::tlog::writers::LatestRegistration;
use capability_audit::tlog::{Frontier, SignedCheckpoint, checkpoint_time, resume};
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::row::AUDIT_COLUMNS;

/// Inserts a signed tree checkpoint (of the writer its origin names), in the transaction `tx`.
pub(crate) fn insert(tx: &Transaction<'_>, note: &SignedCheckpoint) -> Result<(), rusqlite::Error> {
    let writer = checkpoint_writer(note).unwrap_or_default();
    tx.prepare_cached(
        "INSERT INTO mcp_audit_tree_checkpoint (writer_id, size, root, time, note)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        writer,
        note.head.size,
        base64(&note.head.root),
        checkpoint_time(note).unwrap_or_default(),
        note.to_text(),
    ])?;
    Ok(())
}

/// Registers `writer` in `mcp_audit_writer` with `note`, unless it is registered already.
pub(crate) fn register(
    tx: &Transaction<'_>,
    writer: &str,
    note: &SignedCheckpoint,
) -> Result<(), rusqlite::Error> {
    tx.execute(
        "INSERT OR IGNORE INTO mcp_audit_writer (writer_id, registered_at, note)
         VALUES (?1, ?2, ?3)",
        params![
            writer,
            checkpoint_time(note).unwrap_or_default(),
            note.to_text()
        ],
    )?;
    Ok(())
}

/// The note of the store's latest registration, if any.
pub(crate) fn last_registration(tx: &Transaction<'_>) -> Result<Option<String>, rusqlite::Error> {
    tx.query_row(
        "SELECT note FROM mcp_audit_writer ORDER BY rowid DESC LIMIT 1",
        [],
        |row| row.get(0),
    )
    .optional()
}

/// The store's latest registration and how many it holds, as a tree checkpoint stored in `tx`
/// names them (`capability_audit::tlog::writers`); `None` when it holds none.
pub(crate) fn latest_registration(
    tx: &Transaction<'_>,
) -> Result<Option<LatestRegistration>, rusqlite::Error> {
    tx.prepare_cached(
        "SELECT note, (SELECT count(*) FROM mcp_audit_writer) FROM mcp_audit_writer
         ORDER BY rowid DESC LIMIT 1",
    )?
    .query_row([], |row| {
        let count: i64 = row.get(1)?;
        let note: String = row.get(0)?;
        Ok(LatestRegistration::new(count.unsigned_abs(), &note))
    })
    .optional()
}

/// A writer's tree as [`load`] finds it.
pub(crate) struct Loaded {
    /// Resumed from its records.
    pub(crate) frontier: Frontier,
    /// Whether it is registered in `mcp_audit_writer`.
    pub(crate) registered: bool,
}

/// `writer`'s tree resumed from its stored records, checked against its last stored tree
/// checkpoint; and whether it is registered. `Err` (a message) when the records do not match
/// that checkpoint.
pub(crate) fn load(
    conn: &Connection,
    writer: &str,
) -> Result<Result<Loaded, String>, rusqlite::Error> {
    let last: Option<String> = conn
        .query_row(
            "SELECT note FROM mcp_audit_tree_checkpoint WHERE writer_id = ?1
             ORDER BY size DESC, rowid DESC LIMIT 1",
            params![writer],
            |row| row.get(0),
        )
        .optional()?;
    let registered: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM mcp_audit_writer WHERE writer_id = ?1)",
        params![writer],
        |row| row.get(0),
    )?;
    let last = match last.map(|text| SignedCheckpoint::parse(&text)).transpose() {
        Ok(last) => last,
        Err(e) => return Ok(Err(format!("its last tree checkpoint: {e}"))),
    };
    let sql = format!(
        "SELECT {} FROM mcp_audit_log WHERE writer_id = ?1 ORDER BY seq",
        AUDIT_COLUMNS.join(", ")
    );
    let mut statement = conn.prepare(&sql)?;
    let lines = statement
        .query_map(params![writer], super::records::record)?
        .map(|r| r.map(|record| record.to_line()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(resume(writer, lines, last.as_ref())
        .map(|frontier| Loaded {
            frontier,
            registered,
        })
        .map_err(|e| e.to_string()))
}

/// Replaces the stored note of the same writer, size, time and body as `note` (its cosigned
/// copy); `false` when there is none.
pub(crate) fn store_cosigned(
    conn: &Connection,
    note: &SignedCheckpoint,
) -> Result<bool, rusqlite::Error> {
    let writer = checkpoint_writer(note).unwrap_or_default();
    let time = checkpoint_time(note).unwrap_or_default();
    let stored: Option<String> = conn
        .query_row(
            "SELECT note FROM mcp_audit_tree_checkpoint
             WHERE writer_id = ?1 AND size = ?2 AND time = ?3",
            params![writer, note.head.size, time],
            |row| row.get(0),
        )
        .optional()?;
    let same = stored
        .and_then(|text| SignedCheckpoint::parse(&text).ok())
        .is_some_and(|stored| stored.body == note.body);
    if same {
        conn.execute(
            "UPDATE mcp_audit_tree_checkpoint SET note = ?4
             WHERE writer_id = ?1 AND size = ?2 AND time = ?3",
            params![writer, note.head.size, time, note.to_text()],
        )?;
    }
    Ok(same)
}
