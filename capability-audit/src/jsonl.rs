//! The JSON Lines sink: one canonical line per record, hash-chained, on a local file.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::*;

mod lock;
mod named;
mod signing;
mod witnessing;
use named::identity;
pub use signing::keep_idle_checkpoints;
pub use witnessing::CheckpointFeed;

/// The longest a sink with a watch on its path goes without looking the path up.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// When a [`JsonlSink`] hands its lines to the operating system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Each record is written with one `write` call as soon as it is appended: a process that
    /// is killed loses at most the record being written. The default.
    EveryRecord,
    /// Records are buffered and written every `n` records (and on drop): faster, and a killed
    /// process, or a write that fails, loses up to `n` records. An intent (the record that
    /// lets a call run) is never buffered: it is written, with everything before it, before
    /// `append` returns, so no call runs before its intent is in the file.
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
    /// The open file's device and inode (they do not change while it is open), to tell whether
    /// the trail's path still names it.
    identity: Option<(u64, u64)>,
    /// What happens to the trail's path, where it can be watched.
    watch: Option<named::Watch>,
    /// When the path was last looked up and still named the file (`None`: look next time).
    looked: Option<std::time::Instant>,
    /// Lines sealed but not yet written (under [`FlushPolicy::Every`]).
    buffer: Vec<u8>,
    pending: u32,
    /// The chain, committed up to the last record written.
    head: ChainHead,
    /// A write failed and its partial line could not be taken back: the file may end in half
    /// a line, so nothing more is appended to it.
    broken: Option<String>,
    /// The `seq` of the last checkpoint (in the file, or appended).
    checkpointed: u64,
    last_checkpoint: Option<Checkpoint>,
    schedule: Option<CheckpointSchedule>,
    /// The writer's tree, kept while the sink signs checkpoints (`tlog::stored`).
    tree: Option<crate::tlog::WriterTree>,
    last_tree: Option<crate::tlog::SignedCheckpoint>,
    /// Where tree checkpoints go once written (`witnessing`), and the one in the buffer.
    feed: Option<Arc<dyn CheckpointFeed>>,
    fed: Option<crate::tlog::SignedCheckpoint>,
    closed: bool,
}

/// How the error of [`JsonlSink::open`] starts when another writer has the trail open.
pub const TAKEN: &str = "another writer has this trail open";

impl JsonlSink {
    /// Opens (or creates) a trail for appending. An existing trail is verified first, and a
    /// broken one is refused: appending would hide where it broke.
    ///
    /// The file is locked for this sink while it is open (an advisory lock, `flock` on Unix): a
    /// second writer, in this process or another, is refused with an error naming the trail,
    /// since two writers would each extend the chain from the same last record and break it
    /// (a device, such as `/dev/full`, is not locked: it holds no chain).
    /// A path whose last component is a symbolic link is refused, not followed.
    ///
    /// Its digests are keyed with a random key of this sink alone unless you give one with
    /// [`with_digest_key`](Self::with_digest_key); verifying the trail needs no key.
    pub fn open(path: impl AsRef<Path>, policy: FlushPolicy) -> Result<JsonlSink, AuditError> {
        let path = path.as_ref().to_path_buf();
        let fail = |message: String| AuditError::Io {
            path: path.display().to_string(),
            message,
        };
        let mut options = OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW);
        }
        let mut file = options.open(&path).map_err(|e| {
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                fail(
                    "it is a symbolic link: a trail is written only to the file its own path \
                     names (give the link's target instead)"
                        .to_owned(),
                )
            } else {
                fail(e.to_string())
            }
        })?;
        let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
        // A regular file is locked; a device (`/dev/full`, a terminal) is shared by the whole
        // machine and holds no chain to extend, so locking it would only make unrelated
        // writers wait for each other.
        match if meta.is_file() {
            lock::lock_soon(&file)
        } else {
            Ok(())
        } {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(fail(format!(
                    "{TAKEN}: a JSON Lines trail has one writer at a time (two would both \
                     extend the chain from its last record and break it); stop the other \
                     writer, or give this one a trail of its own"
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(fail(format!("cannot lock it for writing: {e}")));
            }
        }
        let (seq, prev, file_writer, last_checkpoint) = if meta.is_file() && meta.len() > 0 {
            let report = verify_jsonl(&path)?;
            if let Some(problem) = report.problem {
                return Err(AuditError::Broken {
                    path: path.display().to_string(),
                    problem,
                });
            }
            let last = report.checkpoints.last().cloned();
            (report.records, report.last_hash, report.writer, last)
        } else {
            (0, GENESIS.to_owned(), String::new(), None)
        };
        file.seek(SeekFrom::End(0))
            .map_err(|e| fail(e.to_string()))?;
        let named = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
        let watch = named::Watch::new(&named);
        Ok(JsonlSink {
            path,
            named,
            policy,
            state: Mutex::new(FileState {
                file,
                identity: identity(&meta),
                watch,
                looked: None,
                buffer: Vec::new(),
                pending: 0,
                head: ChainHead::new(file_writer.clone(), seq, prev),
                broken: None,
                checkpointed: last_checkpoint.as_ref().map_or(0, |c| c.seq),
                last_checkpoint,
                schedule: None,
                tree: None,
                last_tree: None,
                feed: None,
                fed: None,
                closed: false,
            }),
            key: SinkKey::default(),
            writer: file_writer,
            signer: None,
        })
    }

    /// Names this sink's writer: its records carry `writer` (see [`AuditRecord::writer`]). A
    /// file holds one writer's chain: an existing trail of another writer is refused.
    pub fn with_writer(mut self, writer: impl Into<String>) -> Result<Self, AuditError> {
        let writer = writer.into();
        let mut state = lock(&self.state);
        if state.head.seq() > 0 && state.head.writer() != writer {
            // A trail this writer cannot write (not a record it cannot make): named once, by
            // the error.
            return Err(AuditError::Io {
                path: self.path.display().to_string(),
                message: format!(
                    "it holds the chain of writer {:?}, not {writer:?}: a file holds one \
                     writer's chain",
                    state.head.writer()
                ),
            });
        }
        let (seq, hash) = state.head.committed();
        state.head = ChainHead::new(writer.clone(), seq, hash.to_owned());
        self.writer = writer;
        if self.signer.is_some() {
            self.resume_tree(&mut state);
        }
        drop(state);
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
        self.signer = Some(signer);
        {
            let mut state = lock(&self.state);
            state.schedule = Some(CheckpointSchedule::new(every, state.checkpointed));
            self.resume_tree(&mut state);
        }
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

    /// Writes the buffer out: the records sealed since the last write are then committed. A
    /// write that fails is taken back (the file cut to where it was), and the records of the
    /// buffer are not in the chain; if it cannot be taken back, the sink stops.
    fn write_out(&self, state: &mut FileState) -> Result<(), AuditError> {
        if state.buffer.is_empty() {
            return Ok(());
        }
        let fail = |message: String| AuditError::Io {
            path: self.path.display().to_string(),
            message,
        };
        // No look at the file's length before a write: only a write that fails needs it (to
        // cut the file back), and then it is the length now less what this write added.
        let (mut written, total) = (0, state.buffer.len());
        let wrote = loop {
            match state.file.write(&state.buffer[written..]) {
                Ok(0) => break Err(std::io::Error::from(std::io::ErrorKind::WriteZero)),
                Ok(n) if written + n == total => break state.file.flush(),
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        match wrote {
            Ok(()) => {
                state.buffer.clear();
                state.pending = 0;
                state.head.commit();
                if let Some(tree) = &mut state.tree {
                    tree.commit();
                }
                self.deliver(state);
                Ok(())
            }
            Err(error) => {
                let lost = state.head.roll_back();
                state.fed = None;
                if let Some(tree) = &mut state.tree {
                    tree.roll_back();
                }
                state.buffer.clear();
                state.pending = 0;
                // Checkpoints of records taken back went with them.
                if state.checkpointed > state.head.seq() {
                    let seq = state.head.seq();
                    state.checkpointed = seq;
                    state.last_checkpoint = None;
                    state.last_tree = None;
                    if let Some(schedule) = &mut state.schedule {
                        schedule.written(seq);
                    }
                }
                // Take back a partial write, so no half line stays behind.
                let restored = state
                    .file
                    .metadata()
                    .and_then(|m| state.file.set_len(m.len().saturating_sub(written as u64)));
                if let Err(cut) = restored {
                    let why = format!(
                        "a write failed ({error}) and the file could not be cut back to its last \
                         whole line ({cut}): it may end in a partial line; verify it with \
                         `capability audit verify` and start a new trail"
                    );
                    state.broken = Some(why.clone());
                    return Err(fail(why));
                }
                let buffered = if lost > 1 {
                    format!(" ({lost} buffered records are not in the trail)")
                } else {
                    String::new()
                };
                Err(fail(format!("{error}{buffered}")))
            }
        }
    }

    /// Why no record can be appended now, if none can.
    fn refusing(&self, state: &FileState) -> Option<AuditError> {
        if state.closed {
            return Some(self.closed());
        }
        state.broken.as_ref().map(|why| AuditError::Io {
            path: self.path.display().to_string(),
            message: why.clone(),
        })
    }
}

impl AuditSink for JsonlSink {
    fn append(&self, mut record: AuditRecord) -> Result<AuditRecord, AuditError> {
        self.append_in_place(&mut record)?;
        Ok(record)
    }

    fn append_in_place(&self, record: &mut AuditRecord) -> Result<(), AuditError> {
        let mut state = lock(&self.state);
        if let Some(error) = self.refusing(&state) {
            return Err(error);
        }
        let intent = record.phase == Some(Phase::Intent);
        let FileState {
            head, tree, buffer, ..
        } = &mut *state;
        crate::scratch::with_text(|line| {
            if let Some(tree) = tree {
                // The leaf of the record before is hashed beside this one's own hash.
                let held = (tree.held()).map(|held| head.seal_line_beside(record, line, held));
                if held.is_none() {
                    head.seal_line_in_place(record, line);
                }
                tree.hold(held, line.as_bytes());
            } else {
                head.seal_line_in_place(record, line);
            }
            line.push('\n');
            buffer.extend_from_slice(line.as_bytes());
        });
        state.pending += 1;
        if state.schedule.as_ref().is_some_and(|s| s.due(record.seq)) {
            self.checkpoint(&mut state, false);
        }
        let due = intent
            || match self.policy {
                FlushPolicy::EveryRecord => true,
                FlushPolicy::Every(n) => state.pending >= n.max(1),
            };
        if due {
            self.write_out(&mut state)?;
        }
        Ok(())
    }

    fn ready(&self) -> Result<(), AuditError> {
        let mut state = lock(&self.state);
        if let Some(error) = self.refusing(&state) {
            return Err(error);
        }
        // Looked up when something happened to the path, or not for a while, or not watched.
        let quiet = state.watch.as_ref().is_some_and(named::Watch::quiet);
        if quiet && state.looked.is_some_and(|at| at.elapsed() < LOOK_EVERY) {
            return Ok(());
        }
        let named = named::still_named(&self.path, &self.named, &state.file, state.identity);
        // A path that no longer names the file is looked up again at every call.
        state.looked = named.is_ok().then(std::time::Instant::now);
        named
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
    /// and everything buffered written. Appends are refused from then on.
    fn close_state(&self, state: &mut FileState) -> Result<(), AuditError> {
        if state.closed {
            return Ok(());
        }
        state.closed = true;
        if state.broken.is_some() {
            return Ok(());
        }
        // The tree's last checkpoint says the writer stopped: no later one is missing.
        // (A trail reopened and closed with nothing new, after a stop, is left as it was.)
        if state.head.seq() > state.checkpointed {
            self.checkpoint(state, true);
        } else if !(state.last_tree.as_ref()).is_some_and(crate::tlog::checkpoint_stopped) {
            self.tree_line(state, &utc_now(), true);
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
