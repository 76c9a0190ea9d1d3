//! What a row of `mcp_audit_log` that keeps its record's JSON (`record_json`) must hold in each
//! column: every column is compared with what inserting the record writes, so a column edited
//! behind a genuine `record_json` is named ([`RowProblem`]).

use capability_audit::AuditRecord;
use serde_json::Value;

use super::clock;
use crate::RowProblem;

/// Each column of `columns` that differs from what inserting `record` writes into it.
pub(super) fn compare(record: &AuditRecord, columns: &AuditRecord) -> Vec<RowProblem> {
    let expected = image(record, columns);
    let (want, found) = (column_texts(&expected), column_texts(columns));
    want.into_iter()
        .zip(found)
        .filter(|((_, w), (_, f))| w != f)
        .map(|((column, expected), (_, found))| RowProblem {
            writer: record.writer.clone(),
            seq: record.seq,
            column: column.to_owned(),
            found,
            expected,
        })
        .collect()
}

/// What the columns of `record` hold once inserted (see [`Columns::push`]): text without NUL,
/// an incident id of at most 64 characters, numbers within BIGINT. A time that is not in the
/// canonical form is written as the time of the insert, which nothing can predict: that column
/// is taken as found.
fn image(record: &AuditRecord, columns: &AuditRecord) -> AuditRecord {
    let mut e = true;
    let t = |s: &str, e: &mut bool| text(s, e);
    let o = |s: &Option<String>, e: &mut bool| opt_text(s, e);
    let n = |v: u64, e: &mut bool| u64::try_from(big(v, e)).unwrap_or(0);
    let mut image = record.clone();
    image.writer = t(&record.writer, &mut e);
    image.seq = n(record.seq, &mut e);
    if clock::parse(&record.time).is_none() {
        image.time.clone_from(&columns.time);
    }
    image.agent = t(&record.agent, &mut e);
    image.call_id = o(&record.call_id, &mut e);
    image.method = o(&record.method, &mut e);
    image.principal = record
        .principal
        .as_ref()
        .map(|p| capability_audit::Principal {
            subject: t(&p.subject, &mut e),
            client_id: o(&p.client_id, &mut e),
            issuer: o(&p.issuer, &mut e),
        });
    image.role = t(&record.role, &mut e);
    image.session = t(&record.session, &mut e);
    image.incident_id = o(&record.incident_id, &mut e).map(|i| i.chars().take(64).collect());
    image.step = o(&record.step, &mut e);
    image.provider = o(&record.provider, &mut e);
    image.tool = t(&record.tool, &mut e);
    image.descriptor_hash = t(&record.descriptor_hash, &mut e);
    image.policy_version = o(&record.policy_version, &mut e);
    image.input_digest = t(&record.input_digest, &mut e);
    image.input_size = n(record.input_size, &mut e);
    image.output_digest = o(&record.output_digest, &mut e);
    image.output_size = record.output_size.map(|v| n(v, &mut e));
    image.latency_us = record.latency_us.map(|v| n(v, &mut e));
    image.error = o(&record.error, &mut e);
    image.prev = t(&record.prev, &mut e);
    image.hash = t(&record.hash, &mut e);
    image
}

/// Each column of a record, by name, as JSON text.
fn column_texts(r: &AuditRecord) -> Vec<(&'static str, String)> {
    fn j<T: serde::Serialize + ?Sized>(value: &T) -> String {
        let value = serde_json::to_value(value).unwrap_or(Value::Null);
        capability_core::json::to_canonical_json(&value)
    }
    vec![
        ("writer_id", j(&r.writer)),
        ("seq", j(&r.seq)),
        ("time", j(&r.time)),
        ("agent_name", j(&r.agent)),
        ("agent_role", j(&r.role)),
        ("session_id", j(&r.session)),
        ("incident_id", j(&r.incident_id)),
        ("flywheel_node", j(&r.step)),
        ("provider", j(&r.provider)),
        ("tool", j(&r.tool)),
        ("descriptor_hash", j(&r.descriptor_hash)),
        ("policy_version", j(&r.policy_version)),
        ("verdict", j(&r.verdict)),
        ("reasons", j(&r.reasons)),
        ("input", j(&r.input)),
        ("input_digest", j(&r.input_digest)),
        ("input_size", j(&r.input_size)),
        ("output_digest", j(&r.output_digest)),
        ("output_size", j(&r.output_size)),
        ("latency_us", j(&r.latency_us)),
        ("success", j(&r.success)),
        ("error", j(&r.error)),
        ("prev_hash", j(&r.prev)),
        ("hash", j(&r.hash)),
        ("call_id", j(&r.call_id)),
        ("phase", j(&r.phase)),
        ("method", j(&r.method)),
        (
            "principal",
            j(&r.principal.as_ref().map(|p| p.subject.as_str())),
        ),
        (
            "client_id",
            j(&r.principal.as_ref().and_then(|p| p.client_id.as_deref())),
        ),
        (
            "issuer",
            j(&r.principal.as_ref().and_then(|p| p.issuer.as_deref())),
        ),
    ]
}

/// Text a TEXT column can hold: PostgreSQL text has no NUL.
pub(super) fn text(s: &str, exact: &mut bool) -> String {
    if s.contains('\0') {
        *exact = false;
        s.replace('\0', "\u{FFFD}")
    } else {
        s.to_owned()
    }
}

/// [`text`] of an optional column.
pub(super) fn opt_text(s: &Option<String>, exact: &mut bool) -> Option<String> {
    s.as_deref().map(|s| text(s, exact))
}

/// A number a BIGINT column can hold (`i64::MAX` for a larger one, which is then not exact).
pub(super) fn big(n: u64, exact: &mut bool) -> i64 {
    i64::try_from(n).unwrap_or_else(|_| {
        *exact = false;
        i64::MAX
    })
}
