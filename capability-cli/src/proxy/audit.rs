//! The proxy's audit trail: a JSON Lines file, or a store (SQLite, PostgreSQL), opened the way
//! `capability audit verify` reads them.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use capability::audit::{AuditSink, FlushPolicy, JsonlSink};
use capability_store::{SinkOptions, TargetKind, redact_url, target_kind};

/// Opens the trail `target` names for the proxy of `server` and `role`.
///
/// A JSON Lines file holds one writer's chain, so its writer is stable across runs:
/// `proxy:<server>/<role>` (two proxies must not write one file at once). A store keeps one
/// chain per writer, and two live writers must not share one: there the writer also names this
/// process and its start, `proxy:<server>/<role>/<pid>-<start>`. A store must exist and be
/// migrated (`capability db migrate`): the proxy creates no database.
pub(super) fn open(target: &str, server: &str, role: &str) -> Result<Arc<dyn AuditSink>, String> {
    let writer = format!("proxy:{server}/{role}");
    match target_kind(target) {
        TargetKind::Jsonl => {
            let sink = JsonlSink::open(target, FlushPolicy::EveryRecord)
                .and_then(|sink| sink.with_writer(writer))
                .map_err(|e| format!("cannot open the audit trail {target}: {e}"))?;
            Ok(Arc::new(sink))
        }
        kind => {
            let shown = redact_url(target);
            if kind == TargetKind::Sqlite && !Path::new(target).exists() {
                return Err(format!(
                    "the audit trail {shown} does not exist: give a `.jsonl` file, or create a \
                     database with `capability db migrate {shown}`"
                ));
            }
            let store = capability_store::open(target)
                .map_err(|e| format!("cannot open the audit trail {shown}: {e}"))?;
            let start = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let writer = format!("{writer}/{}-{start}", std::process::id());
            store
                .audit_sink(SinkOptions::writer(writer))
                .map_err(|e| format!("cannot write the audit trail {shown}: {e}"))
        }
    }
}
