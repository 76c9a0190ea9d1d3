//! Audit records and checkpoints as rows of `mcp_audit_log` and `mcp_audit_checkpoint`, and the
//! rows of `mcp_daily_stats`. The mapping is [`crate::row`]'s.

use capability_audit::{AuditRecord, Checkpoint};
use rusqlite::types::Type;
use rusqlite::{Connection, Row, Transaction, params};

use crate::row::{
    AUDIT_COLUMNS, input_json, parse_input, parse_phase, parse_principal, parse_reasons,
    parse_verdict, phase_name, principal_columns, reasons_json, verdict_name,
};
use crate::{DailyStats, Trail};

/// `INSERT INTO mcp_audit_log (...) VALUES (?1, ..., ?24)`.
pub(crate) fn insert_sql() -> String {
    let marks: Vec<String> = (1..=AUDIT_COLUMNS.len()).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT INTO mcp_audit_log ({}) VALUES ({})",
        AUDIT_COLUMNS.join(", "),
        marks.join(", ")
    )
}

/// Inserts records, in the transaction `tx`.
pub(crate) fn insert_records(
    tx: &Transaction<'_>,
    records: &[AuditRecord],
) -> Result<(), rusqlite::Error> {
    let mut statement = tx.prepare_cached(&insert_sql())?;
    for r in records {
        let (principal, client_id, issuer) = principal_columns(r.principal.as_ref());
        statement.execute(params![
            r.writer,
            r.seq,
            r.time,
            r.agent,
            r.role,
            r.session,
            r.incident_id,
            r.step,
            r.provider,
            r.tool,
            r.descriptor_hash,
            r.policy_version,
            verdict_name(r.verdict),
            reasons_json(&r.reasons),
            input_json(&r.input),
            r.input_digest,
            r.input_size,
            r.output_digest,
            r.output_size,
            r.latency_us,
            r.success,
            r.error,
            r.prev,
            r.hash,
            r.call_id,
            phase_name(r.phase),
            r.method,
            principal,
            client_id,
            issuer,
        ])?;
    }
    Ok(())
}

/// Inserts a checkpoint, in the transaction `tx`.
pub(crate) fn insert_checkpoint(
    tx: &Transaction<'_>,
    c: &Checkpoint,
) -> Result<(), rusqlite::Error> {
    tx.prepare_cached(
        "INSERT INTO mcp_audit_checkpoint (writer_id, seq, head, time, key, signature)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![c.writer, c.seq, c.head, c.time, c.key, c.signature])?;
    Ok(())
}

fn bad(column: usize, message: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, Type::Text, message.into())
}

/// A row of `SELECT <AUDIT_COLUMNS> FROM mcp_audit_log` as the record it stores.
pub(crate) fn record(row: &Row<'_>) -> Result<AuditRecord, rusqlite::Error> {
    let verdict: String = row.get(12)?;
    let reasons: String = row.get(13)?;
    let input: String = row.get(14)?;
    let phase: Option<String> = row.get(25)?;
    Ok(AuditRecord {
        writer: row.get(0)?,
        seq: row.get(1)?,
        time: row.get(2)?,
        agent: row.get(3)?,
        call_id: row.get(24)?,
        phase: parse_phase(phase.as_deref()).map_err(|e| bad(25, e))?,
        method: row.get(26)?,
        principal: parse_principal(row.get(27)?, row.get(28)?, row.get(29)?)
            .map_err(|e| bad(27, e))?,
        role: row.get(4)?,
        session: row.get(5)?,
        incident_id: row.get(6)?,
        step: row.get(7)?,
        provider: row.get(8)?,
        tool: row.get(9)?,
        descriptor_hash: row.get(10)?,
        policy_version: row.get(11)?,
        verdict: parse_verdict(&verdict)
            .ok_or_else(|| bad(12, format!("unknown verdict `{verdict}`")))?,
        reasons: parse_reasons(&reasons).map_err(|e| bad(13, e))?,
        input: parse_input(&input).map_err(|e| bad(14, e))?,
        input_digest: row.get(15)?,
        input_size: row.get(16)?,
        output_digest: row.get(17)?,
        output_size: row.get(18)?,
        latency_us: row.get(19)?,
        success: row.get(20)?,
        error: row.get(21)?,
        prev: row.get(22)?,
        hash: row.get(23)?,
    })
}

/// The last record of `writer` (its seq and hash), if it has any.
pub(crate) fn head(
    conn: &Connection,
    writer: &str,
) -> Result<Option<(u64, String)>, rusqlite::Error> {
    let mut statement = conn.prepare(
        "SELECT seq, hash FROM mcp_audit_log WHERE writer_id = ?1 ORDER BY seq DESC LIMIT 1",
    )?;
    let mut rows = statement.query(params![writer])?;
    match rows.next()? {
        Some(row) => Ok(Some((row.get(0)?, row.get(1)?))),
        None => Ok(None),
    }
}

/// The highest seq a checkpoint of `writer` names (0 when none).
pub(crate) fn checkpointed(conn: &Connection, writer: &str) -> Result<u64, rusqlite::Error> {
    conn.query_row(
        "SELECT COALESCE(MAX(seq), 0) FROM mcp_audit_checkpoint WHERE writer_id = ?1",
        params![writer],
        |row| row.get(0),
    )
}

/// Every record and checkpoint, by writer and seq.
pub(crate) fn read_trail(conn: &mut Connection) -> Result<Trail, rusqlite::Error> {
    let tx = conn.transaction()?;
    let sql = format!(
        "SELECT {} FROM mcp_audit_log ORDER BY writer_id, seq",
        AUDIT_COLUMNS.join(", ")
    );
    let records = tx
        .prepare(&sql)?
        .query_map([], record)?
        .collect::<Result<Vec<_>, _>>()?;
    let checkpoints = tx
        .prepare(
            "SELECT writer_id, seq, head, time, key, signature FROM mcp_audit_checkpoint
             ORDER BY writer_id, seq",
        )?
        .query_map([], |row| {
            Ok(Checkpoint {
                writer: row.get(0)?,
                seq: row.get(1)?,
                head: row.get(2)?,
                time: row.get(3)?,
                key: row.get(4)?,
                signature: row.get(5)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let (tree_checkpoints, writers) = read_trees(&tx)?;
    tx.finish()?;
    // Every column is a field of the record it is read into, so the record's hash covers
    // every column: nothing is left to compare.
    Ok(Trail {
        records,
        checkpoints,
        tree_checkpoints,
        writers,
        problems: Vec::new(),
    })
}

/// Every tree checkpoint's note (`mcp_audit_tree_checkpoint`), by writer and size; and every
/// registered writer (`mcp_audit_writer`) with its registration note.
fn read_trees(
    tx: &Transaction<'_>,
) -> Result<(Vec<String>, Vec<crate::RegisteredWriter>), rusqlite::Error> {
    let notes = tx
        .prepare("SELECT note FROM mcp_audit_tree_checkpoint ORDER BY writer_id, size, rowid")?
        .query_map([], |row| row.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    let writers = tx
        .prepare("SELECT writer_id, note FROM mcp_audit_writer ORDER BY writer_id")?
        .query_map([], |row| {
            Ok(crate::RegisteredWriter {
                writer: row.get(0)?,
                note: row.get(1)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok((notes, writers))
}

/// `mcp_daily_stats`, sorted by day, role, provider and tool.
pub(crate) fn daily_stats(conn: &mut Connection) -> Result<Vec<DailyStats>, rusqlite::Error> {
    conn.prepare(
        "SELECT day, role, provider, tool, calls, allowed, denied, errors, degraded,
                p50_latency_us, p95_latency_us
         FROM mcp_daily_stats ORDER BY day, role, provider, tool",
    )?
    .query_map([], |row| {
        Ok(DailyStats {
            day: row.get(0)?,
            role: row.get(1)?,
            provider: row.get(2)?,
            tool: row.get(3)?,
            calls: row.get(4)?,
            allowed: row.get(5)?,
            denied: row.get(6)?,
            errors: row.get(7)?,
            degraded: row.get(8)?,
            p50_latency_us: row.get(9)?,
            p95_latency_us: row.get(10)?,
        })
    })?
    .collect()
}
