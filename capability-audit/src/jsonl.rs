//! The JSON Lines sink: one canonical line per record, hash-chained, on a local file.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::verify::CheckpointLine;
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
///
/// With [`with_checkpoints`](Self::with_checkpoints) it also signs [`Checkpoint`]s, written as
/// lines `{"checkpoint":{...}}` between the records, on a schedule and when it closes (or is
/// dropped): [`verify_jsonl_with_key`] then detects a cut-off tail and a recomputed chain.
pub struct JsonlSink {
    path: PathBuf,
    /// `path` made absolute when the sink opened it, so a later change of the process's working
    /// directory does not make the file look removed.
    named: PathBuf,
    policy: FlushPolicy,
    state: Mutex<FileState>,
    key: SinkKey,
    writer: String,
    signer: Option<Arc<dyn CheckpointSigner>>,
}

impl fmt::Debug for JsonlSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonlSink")
            .field("path", &self.path)
            .field("policy", &self.policy)
            .field("writer", &self.writer)
            .field("signs_checkpoints", &self.signer.is_some())
            .finish_non_exhaustive()
    }
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
    /// The writer of the records already in the file.
    file_writer: String,
    /// The `seq` of the last checkpoint (in the file, or appended).
    checkpointed: u64,
    last_checkpoint: Option<Checkpoint>,
    schedule: Option<CheckpointSchedule>,
    closed: bool,
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
        let (seq, prev, file_writer, last_checkpoint) = match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() && meta.len() > 0 => {
                let report = verify_jsonl(&path)?;
                if let Some(problem) = report.problem {
                    return Err(AuditError::Broken {
                        path: path.display().to_string(),
                        problem,
                    });
                }
                let last = report.checkpoints.last().cloned();
                (report.records, report.last_hash, report.writer, last)
            }
            _ => (0, GENESIS.to_owned(), String::new(), None),
        };
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        file.seek(SeekFrom::End(0)).map_err(io)?;
        let named = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
        Ok(JsonlSink {
            path,
            named,
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
                file_writer,
                checkpointed: last_checkpoint.as_ref().map_or(0, |c| c.seq),
                last_checkpoint,
                schedule: None,
                closed: false,
            }),
            key: SinkKey::default(),
            writer: String::new(),
            signer: None,
        })
    }

    /// Names this sink's writer: its records carry `writer` (see [`AuditRecord::writer`]). A
    /// file holds one writer's chain: an existing trail of another writer is refused.
    pub fn with_writer(mut self, writer: impl Into<String>) -> Result<Self, AuditError> {
        let writer = writer.into();
        let state = lock(&self.state);
        if state.seq > 0 && state.file_writer != writer {
            return Err(AuditError::InvalidRecord {
                message: format!(
                    "the trail {} holds the chain of writer {:?}, not {writer:?}: a file holds \
                     one writer's chain",
                    self.path.display(),
                    state.file_writer
                ),
            });
        }
        drop(state);
        self.writer = writer;
        Ok(self)
    }

    /// Signs a [`Checkpoint`] of the chain with `signer` at the points of `every`, and when the
    /// sink closes or is dropped, and writes it into the file as a line `{"checkpoint":{...}}`.
    /// Each one is also a `tracing` event (target `capability::audit`, message `checkpoint`):
    /// keep the latest elsewhere too, so that a cut of the file's end that also removes the
    /// checkpoints after it is caught ([`verify_jsonl_with_checkpoints`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use capability::audit::{AuditSink, CheckpointEvery, FlushPolicy, JsonlSink};
    /// use capability::audit::verify_jsonl_with_key;
    /// use capability::gate::SecretKey;
    ///
    /// # let dir = std::env::temp_dir().join(format!("jsonl-cp-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let path = dir.join("audit.jsonl");
    /// let key = SecretKey::generate()?;
    /// let public = key.public_key();
    /// let sink = JsonlSink::open(&path, FlushPolicy::EveryRecord)?
    ///     .with_checkpoints(Arc::new(key), CheckpointEvery::default());
    /// // ... calls through an AuditedDispatch on the sink ...
    /// sink.close()?; // the final checkpoint
    /// assert!(verify_jsonl_with_key(&path, &public)?.is_intact());
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_checkpoints(
        mut self,
        signer: Arc<dyn CheckpointSigner>,
        every: CheckpointEvery,
    ) -> Self {
        {
            let mut state = lock(&self.state);
            state.schedule = Some(CheckpointSchedule::new(every, state.checkpointed));
        }
        self.signer = Some(signer);
        self
    }

    /// The last checkpoint this sink signed (or found at the end of the file).
    pub fn last_checkpoint(&self) -> Option<Checkpoint> {
        lock(&self.state).last_checkpoint.clone()
    }

    fn closed(&self) -> AuditError {
        AuditError::Io {
            path: self.path.display().to_string(),
            message: "the sink is closed".to_owned(),
        }
    }

    /// Signs a checkpoint of the chain as it is and appends its line to the buffer.
    fn checkpoint(&self, state: &mut FileState) {
        let Some(signer) = &self.signer else { return };
        let checkpoint = Checkpoint::sign(&self.writer, state.seq, &state.prev, signer.as_ref());
        let mut line = CheckpointLine {
            checkpoint: checkpoint.clone(),
        }
        .to_line()
        .into_bytes();
        line.push(b'\n');
        state.buffer.extend_from_slice(&line);
        state.checkpointed = state.seq;
        if let Some(schedule) = &mut state.schedule {
            schedule.written(state.seq);
        }
        tracing::event!(
            target: "capability::audit",
            tracing::Level::INFO,
            writer = %checkpoint.writer,
            seq = checkpoint.seq,
            head = %checkpoint.head,
            time = %checkpoint.time,
            key = %checkpoint.key,
            signature = %checkpoint.signature,
            "checkpoint"
        );
        state.last_checkpoint = Some(checkpoint);
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

impl JsonlSink {
    /// Whether the trail's path still names the file this sink writes: a trail removed or
    /// replaced (moved away, rotated, deleted) since it was opened would take records no one
    /// will read, so it counts as a trail that cannot be written. The path is the one the sink
    /// opened, made absolute then. Other errors of looking it up (a directory made unreadable)
    /// say nothing about the file, and pass.
    #[cfg(unix)]
    fn still_named(&self, file: &File) -> Result<(), AuditError> {
        use std::os::unix::fs::MetadataExt;
        let gone = |what: &str| AuditError::Io {
            path: self.path.display().to_string(),
            message: format!(
                "the file was {what} since this sink opened it; records written now would be \
                 lost (restart the writer to open the trail again)"
            ),
        };
        match (file.metadata(), std::fs::metadata(&self.named)) {
            (Ok(open), Ok(named)) if open.dev() != named.dev() || open.ino() != named.ino() => {
                Err(gone("replaced by another file"))
            }
            (_, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Err(gone("removed")),
            _ => Ok(()),
        }
    }

    #[cfg(not(unix))]
    fn still_named(&self, _file: &File) -> Result<(), AuditError> {
        Ok(())
    }
}

impl AuditSink for JsonlSink {
    fn append(&self, mut record: AuditRecord) -> Result<AuditRecord, AuditError> {
        let mut state = lock(&self.state);
        if state.closed {
            return Err(self.closed());
        }
        record.writer.clone_from(&self.writer);
        record.seq = state.seq + 1;
        record.prev = state.prev.clone();
        let mut line = record.seal().into_bytes();
        line.push(b'\n');
        state.buffer.extend_from_slice(&line);
        state.pending += 1;
        state.seq = record.seq;
        state.prev = record.hash.clone();
        if state.schedule.as_ref().is_some_and(|s| s.due(record.seq)) {
            self.checkpoint(&mut state);
        }
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
        if state.closed {
            return Err(self.closed());
        }
        if state.failed {
            self.write_out(&mut state)
        } else {
            self.still_named(&state.file)
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
        // Checkpoints of dropped records went with them.
        if state.checkpointed > state.seq {
            state.checkpointed = state.seq;
            state.last_checkpoint = None;
            let seq = state.seq;
            if let Some(schedule) = &mut state.schedule {
                schedule.written(seq);
            }
        }
        dropped
    }

    fn close(&self) -> Result<(), AuditError> {
        let mut state = lock(&self.state);
        self.close_state(&mut state)
    }

    fn digest_key(&self) -> Result<&DigestKey, AuditError> {
        self.key.get()
    }
}

impl JsonlSink {
    /// Stops the sink: the final checkpoint (if it signs them and records came since the last),
    /// and everything pending written. Appends are refused from then on.
    fn close_state(&self, state: &mut FileState) -> Result<(), AuditError> {
        state.closed = true;
        if state.seq > state.checkpointed {
            self.checkpoint(state);
        }
        self.write_out(state)
    }
}

impl Drop for JsonlSink {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        let _ = self.close_state(&mut state);
    }
}
