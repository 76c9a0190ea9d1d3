//! `capability audit rotate`: a JSON Lines trail's writer hands its checkpoint key over to the
//! next, in a statement the old key signs, written as a record of the trail itself; a store's
//! key hands over between its writers' runs, at a place in its chain of registrations
//! (`tlog::store_keys`), in a statement recorded by a writer of its own.

use std::path::Path;
use std::sync::Arc;

use capability::audit::tlog::keys::ROTATION_METHOD;
use capability::audit::tlog::store_keys::{STORE_ORIGIN, registration_places};
use capability::audit::tlog::writers::registration_hash;
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
/// and for a broken trail. A store's key is handed over between its writers' runs instead
/// (`rotate_store`).
pub fn rotate(trail: &Path, old_key: &Path, new_key: &Path) -> Result<KeyRotation, String> {
    let shown = trail.display();
    let old =
        SecretKey::from_text(&read(old_key)?).map_err(|e| format!("{}: {e}", old_key.display()))?;
    let new = public_key(new_key)?;
    let target = trail.to_string_lossy();
    let kind = target_kind(&target);
    if kind != TargetKind::Jsonl {
        return rotate_store(&target, kind, old, &new);
    }
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

/// Hands the store `target`'s checkpoint key over from `old` to `new` at the registration after
/// the next one: a writer of its own (`audit-rotation/<pid>-<start>`), registered next and
/// signed by `old`, records the statement (a notice [`ROTATION_METHOD`] whose log is
/// [`STORE_ORIGIN`]); every writer registered after it must sign with `new`
/// (`audit verify --key old.pub --key new.pub`). Refused when another writer registered in the
/// meantime, which would leave its key on the wrong side of the hand-over: run it again.
fn rotate_store(
    target: &str,
    kind: TargetKind,
    old: SecretKey,
    new: &capability::gate::PublicKey,
) -> Result<KeyRotation, String> {
    let shown = capability_store::redact_url(target);
    let registered = |store: &dyn capability_store::Store| -> Result<Vec<String>, String> {
        let trail = store.read_trail().map_err(|e| format!("{shown}: {e}"))?;
        Ok(trail.writers.into_iter().map(|w| w.note).collect())
    };
    let store = super::open_store(target)?;
    let before = registered(store.as_ref())?;
    let last = registration_places(&before)
        .into_values()
        .max()
        .unwrap_or(0);
    // The rotation's own writer is the next registration; the new key signs the one after.
    let (own_place, size) = (last + 1, last + 2);
    let new_hex = capability::audit::CheckpointVerifier::public_key_hex(new);
    let rotation =
        KeyRotation::sign(STORE_ORIGIN, size, &new_hex, &old).map_err(|e| e.to_string())?;
    let sink = crate::trail::store_sink(target, kind, "audit-rotation", Some(Arc::new(old)))?;
    let input = json!({"statement": rotation.to_text(), "origin": STORE_ORIGIN, "size": size});
    let why = format!("the store's checkpoint key hands over at its registration {size}");
    AuditedDispatch::new(sink.clone())
        .notice(
            &Subject::new("(audit)", "audit:keys"),
            Caller::new("capability audit rotate"),
            ROTATION_METHOD,
            STORE_ORIGIN,
            &input,
            Reason::note("key_rotated", why),
        )
        .and_then(|_| sink.close())
        .map_err(|e| format!("{shown}: {e}"))?;
    let after = registered(store.as_ref())?;
    let places = registration_places(&after);
    let mine = after
        .iter()
        .filter(|note| !before.contains(note))
        .map(|note| places.get(&registration_hash(note)).copied())
        .collect::<Vec<_>>();
    if mine != [Some(own_place)] {
        return Err(format!(
            "{shown}: another writer registered while the rotation did (registrations {:?} \
             where the rotation's own was to be {own_place}): the statement recorded hands over \
             at a place another writer may hold; run `capability audit rotate` again",
            mine
        ));
    }
    Ok(rotation)
}
