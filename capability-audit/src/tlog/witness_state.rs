//! A witness's state file: the last checkpoint cosigned per log, signed by the witness key.
//!
//! ```text
//! {"format":"capability-witness-state/v1","witness":"<vkey>","logs":{"<origin>":"<note>"},
//!  "signature":"<hex>"}
//! ```
//!
//! Written whole to a temporary file beside it, synced, then renamed over it (and the folder
//! synced), so a crash leaves the old state or the new one, never half of either. Read back, it
//! must parse, name this witness's key, and carry the witness's signature over its logs
//! (checked by signing again: Ed25519 signatures are deterministic), so a torn or edited file is
//! an error that names the file, never a silent fresh start that would let a fork through.
//! What it cannot catch: the whole file replaced by an older copy the witness wrote itself.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::cosignature::Cosigner;
use super::error::WitnessError;
use super::note::SignedCheckpoint;

/// The `format` of a witness state file.
pub const STATE_FORMAT: &str = "capability-witness-state/v1";

/// The largest state file read (a few hundred bytes per log).
const MAX_STATE_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    format: String,
    witness: String,
    logs: BTreeMap<String, String>,
    signature: String,
}

fn signed_message(witness: &str, logs: &BTreeMap<String, String>) -> Result<Vec<u8>, String> {
    let logs = serde_json::to_string(logs).map_err(|e| e.to_string())?;
    Ok(format!("{STATE_FORMAT}\n{witness}\n{logs}").into_bytes())
}

/// Reads the state at `path`: empty when there is no file; an error naming the file and what
/// is wrong when it cannot be read, does not parse, is another witness's, or was edited.
pub fn load_state(
    path: &Path,
    cosigner: &Cosigner,
) -> Result<BTreeMap<String, SignedCheckpoint>, WitnessError> {
    let at = path.display();
    let error = |why: String| WitnessError::State(format!("witness state {at}: {why}"));
    let text = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(error(format!("cannot read it: {e}"))),
        Ok(m) if m.len() > MAX_STATE_BYTES => {
            return Err(error(format!("larger than {MAX_STATE_BYTES} bytes")));
        }
        Ok(_) => {
            std::fs::read_to_string(path).map_err(|e| error(format!("cannot read it: {e}")))?
        }
    };
    let file: StateFile = serde_json::from_str(&text).map_err(|e| {
        error(format!(
            "not a state file (torn or edited?): {e}; the witness will not start afresh over \
             it: restore it, or move it away knowingly"
        ))
    })?;
    if file.format != STATE_FORMAT {
        return Err(error(format!(
            "format {:?}, not {STATE_FORMAT:?}",
            file.format
        )));
    }
    if file.witness != cosigner.vkey() {
        return Err(error(format!(
            "kept by witness key {}, not this one ({})",
            file.witness,
            cosigner.vkey()
        )));
    }
    let message = signed_message(&file.witness, &file.logs).map_err(error)?;
    if cosigner.sign_raw(&message) != file.signature {
        return Err(error(
            "edited: the witness's signature over its logs does not verify (the file was \
             changed outside the witness); restore it, or move it away knowingly"
                .into(),
        ));
    }
    file.logs
        .iter()
        .map(|(origin, note)| {
            let checkpoint = SignedCheckpoint::parse(note)
                .map_err(|e| error(format!("the checkpoint of {origin}: {e}")))?;
            if &checkpoint.head.origin != origin {
                return Err(error(format!(
                    "the checkpoint kept under {origin} is of another log"
                )));
            }
            Ok((origin.clone(), checkpoint))
        })
        .collect()
}

/// Writes the state to `path` atomically (a temporary file beside it, synced, renamed over).
pub fn save_state(
    path: &Path,
    cosigner: &Cosigner,
    held: &BTreeMap<String, SignedCheckpoint>,
) -> Result<(), WitnessError> {
    let at = path.display();
    let error = |why: String| WitnessError::State(format!("witness state {at}: {why}"));
    let logs: BTreeMap<String, String> =
        held.iter().map(|(o, c)| (o.clone(), c.to_text())).collect();
    let witness = cosigner.vkey();
    let message = signed_message(&witness, &logs).map_err(error)?;
    let file = StateFile {
        format: STATE_FORMAT.to_owned(),
        signature: cosigner.sign_raw(&message),
        witness,
        logs,
    };
    let mut text = serde_json::to_string_pretty(&file).map_err(|e| error(e.to_string()))?;
    text.push('\n');
    let name = path
        .file_name()
        .ok_or_else(|| error("not a file name".into()))?;
    let mut temporary = name.to_owned();
    temporary.push(".tmp");
    let temporary = path.with_file_name(temporary);
    let write = || -> std::io::Result<()> {
        let mut out = std::fs::File::create(&temporary)?;
        out.write_all(text.as_bytes())?;
        out.sync_all()?;
        std::fs::rename(&temporary, path)?;
        let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
        if let Ok(folder) = std::fs::File::open(folder.unwrap_or(Path::new("."))) {
            // Not every platform syncs a folder; the rename is what must last.
            let _ = folder.sync_all();
        }
        Ok(())
    };
    write().map_err(|e| error(format!("cannot write it: {e}")))
}
