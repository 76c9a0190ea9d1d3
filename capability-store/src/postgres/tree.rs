//! The tree each writer keeps beside its records (`capability_audit::tlog::stored`), on
//! PostgreSQL: its signed tree checkpoints in `mcp_audit_tree_checkpoint`, its registration in
//! `mcp_audit_writer`, and resuming it from the stored records. The committer thread keeps the
//! tree of what is committed: it hashes each batch's leaves as it writes them, so an append
//! waits for no hashing, and a commit that failed leaves the tree as it was.

use capability_audit::tlog::encoding::base64;
use capability_audit::tlog::writers::{LatestRegistration, PendingCheckpoint, sign_registration};
use capability_audit::tlog::{Frontier, SignedCheckpoint, WriterTree, checkpoint_time, resume};
use capability_audit::{AuditError, AuditRecord, Checkpoint, CheckpointSchedule, CheckpointSigner};
use postgres::GenericClient;
use std::sync::Arc;

use super::pool::Pool;
use super::rows;

/// [`open`] for a sink opening: `None` without a signer; a tree that cannot be resumed refuses
/// the sink, saying why.
pub(crate) fn open_sink(
    pool: &Pool,
    client: &mut impl GenericClient,
    writer: &str,
    signer: Option<&dyn CheckpointSigner>,
) -> Result<Option<WriterTree>, AuditError> {
    let Some(signer) = signer else {
        return Ok(None);
    };
    let fail = |message: String| AuditError::Store {
        store: pool.name.clone(),
        message,
    };
    match open(client, writer, signer) {
        Ok(Ok(tree)) => Ok(tree),
        Ok(Err(why)) => Err(fail(format!(
            "the chain of writer `{writer}` is broken: {why}"
        ))),
        Err(e) => Err(fail(
            pool.error("cannot read the writer's tree", &e).message,
        )),
    }
}

/// A tree checkpoint to sign where it is stored, and its signer.
pub(crate) type Pending = (PendingCheckpoint, Arc<dyn CheckpointSigner>);

/// The tree checkpoint of `frontier` (else the tree as committed) beside `checkpoint`, when
/// there is a tree and a signer: signed as it is stored ([`insert_checkpoints`]).
pub(crate) fn note(
    tree: Option<&WriterTree>,
    frontier: Option<&Frontier>,
    checkpoint: Option<&Checkpoint>,
    keys: Option<&(Arc<dyn CheckpointSigner>, CheckpointSchedule)>,
) -> Option<Pending> {
    let (tree, checkpoint, (signer, _)) = (tree?, checkpoint?, keys?);
    let frontier = frontier.unwrap_or(tree.committed());
    let pending = PendingCheckpoint::new(tree, frontier, &checkpoint.time);
    Some((pending, signer.clone()))
}

/// Inserts a chain checkpoint and its tree's, in the transaction `tx`.
pub(crate) fn insert_checkpoints(
    tx: &mut impl GenericClient,
    checkpoint: Option<&Checkpoint>,
    note: Option<&Pending>,
) -> Result<Option<SignedCheckpoint>, postgres::Error> {
    if let Some(checkpoint) = checkpoint {
        rows::insert_checkpoint(tx, checkpoint)?;
        if let Some((pending, signer)) = note {
            return sign_and_insert(tx, &checkpoint.writer, pending, signer.as_ref());
        }
    }
    Ok(None)
}

/// The store's latest registration and how many it holds, read by one statement (one
/// snapshot), as a tree checkpoint stored in the same transaction names them
/// (`capability_audit::tlog::writers`); `None` when it holds none.
fn latest_registration(
    client: &mut impl GenericClient,
) -> Result<Option<LatestRegistration>, postgres::Error> {
    let row = client.query_opt(
        "SELECT note, count(*) OVER () FROM mcp_audit_writer
         ORDER BY registered_at DESC, writer_id DESC LIMIT 1",
        &[],
    )?;
    Ok(row.map(|row| {
        let count: i64 = row.get(1);
        LatestRegistration::new(count.unsigned_abs(), &row.get::<_, String>(0))
    }))
}

/// Signs `pending`, naming the store's latest registration as `client` reads it, and inserts
/// it as `writer`'s. Call it in the transaction that stores the checkpoint: a writer
/// registered since is named, never one read earlier (a registration another writer commits
/// meanwhile may be named or not: both are in the store).
pub(crate) fn sign_and_insert(
    client: &mut impl GenericClient,
    writer: &str,
    pending: &PendingCheckpoint,
    signer: &dyn CheckpointSigner,
) -> Result<Option<SignedCheckpoint>, postgres::Error> {
    let latest = latest_registration(client)?;
    match pending.sign(latest.as_ref(), signer) {
        Ok(note) => insert(client, writer, &note).map(|_| Some(note)),
        Err(e) => {
            tracing::error!(writer, error = %e, "tree checkpoint not signed");
            Ok(None)
        }
    }
}

/// Inserts a signed tree checkpoint of `writer`.
pub(crate) fn insert(
    client: &mut impl GenericClient,
    writer: &str,
    note: &SignedCheckpoint,
) -> Result<u64, postgres::Error> {
    let size = i64::try_from(note.head.size).unwrap_or(i64::MAX);
    client.execute(
        "INSERT INTO mcp_audit_tree_checkpoint (writer_id, size, root, time, note)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        &[
            &writer,
            &size,
            &base64(&note.head.root),
            &checkpoint_time(note).unwrap_or_default(),
            &note.to_text(),
        ],
    )
}

/// `writer`'s tree resumed from its stored records (checked against its last stored tree
/// checkpoint), registered in `mcp_audit_writer` with a checkpoint of it when it is not yet.
/// `Ok(None)` for a writer id that cannot name a log; the inner `Err` says why the records do
/// not match.
pub(crate) fn open(
    client: &mut impl GenericClient,
    writer: &str,
    signer: &dyn CheckpointSigner,
) -> Result<Result<Option<WriterTree>, String>, postgres::Error> {
    if capability_audit::tlog::origin(writer).is_err() {
        tracing::warn!(
            writer,
            "no tree kept for this writer: its id cannot name a log"
        );
        return Ok(Ok(None));
    }
    let last = client
        .query_opt(
            "SELECT note FROM mcp_audit_tree_checkpoint WHERE writer_id = $1
             ORDER BY size DESC, id DESC LIMIT 1",
            &[&writer],
        )?
        .map(|row| row.get::<_, String>(0));
    let last = match last.map(|text| SignedCheckpoint::parse(&text)).transpose() {
        Ok(last) => last,
        Err(e) => return Ok(Err(format!("its last tree checkpoint: {e}"))),
    };
    let mut lines = Vec::new();
    let sql = format!(
        "{} WHERE writer_id = $1 ORDER BY seq",
        rows::select_records()
    );
    for row in client.query(&sql, &[&writer])? {
        match rows::record(&row) {
            Ok((record, problems)) if problems.is_empty() => lines.push(record.to_line()),
            Ok((record, problems)) => {
                return Ok(Err(format!(
                    "its record {} was edited: {}",
                    record.seq, problems[0]
                )));
            }
            Err(e) => return Ok(Err(format!("a stored record is not a record: {e}"))),
        }
    }
    let frontier = match resume(writer, lines, last.as_ref()) {
        Ok(frontier) => frontier,
        Err(e) => return Ok(Err(format!("the writer's tree cannot be resumed: {e}"))),
    };
    let tree = match WriterTree::new(writer, frontier) {
        Ok(tree) => tree,
        Err(e) => return Ok(Err(e.to_string())),
    };
    // The registration names the one before it (`capability_audit::tlog::writers`).
    let previous = client
        .query_opt(
            "SELECT note FROM mcp_audit_writer ORDER BY registered_at DESC, writer_id DESC LIMIT 1",
            &[],
        )?
        .map(|row| row.get::<_, String>(0));
    let time = capability_audit::utc_now();
    let signed = sign_registration(&tree, &time, previous.as_deref(), signer);
    let note = match signed {
        Ok(note) => note,
        Err(e) => return Ok(Err(e.to_string())),
    };
    client.execute(
        "INSERT INTO mcp_audit_writer (writer_id, registered_at, note) VALUES ($1, $2, $3)
         ON CONFLICT (writer_id) DO NOTHING",
        &[
            &writer,
            &checkpoint_time(&note).unwrap_or_default(),
            &note.to_text(),
        ],
    )?;
    Ok(Ok(Some(tree)))
}

/// The tree once `batch` (the next records of the writer) is committed; `None` when the tree
/// does not end where the batch starts (a commit reported failed reached the database): it is
/// then resumed again.
pub(crate) fn advance(tree: &WriterTree, batch: &[AuditRecord]) -> Option<Frontier> {
    let first = batch.first()?;
    if first.seq != tree.committed().size() + 1 {
        return None;
    }
    let mut frontier = tree.committed().clone();
    for record in batch {
        frontier.push(record.to_line().as_bytes());
    }
    Some(frontier)
}

/// Replaces the stored note of the same writer, size, time and body as `note` (its cosigned
/// copy); `false` when there is none.
pub(crate) fn store_cosigned(
    client: &mut impl GenericClient,
    note: &SignedCheckpoint,
) -> Result<bool, postgres::Error> {
    let writer = capability_audit::tlog::stored::checkpoint_writer(note).unwrap_or_default();
    let time = checkpoint_time(note).unwrap_or_default();
    let size = i64::try_from(note.head.size).unwrap_or(i64::MAX);
    let stored = client
        .query_opt(
            "SELECT note FROM mcp_audit_tree_checkpoint
             WHERE writer_id = $1 AND size = $2 AND time = $3",
            &[&writer, &size, &time],
        )?
        .map(|row| row.get::<_, String>(0));
    let same = stored
        .and_then(|text| SignedCheckpoint::parse(&text).ok())
        .is_some_and(|stored| stored.body == note.body);
    if same {
        client.execute(
            "UPDATE mcp_audit_tree_checkpoint SET note = $4
             WHERE writer_id = $1 AND size = $2 AND time = $3",
            &[&writer, &size, &time, &note.to_text()],
        )?;
    }
    Ok(same)
}
