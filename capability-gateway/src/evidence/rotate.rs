//! `capability audit rotate`: a JSON Lines trail's writer hands its checkpoint key over to the
//! next, in a statement the old key signs, written as a record of the trail itself.

use std::path::Path;
use std::sync::Arc;

use capability::audit::tlog::keys::ROTATION_METHOD;
use capability::audit::tlog::{self, KeyRotation};
use capability::audit::{
    AuditSink, AuditedDispatch, Caller, CheckpointEvery, FlushPolicy, JsonlSink, Reason, Subject,
};
use capability::gate::SecretKey;
use capability_store::{TargetKind, target_kind};
use serde_json::json;

use super::{public_key, read};

/// Hands the log of the JSON Lines trail `trail` (its writer's) over from the secret key
/// `old_key` to the public key `new_key` at the tree size that includes the statement's own
/// record: the old key signs the statement, the trail gets it as a notice
/// [`ROTATION_METHOD`], and the old key signs the checkpoint that covers it (its last). The
/// writer then signs with the new key. Refused while the trail's writer has it open (its lock),
/// for a broken trail, and for a store (each run of a store's writer is a log of its own: start
/// it with the new key).
pub fn rotate(trail: &Path, old_key: &Path, new_key: &Path) -> Result<KeyRotation, String> {
    let shown = trail.display();
    if target_kind(&trail.to_string_lossy()) != TargetKind::Jsonl {
        return Err(format!(
            "{shown}: a store's writers start a log of their own each run: give the next runs \
             the new key (`audit verify --key old.pub --key new.pub`); `audit rotate` hands a \
             JSON Lines trail's log over"
        ));
    }
    let old =
        SecretKey::from_text(&read(old_key)?).map_err(|e| format!("{}: {e}", old_key.display()))?;
    let new = public_key(new_key)?;
    let sink = JsonlSink::open(trail, FlushPolicy::EveryRecord)
        .map_err(|e| format!("cannot open the audit trail {shown}: {e}"))?;
    let (_, report) = capability::audit::read_jsonl(trail).map_err(|e| e.to_string())?;
    if report.writer.is_empty() {
        return Err(format!("{shown}: no record yet, so no log to hand over"));
    }
    let origin = tlog::origin(&report.writer).map_err(|e| e.to_string())?;
    let size = report.records + 1;
    let new_hex = capability::audit::CheckpointVerifier::public_key_hex(&new);
    let rotation = KeyRotation::sign(&origin, size, &new_hex, &old).map_err(|e| e.to_string())?;
    let sink: Arc<dyn AuditSink> =
        Arc::new(sink.with_checkpoints(Arc::new(old), CheckpointEvery::default()));
    let input = json!({"statement": rotation.to_text(), "origin": origin, "size": size});
    let why = format!("the log's checkpoint key hands over at size {size}");
    AuditedDispatch::new(sink.clone())
        .notice(
            &Subject::new("(audit)", "audit:keys"),
            Caller::new("capability audit rotate"),
            ROTATION_METHOD,
            &origin,
            &input,
            Reason::note("key_rotated", why),
        )
        .and_then(|_| sink.close())
        .map_err(|e| format!("{shown}: {e}"))?;
    Ok(rotation)
}
