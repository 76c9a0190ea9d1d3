//! Audit records as rows of `mcp_audit_log` and back, exactly: a record read back has the same
//! canonical JSON, so its hash verifies. Checkpoints, the trail and `mcp_daily_stats`.

use std::time::SystemTime;

use capability_audit::{AuditRecord, Checkpoint, Verdict};
use postgres::types::FromSql;
use postgres::{GenericClient, Row, ToStatement};
use serde_json::Value;

use super::clock;
use super::problems::{big, opt_text, text};
use crate::{DailyStats, RowProblem, Trail};

/// The most records one insert carries.
pub(crate) const MAX_BATCH: usize = 1_000;

/// One insert of any number of records: one array per column, unnested.
pub(crate) const INSERT: &str =
    "INSERT INTO mcp_audit_log (writer_id, seq, time, agent_name, agent_role,
        session_id, incident_id, flywheel_node, provider, tool, descriptor_hash, policy_version,
        verdict, reasons, input, input_digest, input_size, output_digest, output_size,
        latency_us, success, error, prev_hash, hash, record_json, call_id, phase, method,
        principal, client_id, issuer)
    SELECT w, s, t, a, r, se, i, f, p, tl, d, pv, v, re::json, inp::json, idg, isz, odg, osz,
        lat, suc, err, prv, h, rj::json, ci, ph, me, pr, cl, iss
    FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::text[], $5::text[],
        $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
        $13::text[], $14::text[], $15::text[], $16::text[], $17::bigint[], $18::text[],
        $19::bigint[], $20::bigint[], $21::bool[], $22::text[], $23::text[], $24::text[],
        $25::text[], $26::text[], $27::text[], $28::text[], $29::text[], $30::text[],
        $31::text[])
    AS u(w, s, t, a, r, se, i, f, p, tl, d, pv, v, re, inp, idg, isz, odg, osz, lat, suc, err,
        prv, h, rj, ci, ph, me, pr, cl, iss)";

/// The columns of a batch of records.
#[derive(Default)]
pub(crate) struct Columns {
    writer: Vec<String>,
    seq: Vec<i64>,
    time: Vec<SystemTime>,
    agent: Vec<String>,
    role: Vec<String>,
    session: Vec<String>,
    incident: Vec<Option<String>>,
    step: Vec<Option<String>>,
    provider: Vec<Option<String>>,
    tool: Vec<String>,
    descriptor_hash: Vec<String>,
    policy_version: Vec<Option<String>>,
    verdict: Vec<String>,
    reasons: Vec<String>,
    input: Vec<String>,
    input_digest: Vec<String>,
    input_size: Vec<i64>,
    output_digest: Vec<Option<String>>,
    output_size: Vec<Option<i64>>,
    latency: Vec<Option<i64>>,
    success: Vec<Option<bool>>,
    error: Vec<Option<String>>,
    prev: Vec<String>,
    hash: Vec<String>,
    exact: Vec<Option<String>>,
    call_id: Vec<Option<String>>,
    phase: Vec<Option<String>>,
    method: Vec<Option<String>>,
    principal: Vec<Option<String>>,
    client_id: Vec<Option<String>>,
    issuer: Vec<Option<String>>,
}

impl Columns {
    /// Adds one record (sealed: its `seq`, `prev` and `hash` set).
    pub(crate) fn push(&mut self, r: &AuditRecord) {
        let mut exact = true;
        let e = &mut exact;
        self.writer.push(text(&r.writer, e));
        let seq = big(r.seq, e);
        self.seq.push(seq);
        self.time.push(clock::parse(&r.time).unwrap_or_else(|| {
            *e = false;
            SystemTime::now()
        }));
        self.agent.push(text(&r.agent, e));
        self.role.push(text(&r.role, e));
        self.session.push(text(&r.session, e));
        let incident = opt_text(&r.incident_id, e).map(|i| {
            if i.chars().count() > 64 {
                *e = false;
                i.chars().take(64).collect()
            } else {
                i
            }
        });
        self.incident.push(incident);
        self.step.push(opt_text(&r.step, e));
        self.provider.push(opt_text(&r.provider, e));
        self.tool.push(text(&r.tool, e));
        self.descriptor_hash.push(text(&r.descriptor_hash, e));
        self.policy_version.push(opt_text(&r.policy_version, e));
        self.verdict.push(verdict_text(r.verdict));
        // serde_json escapes control characters: JSON text never holds a NUL.
        self.reasons.push(json(&r.reasons));
        self.input
            .push(capability_core::json::to_canonical_json(&r.input));
        self.input_digest.push(text(&r.input_digest, e));
        self.input_size.push(big(r.input_size, e));
        self.output_digest.push(opt_text(&r.output_digest, e));
        self.output_size.push(r.output_size.map(|n| big(n, e)));
        self.latency.push(r.latency_us.map(|n| big(n, e)));
        self.success.push(r.success);
        self.error.push(opt_text(&r.error, e));
        self.prev.push(text(&r.prev, e));
        self.hash.push(text(&r.hash, e));
        self.call_id.push(opt_text(&r.call_id, e));
        self.phase.push(r.phase.map(|p| p.as_str().to_owned()));
        self.method.push(opt_text(&r.method, e));
        let p = r.principal.as_ref();
        self.principal.push(p.map(|p| text(&p.subject, e)));
        self.client_id
            .push(p.and_then(|p| opt_text(&p.client_id, e)));
        self.issuer.push(p.and_then(|p| opt_text(&p.issuer, e)));
        self.exact.push((!exact).then(|| r.to_line()));
    }

    /// Inserts the batch with one statement: [`INSERT`], or that statement prepared.
    pub(crate) fn insert<S: ToStatement + ?Sized>(
        &self,
        client: &mut impl GenericClient,
        statement: &S,
    ) -> Result<u64, postgres::Error> {
        client.execute(
            statement,
            &[
                &self.writer,
                &self.seq,
                &self.time,
                &self.agent,
                &self.role,
                &self.session,
                &self.incident,
                &self.step,
                &self.provider,
                &self.tool,
                &self.descriptor_hash,
                &self.policy_version,
                &self.verdict,
                &self.reasons,
                &self.input,
                &self.input_digest,
                &self.input_size,
                &self.output_digest,
                &self.output_size,
                &self.latency,
                &self.success,
                &self.error,
                &self.prev,
                &self.hash,
                &self.exact,
                &self.call_id,
                &self.phase,
                &self.method,
                &self.principal,
                &self.client_id,
                &self.issuer,
            ],
        )
    }
}

fn json<T: serde::Serialize>(value: &T) -> String {
    let value = serde_json::to_value(value).unwrap_or(Value::Null);
    capability_core::json::to_canonical_json(&value)
}

fn verdict_text(verdict: Verdict) -> String {
    match serde_json::to_value(verdict) {
        Ok(Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The columns of a record, in the order [`record`] reads them.
pub(crate) fn select_records() -> String {
    format!(
        "SELECT writer_id, seq, {}, agent_name, agent_role, session_id, incident_id,
             flywheel_node, provider, tool, descriptor_hash, policy_version, verdict,
             reasons::text, input::text, input_digest, input_size, output_digest, output_size,
             latency_us, success, error, prev_hash, hash, record_json::text, call_id, phase,
             method, principal, client_id, issuer
         FROM mcp_audit_log",
        clock::sql_text("time")
    )
}

/// Column `i` of `row`, or why not (a column edited to NULL or to another type).
fn get<'a, T: FromSql<'a>>(row: &'a Row, i: usize) -> Result<T, String> {
    row.try_get(i)
        .map_err(|e| format!("column {}: {e}", row.columns()[i].name()))
}

/// The record a row holds, and every column that differs from it: with `record_json` (a
/// record the columns cannot hold exactly), the record is the JSON's, and each column is
/// compared with what inserting that record writes into it; without, the record is read from
/// the columns (so its hash covers every column). A row that is not a record (a column edited
/// into something else) is an error.
pub(crate) fn record(row: &Row) -> Result<(AuditRecord, Vec<RowProblem>), String> {
    let writer: String = get(row, 0)?;
    let seq: i64 = get(row, 1)?;
    let at = |e: String| format!("record {seq} of writer `{writer}`: {e}");
    let columns = from_columns(row).map_err(at)?;
    let Some(exact) = get::<Option<String>>(row, 24).map_err(at)? else {
        return Ok((columns, Vec::new()));
    };
    let record: AuditRecord =
        serde_json::from_str(&exact).map_err(|e| at(format!("record_json: {e}")))?;
    let problems = super::problems::compare(&record, &columns);
    Ok((record, problems))
}

/// The record as its columns hold it.
fn from_columns(row: &Row) -> Result<AuditRecord, String> {
    let json = |i: usize| -> Result<Value, String> {
        serde_json::from_str(get::<&str>(row, i)?).map_err(|e| e.to_string())
    };
    let unsigned = |n: i64| u64::try_from(n).map_err(|_| "a negative number".to_owned());
    let opt_unsigned = |i: usize| -> Result<Option<u64>, String> {
        get::<Option<i64>>(row, i)?.map(unsigned).transpose()
    };
    let verdict = Value::String(get(row, 12)?);
    let phase: Option<String> = get(row, 26)?;
    Ok(AuditRecord {
        writer: get(row, 0)?,
        seq: unsigned(get(row, 1)?)?,
        time: get(row, 2)?,
        agent: get(row, 3)?,
        call_id: get(row, 25)?,
        phase: crate::row::parse_phase(phase.as_deref())?,
        method: get(row, 27)?,
        principal: crate::row::parse_principal(get(row, 28)?, get(row, 29)?, get(row, 30)?)?,
        role: get(row, 4)?,
        session: get(row, 5)?,
        incident_id: get(row, 6)?,
        step: get(row, 7)?,
        provider: get(row, 8)?,
        tool: get(row, 9)?,
        descriptor_hash: get(row, 10)?,
        policy_version: get(row, 11)?,
        verdict: serde_json::from_value(verdict).map_err(|e| format!("verdict: {e}"))?,
        reasons: serde_json::from_value(json(13)?).map_err(|e| format!("reasons: {e}"))?,
        input: json(14)?,
        input_digest: get(row, 15)?,
        input_size: unsigned(get(row, 16)?)?,
        output_digest: get(row, 17)?,
        output_size: opt_unsigned(18)?,
        latency_us: opt_unsigned(19)?,
        success: get(row, 20)?,
        error: get(row, 21)?,
        prev: get(row, 22)?,
        hash: get(row, 23)?,
    })
}

/// The last record of `writer`, if any.
pub(crate) fn last_record(
    client: &mut impl GenericClient,
    writer: &str,
) -> Result<Option<Result<AuditRecord, String>>, postgres::Error> {
    let sql = format!(
        "{} WHERE writer_id = $1 ORDER BY seq DESC LIMIT 1",
        select_records()
    );
    // A row whose columns differ from its `record_json` was edited: the chain does not go on
    // from it.
    Ok(client.query_opt(&sql, &[&writer])?.map(|row| {
        record(&row).and_then(|(record, problems)| match problems.first() {
            None => Ok(record),
            Some(problem) => Err(format!("its last record was edited: {problem}")),
        })
    }))
}

/// The `seq` of `writer`'s last checkpoint (0 when none).
pub(crate) fn last_checkpoint(
    client: &mut impl GenericClient,
    writer: &str,
) -> Result<u64, postgres::Error> {
    let row = client.query_one(
        "SELECT COALESCE(max(seq), 0) FROM mcp_audit_checkpoint WHERE writer_id = $1",
        &[&writer],
    )?;
    Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
}

/// Writes a checkpoint (once per writer and seq).
pub(crate) fn insert_checkpoint(
    client: &mut impl GenericClient,
    c: &Checkpoint,
) -> Result<u64, postgres::Error> {
    let seq = i64::try_from(c.seq).unwrap_or(i64::MAX);
    client.execute(
        "INSERT INTO mcp_audit_checkpoint (writer_id, seq, head, time, key, signature)
         VALUES ($1, $2, $3, CAST($4::text AS timestamptz), $5, $6)
         ON CONFLICT (writer_id, seq) DO NOTHING",
        &[&c.writer, &seq, &c.head, &c.time, &c.key, &c.signature],
    )
}

/// Every record and checkpoint; the inner error names a row that is not a record.
pub(crate) fn read_trail(
    client: &mut impl GenericClient,
) -> Result<Result<Trail, String>, postgres::Error> {
    let sql = format!("{} ORDER BY writer_id, seq", select_records());
    let mut records = Vec::new();
    let mut problems = Vec::new();
    for row in client.query(&sql, &[])? {
        match record(&row) {
            Ok((record, mut found)) => {
                records.push(record);
                problems.append(&mut found);
            }
            Err(e) => return Ok(Err(e)),
        }
    }
    let sql = format!(
        "SELECT writer_id, seq, head, {}, key, signature FROM mcp_audit_checkpoint
         ORDER BY writer_id, seq",
        clock::sql_text("time")
    );
    let checkpoint = |row: &Row| -> Result<Checkpoint, String> {
        Ok(Checkpoint {
            writer: get(row, 0)?,
            seq: u64::try_from(get::<i64>(row, 1)?).map_err(|_| "a negative seq".to_owned())?,
            head: get(row, 2)?,
            time: get(row, 3)?,
            key: get(row, 4)?,
            signature: get(row, 5)?,
        })
    };
    let checkpoints = match client.query(&sql, &[])?.iter().map(checkpoint).collect() {
        Ok(checkpoints) => checkpoints,
        Err(e) => return Ok(Err(format!("checkpoint: {e}"))),
    };
    let (tree_checkpoints, writers) = read_trees(client)?;
    Ok(Ok(Trail {
        records,
        checkpoints,
        tree_checkpoints,
        writers,
        problems,
    }))
}

/// Every tree checkpoint's note (`mcp_audit_tree_checkpoint`), by writer and size; every
/// registered writer (`mcp_audit_writer`) and its note. The notes first: each statement reads
/// its own snapshot, and a note names only registrations committed before it was stored, so
/// the registrations read after it hold every one a note read names (else a live store's
/// newest checkpoint could name a registration not read yet: a false finding).
fn read_trees(
    client: &mut impl GenericClient,
) -> Result<(Vec<String>, Vec<crate::RegisteredWriter>), postgres::Error> {
    let notes = client
        .query(
            "SELECT note FROM mcp_audit_tree_checkpoint ORDER BY writer_id, size, id",
            &[],
        )?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let writers = client
        .query(
            "SELECT writer_id, note FROM mcp_audit_writer ORDER BY writer_id",
            &[],
        )?
        .iter()
        .map(|row| crate::RegisteredWriter {
            writer: row.get(0),
            note: row.get(1),
        })
        .collect();
    Ok((notes, writers))
}

/// `mcp_daily_stats`, sorted.
pub(crate) fn daily_stats(
    client: &mut impl GenericClient,
) -> Result<Vec<DailyStats>, postgres::Error> {
    let rows = client.query(
        "SELECT day::text, role, provider, tool, calls, allowed, denied, errors, degraded,
                p50_latency_us, p95_latency_us
         FROM mcp_daily_stats ORDER BY day, role, provider, tool",
        &[],
    )?;
    let count =
        |row: &Row, i: usize| get::<i64>(row, i).map_or(0, |n| u64::try_from(n).unwrap_or(0));
    let latency = |row: &Row, i: usize| {
        get::<Option<i64>>(row, i)
            .ok()
            .flatten()
            .and_then(|n| u64::try_from(n).ok())
    };
    Ok(rows
        .iter()
        .map(|row| DailyStats {
            day: get(row, 0).unwrap_or_default(),
            role: get(row, 1).unwrap_or_default(),
            provider: get(row, 2).unwrap_or_default(),
            tool: get(row, 3).unwrap_or_default(),
            calls: count(row, 4),
            allowed: count(row, 5),
            denied: count(row, 6),
            errors: count(row, 7),
            degraded: count(row, 8),
            p50_latency_us: latency(row, 9),
            p95_latency_us: latency(row, 10),
        })
        .collect())
}
