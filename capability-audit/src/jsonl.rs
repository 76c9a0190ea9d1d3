//! The JSON Lines sink: one canonical line per record, hash-chained, on a local file.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::*;

/// When a [`JsonlSink`] hands its lines to the operating system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Each record is written with one `write` call as soon as it is appended: a process that
    /// is killed loses at most the record being written. The default.
    EveryRecord,
    /// Records are buffered and written every `n` records (and on drop): faster, and a killed
    /// process loses up to `n` records.
    Every(u32),
}

/// A JSON Lines file sink: one record per line, hash-chained (each record carries the hash of
/// the previous one), so an edited, removed or reordered record is detected by
/// [`verify_jsonl`].
#[derive(Debug)]
pub struct JsonlSink {
    path: PathBuf,
    policy: FlushPolicy,
    state: Mutex<FileState>,
    key: SinkKey,
}

#[derive(Debug)]
struct FileState {
    file: File,
    /// Lines appended but not yet written.
    buffer: Vec<u8>,
    pending: u32,
    /// The last record appended (written or pending).
    seq: u64,
    prev: String,
    /// The last record written.
    written_seq: u64,
    written_prev: String,
    failed: bool,
}

impl JsonlSink {
    /// Opens (or creates) a trail for appending. An existing trail is verified first, and a
    /// broken one is refused: appending would hide where it broke.
    ///
    /// Its digests are keyed with a random key of this sink alone unless you give one with
    /// [`with_digest_key`](Self::with_digest_key); verifying the trail needs no key.
    pub fn open(path: impl AsRef<Path>, policy: FlushPolicy) -> Result<JsonlSink, AuditError> {
        let path = path.as_ref().to_path_buf();
        let io = |e: std::io::Error| AuditError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let (seq, prev) = match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() && meta.len() > 0 => {
                let report = verify_jsonl(&path)?;
                if let Some(problem) = report.problem {
                    return Err(AuditError::Broken {
                        path: path.display().to_string(),
                        problem,
                    });
                }
                (report.records, report.last_hash)
            }
            _ => (0, GENESIS.to_owned()),
        };
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        file.seek(SeekFrom::End(0)).map_err(io)?;
        Ok(JsonlSink {
            path,
            policy,
            state: Mutex::new(FileState {
                file,
                buffer: Vec::new(),
                pending: 0,
                seq,
                prev: prev.clone(),
                written_seq: seq,
                written_prev: prev,
                failed: false,
            }),
            key: SinkKey::default(),
        })
    }

    /// Uses `key` for the keyed digests of the records (sensitive fields, input and output
    /// digests): give the same key to every sink of a trail for its digests to correlate.
    ///
    /// ```
    /// use capability::audit::{DigestKey, FlushPolicy, JsonlSink};
    ///
    /// # let dir = std::env::temp_dir().join(format!("jsonl-key-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let key_file = dir.join("digest.key");
    /// # std::fs::write(&key_file, format!("{}\n", DigestKey::generate()?.expose_hex()))?;
    /// let key = DigestKey::from_hex(&std::fs::read_to_string(&key_file)?)?;
    /// let sink = JsonlSink::open(dir.join("audit.jsonl"), FlushPolicy::EveryRecord)?
    ///     .with_digest_key(key);
    /// # drop(sink);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_digest_key(mut self, key: DigestKey) -> Self {
        self.key = SinkKey::configured(key);
        self
    }

    /// Writes buffered records out.
    pub fn flush(&self) -> Result<(), AuditError> {
        let mut state = lock(&self.state);
        self.write_out(&mut state)
    }

    fn write_out(&self, state: &mut FileState) -> Result<(), AuditError> {
        if state.buffer.is_empty() {
            return Ok(());
        }
        let file_len = state.file.metadata().map(|m| m.len()).ok();
        match state
            .file
            .write_all(&state.buffer)
            .and_then(|()| state.file.flush())
        {
            Ok(()) => {
                state.buffer.clear();
                state.pending = 0;
                state.written_seq = state.seq;
                state.written_prev = state.prev.clone();
                state.failed = false;
                Ok(())
            }
            Err(error) => {
                // Take back a partial write, so a retry does not leave half a line behind.
                if let Some(len) = file_len {
                    let _ = state.file.set_len(len);
                }
                state.failed = true;
                Err(AuditError::Io {
                    path: self.path.display().to_string(),
                    message: error.to_string(),
                })
            }
        }
    }
}

impl AuditSink for JsonlSink {
    fn append(&self, mut record: AuditRecord) -> Result<AuditRecord, AuditError> {
        let mut state = lock(&self.state);
        record.seq = state.seq + 1;
        record.prev = state.prev.clone();
        let mut line = record.seal().into_bytes();
        line.push(b'\n');
        state.buffer.extend_from_slice(&line);
        state.pending += 1;
        state.seq = record.seq;
        state.prev = record.hash.clone();
        let due = state.failed
            || match self.policy {
                FlushPolicy::EveryRecord => true,
                FlushPolicy::Every(n) => state.pending >= n.max(1),
            };
        if due {
            self.write_out(&mut state)?;
        }
        Ok(record)
    }

    fn ready(&self) -> Result<(), AuditError> {
        let mut state = lock(&self.state);
        if state.failed {
            self.write_out(&mut state)
        } else {
            Ok(())
        }
    }

    fn discard_pending(&self) -> u64 {
        let mut state = lock(&self.state);
        let dropped = state.seq - state.written_seq;
        state.buffer.clear();
        state.pending = 0;
        state.seq = state.written_seq;
        state.prev = state.written_prev.clone();
        state.failed = false;
        dropped
    }

    fn digest_key(&self) -> Result<&DigestKey, AuditError> {
        self.key.get()
    }
}

impl Drop for JsonlSink {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        let _ = self.write_out(&mut state);
    }
}
