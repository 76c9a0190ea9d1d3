//! The engine's audit trail: a JSON Lines file, or a store (SQLite, PostgreSQL), opened the way
//! `capability audit verify` reads them, signing checkpoints when given a key.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use capability::audit::jsonl::CheckpointFeed;
use capability::audit::jsonl::TAKEN;
use capability::audit::tlog::SignedCheckpoint;
use capability::audit::{
    AuditError, AuditSink, CheckpointEvery, CheckpointSigner, FlushPolicy, JsonlSink,
};
use capability::gate::SecretKey;
use capability_http::witness::{ReadTree, StoreCosigned, WitnessFeed, jsonl_tree};
use capability_store::{SinkOptions, TargetKind, redact_url, target_kind};

use crate::GatewayError;

/// Reads the secret key that signs the trail's checkpoints (from `capability keygen`).
pub fn checkpoint_key(path: &Path) -> Result<Arc<dyn CheckpointSigner>, GatewayError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        GatewayError::Config(format!(
            "cannot read the checkpoint key {}: {e}",
            path.display()
        ))
    })?;
    let key = SecretKey::from_text(&text).map_err(|e| {
        GatewayError::Config(format!(
            "{} is not a secret key from `capability keygen`: {e}",
            path.display()
        ))
    })?;
    Ok(Arc::new(key))
}

/// Opens the trail `target` names for the engine of `server` (`gateway`, or a proxy's server)
/// and `role`, signing checkpoints
/// with `signer` when there is one.
///
/// A JSON Lines file holds one writer's chain, so its writer is stable across runs:
/// `proxy:<server>/<role>`; the file is locked while the proxy runs, so a second proxy given
/// the same file is refused, and so is another role's (its chain is another writer's): the
/// error says which stores take many writers, and how to make one. A store keeps one chain
/// per writer, and two live writers must not
/// share one: there the writer also names this process and its start,
/// `proxy:<server>/<role>/<pid>-<start>`. A store must exist and be migrated (`capability db
/// migrate`): the proxy creates no database.
pub fn open(
    target: &str,
    server: &str,
    role: &str,
    signer: Option<Arc<dyn CheckpointSigner>>,
) -> Result<Arc<dyn AuditSink>, GatewayError> {
    let signer = signer.map(|signer| (signer, CheckpointEvery::default()));
    opened(target, server, role, signer, &[]).map_err(GatewayError::Config)
}

/// [`open`] for the engine `server` serving `role` ([`crate::Front::role`]), the checkpoints
/// signed with the secret key in the file `key` (when given) and, while the trail is written,
/// each tree checkpoint submitted to each witness of `witnesses` (their submission URLs) in the
/// background, its cosignature stored beside it ([`capability_http::witness::WitnessFeed`]).
/// The checkpoints come `every` so many records or so long, idle or not. Witnesses take a key.
pub fn open_witnessed(
    target: &str,
    (server, role): (&str, &str),
    (key, every): (Option<&Path>, CheckpointEvery),
    witnesses: &[String],
) -> Result<Arc<dyn AuditSink>, GatewayError> {
    let signer = key.map(checkpoint_key).transpose()?;
    let signer = signer.map(|signer| (signer, every));
    if !witnesses.is_empty() && signer.is_none() {
        return Err(GatewayError::Config(
            "--witness takes --checkpoint-key: a witness cosigns the checkpoints it signs".into(),
        ));
    }
    opened(target, server, role, signer, witnesses).map_err(GatewayError::Config)
}

fn opened(
    target: &str,
    server: &str,
    role: &str,
    signer: Option<(Arc<dyn CheckpointSigner>, CheckpointEvery)>,
    witnesses: &[String],
) -> Result<Arc<dyn AuditSink>, String> {
    let writer = format!("proxy:{server}/{role}");
    match target_kind(target) {
        TargetKind::Jsonl => {
            let one_writer = |e: String| {
                format!(
                    "cannot open the audit trail {target}: {e}. A JSON Lines trail takes one \
                     writer (one role of one gateway or proxy): give each its own file, or \
                     give them all a store that takes many writers, SQLite on one host or \
                     PostgreSQL across hosts: `capability db migrate state.db`, then `--audit \
                     state.db` (or `capability db migrate postgres://user@host/db`, then \
                     `--audit postgres://user@host/db`)"
                )
            };
            // The trail's own error names it once: "cannot open the audit trail <target>: ..."
            // with the system's reason, a broken trail as its own error says it.
            let mut sink = JsonlSink::open(target, FlushPolicy::EveryRecord)
                .map_err(|e| match &e {
                    AuditError::Io { message, .. } if message.starts_with(TAKEN) => {
                        one_writer(message.clone())
                    }
                    AuditError::Io { message, .. } => {
                        format!("cannot open the audit trail {target}: {message}")
                    }
                    _ => e.to_string(),
                })?
                .with_writer(writer)
                .map_err(|e| match e {
                    AuditError::Io { message, .. } => one_writer(message),
                    other => one_writer(other.to_string()),
                })?;
            if let Some((signer, every)) = signer {
                sink = sink.with_checkpoints(signer, every);
            }
            let sink = Arc::new(sink);
            if !witnesses.is_empty() {
                feed_witnesses(&sink, target, witnesses)?;
            }
            // A tree checkpoint every interval when idle too: a missing one is a finding.
            capability::audit::jsonl::keep_idle_checkpoints(&sink);
            Ok(sink)
        }
        kind => witnessed_store_sink(target, kind, &writer, signer, witnesses),
    }
}

/// Has `witnesses` cosign each tree checkpoint `sink` writes, in the background, and stores
/// their cosignatures with it.
fn feed_witnesses(sink: &Arc<JsonlSink>, target: &str, witnesses: &[String]) -> Result<(), String> {
    let weak = Arc::downgrade(sink);
    let store: Arc<StoreCosigned> = Arc::new(move |note: &SignedCheckpoint| {
        weak.upgrade().map_or(Ok(false), |sink| {
            sink.store_cosigned(note).map_err(|e| e.to_string())
        })
    });
    let feed = WitnessFeed::start(witnesses, jsonl_tree(target.into()), store);
    match sink.feed_checkpoints(Arc::new(feed)) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "{target}: this writer keeps no tree, so it has no checkpoints for witnesses"
        )),
        Err(e) => Err(format!("cannot submit the checkpoints of {target}: {e}")),
    }
}

/// Witnesses cosigning a store's tree checkpoints, the cosigned ones stored over the stored
/// note through a connection of their own (so the `stopped` one is stored too).
fn store_feed(target: &str, witnesses: &[String]) -> Result<Arc<dyn CheckpointFeed>, String> {
    let shown = redact_url(target);
    let store: Arc<dyn capability_store::Store> = capability_store::open(target)
        .map_err(|e| format!("cannot open the audit trail {shown}: {}", e.message))?
        .into();
    let reader = store.clone();
    let read_tree: Arc<ReadTree> = Arc::new(move |origin: &str| {
        let trail = reader.read_trail().map_err(|e| e.to_string())?;
        let writer = origin.strip_prefix("capability/").unwrap_or(origin);
        Ok(capability::audit::tlog::writer_tree(&trail.records, writer))
    });
    let store: Arc<StoreCosigned> = Arc::new(move |note: &SignedCheckpoint| {
        store.store_cosigned(note).map_err(|e| e.to_string())
    });
    Ok(Arc::new(WitnessFeed::start(witnesses, read_tree, store)))
}

/// A store's sink with a chain of its own: `<writer>/<pid>-<start>`. The store must exist and
/// be migrated.
pub(crate) fn store_sink(
    target: &str,
    kind: TargetKind,
    writer: &str,
    signer: Option<Arc<dyn CheckpointSigner>>,
) -> Result<Arc<dyn AuditSink>, String> {
    let signer = signer.map(|signer| (signer, CheckpointEvery::default()));
    witnessed_store_sink(target, kind, writer, signer, &[])
}

/// [`store_sink`], its tree checkpoints cosigned by `witnesses` as they are stored.
fn witnessed_store_sink(
    target: &str,
    kind: TargetKind,
    writer: &str,
    signer: Option<(Arc<dyn CheckpointSigner>, CheckpointEvery)>,
    witnesses: &[String],
) -> Result<Arc<dyn AuditSink>, String> {
    let shown = redact_url(target);
    if kind == TargetKind::Sqlite && !Path::new(target).exists() {
        return Err(format!(
            "the audit trail {shown} does not exist: give a `.jsonl` file, or create a database \
             with `capability db migrate {shown}`"
        ));
    }
    let store = capability_store::open(target)
        .map_err(|e| format!("cannot open the audit trail {shown}: {}", e.message))?;
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut options = SinkOptions::writer(format!("{writer}/{}-{start}", std::process::id()));
    options.checkpoints = signer;
    if !witnesses.is_empty() {
        options.feed = Some(store_feed(target, witnesses)?);
    }
    // Named once: a store's error names it as `sqlite:<path>`, which the operator did not type.
    store.audit_sink(options).map_err(|e| match e {
        AuditError::Store { message, .. } => {
            format!("cannot open the audit trail {shown}: {message}")
        }
        AuditError::Io { .. } | AuditError::Unread { .. } | AuditError::Broken { .. } => {
            e.to_string()
        }
        other => format!("cannot open the audit trail {shown}: {other}"),
    })
}

/// Opens the trail `target` for one record written outside the engine (`capability pin
/// --approve`'s re-pin): a JSON Lines file is extended on its own chain, whoever its writer
/// (`writer` names the chain of a file that is new or empty), and is locked meanwhile, so a
/// file a running gateway writes is refused (give the gateway and the command a store); a store
/// gets a chain of its own, `<writer>/<pid>-<start>`. Either way the record is chained like
/// every other, and `capability audit verify` checks it.
pub fn open_for_record(target: &str, writer: &str) -> Result<Arc<dyn AuditSink>, String> {
    match target_kind(target) {
        TargetKind::Jsonl => {
            let fresh = std::fs::metadata(target).map_or(true, |m| m.len() == 0);
            let sink = JsonlSink::open(target, FlushPolicy::EveryRecord)
                .map_err(|e| format!("cannot open the audit trail {target}: {e}"))?;
            let sink = if fresh {
                sink.with_writer(writer)
                    .map_err(|e| format!("cannot open the audit trail {target}: {e}"))?
            } else {
                sink
            };
            Ok(Arc::new(sink))
        }
        kind => store_sink(target, kind, writer, None),
    }
}
