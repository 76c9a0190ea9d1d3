//! The SQLite audit sink: one writer's chain in `mcp_audit_log`, written by group commit.
//!
//! Each [`append`](AuditSink::append) completes its record (writer, seq, prev, hash) under a
//! short lock and queues it, then waits until it is committed. Whichever appending thread finds
//! no commit under way becomes the leader: it takes every queued record and inserts them in one
//! transaction, while the others wait (and queue the next batch). So one commit, and one
//! `fsync`, serves many threads, and still no `append` returns before its record is durable.
//!
//! A leader that finds fewer records queued than the last commit carried first waits a moment
//! (at most [`GATHER_MAX`], and never longer than half the last commit took) for the threads
//! that commit released to queue their next records: without that, the first of them to come
//! back leads a commit of one record while the others queue behind it, and commits alternate
//! between one record and the rest, twice the `fsync`s for the same records. A lone thread
//! never waits (its last commit carried one record).
//!
//! A failed commit fails every record sealed since the last commit (those of the batch, and
//! those queued behind it, which were sealed on top of it): their appends return the error,
//! the chain's head goes back to the last committed record, and the dispatcher, which keeps
//! every record whose append failed, appends them again later.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use capability_audit::jsonl::CheckpointFeed;
use capability_audit::tlog::writers::{PendingCheckpoint, sign_registration};
use capability_audit::tlog::{SignedCheckpoint, WriterTree};
use capability_audit::{
    AuditError, AuditRecord, AuditSink, ChainHead, Checkpoint, CheckpointSchedule,
    CheckpointSigner, DigestKey, GENESIS,
};
use capability_gate::StoreError;
use rusqlite::{Connection, TransactionBehavior};

use super::{Db, records, tree};

mod idle;
use crate::SinkOptions;
pub(crate) use idle::keep_idle_checkpoints;

/// The longest a leader waits for more records before it commits (see the module docs).
const GATHER_MAX: Duration = Duration::from_micros(500);

/// An audit sink writing one writer's chain into a SQLite database (see the module docs).
/// Made by [`SqliteStore::sink`](super::SqliteStore::sink). It resumes the chain of its writer
/// id when the database already holds records of it.
pub struct SqliteSink {
    name: String,
    busy_timeout: std::time::Duration,
    writer: String,
    key: OnceLock<DigestKey>,
    /// Used by the leader only (at most one at a time).
    conn: Mutex<Connection>,
    state: Mutex<State>,
    changed: Condvar,
    /// Wakes a leader gathering records when one is queued.
    gathered: Condvar,
    signer: Option<Arc<dyn CheckpointSigner>>,
    feed: Option<Arc<dyn CheckpointFeed>>,
}

struct State {
    /// The chain: sealed up to the last record appended, committed up to the last committed.
    head: ChainHead,
    /// Appended, not yet committed, in seq order.
    queue: Vec<AuditRecord>,
    committing: bool,
    /// A leader is waiting for more records before it commits.
    gathering: bool,
    /// How many records the last commit carried, and how long it took.
    last_batch: usize,
    last_commit: Duration,
    /// Counts the failed commits: a record sealed in an earlier epoch and not committed was
    /// taken back with a failed commit.
    epoch: u64,
    /// Why the last commit failed.
    failure: Option<AuditError>,
    schedule: Option<CheckpointSchedule>,
    checkpointed: u64,
    /// The writer's tree, kept while the sink signs checkpoints: sealed with the chain,
    /// committed with it (`capability_audit::tlog::stored`).
    tree: Option<WriterTree>,
    /// The time of the last tree checkpoint it stored: the next is never given the same.
    noted: Option<String>,
    closed: bool,
}

impl std::fmt::Debug for SqliteSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteSink")
            .field("store", &self.name)
            .field("writer", &self.writer)
            .finish_non_exhaustive()
    }
}

fn store_error(error: StoreError) -> AuditError {
    AuditError::Store {
        store: error.store,
        message: error.message,
    }
}

impl SqliteSink {
    pub(crate) fn open(db: &Db, options: SinkOptions) -> Result<SqliteSink, AuditError> {
        let name = db.name().to_owned();
        if options.writer.is_empty() {
            return Err(AuditError::Store {
                store: name,
                message: "an audit sink needs a writer id (capability_store::row::new_writer_id)"
                    .to_owned(),
            });
        }
        let conn = db.connect().map_err(store_error)?;
        let resume = records::head(&conn, &options.writer)
            .and_then(|head| Ok((head, records::checkpointed(&conn, &options.writer)?)));
        let (head, checkpointed) = resume.map_err(|e| store_error(db.error(e)))?;
        let (seq, prev) = head.unwrap_or_else(|| (0, GENESIS.to_owned()));
        let mut tree = match &options.checkpoints {
            Some((signer, _)) => {
                open_tree(&conn, &options.writer, signer.as_ref()).map_err(|why| {
                    AuditError::Store {
                        store: name.clone(),
                        message: why,
                    }
                })?
            }
            None => None,
        };
        // Leaves kept from here on for the feed (a store's tree never holds one back).
        let feed = options.feed.filter(|_| tree.is_some());
        if let (Some(feed), Some(tree)) = (&feed, &mut tree) {
            tree.keep_leaves();
            feed.start(tree.committed());
        }
        let (signer, schedule) = match options.checkpoints {
            Some((signer, every)) => (
                Some(signer),
                Some(CheckpointSchedule::new(every, checkpointed)),
            ),
            None => (None, None),
        };
        let key = match options.digest_key {
            Some(key) => OnceLock::from(key),
            None => OnceLock::new(),
        };
        Ok(SqliteSink {
            name,
            busy_timeout: db.busy_timeout,
            writer: options.writer.clone(),
            key,
            conn: Mutex::new(conn),
            state: Mutex::new(State {
                head: ChainHead::new(options.writer.clone(), seq, prev),
                queue: Vec::new(),
                committing: false,
                gathering: false,
                last_batch: 0,
                last_commit: Duration::ZERO,
                epoch: 0,
                failure: None,
                schedule,
                checkpointed,
                tree,
                noted: None,
                closed: false,
            }),
            changed: Condvar::new(),
            gathered: Condvar::new(),
            signer,
            feed,
        })
    }

    /// This sink's writer id.
    pub fn writer(&self) -> &str {
        &self.writer
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn failed(&self, message: impl Into<String>) -> AuditError {
        AuditError::Store {
            store: self.name.clone(),
            message: message.into(),
        }
    }

    /// Commits every queued record (and a checkpoint, when one is due) in one transaction, as
    /// the leader. Called with no commit under way and a non-empty queue.
    fn commit<'a>(&'a self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let mut state = self.gather(state);
        let batch = std::mem::take(&mut state.queue);
        let Some(last) = batch.last() else {
            return state;
        };
        let (last_seq, last_hash) = (last.seq, last.hash.clone());
        // Every record sealed is in the batch: the tree as sealed is the tree once it commits.
        let frontier = state.tree.as_ref().map(|t| t.sealed().clone());
        let checkpoint = match (&self.signer, &state.schedule) {
            (Some(signer), Some(schedule)) if schedule.due(last_seq) => Some(Checkpoint::sign(
                &self.writer,
                last_seq,
                &last_hash,
                signer.as_ref(),
            )),
            _ => None,
        };
        let note = (state.tree.as_ref()).zip(checkpoint.as_ref().zip(frontier.as_ref()));
        let note = note.map(|(tree, (c, f))| PendingCheckpoint::new(tree, f, &c.time));
        state.committing = true;
        drop(state);

        let started = Instant::now();
        let result = {
            let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
            let note = note.as_ref().zip(self.signer.as_deref());
            write(&mut conn, &batch, checkpoint.as_ref(), note)
        };

        let mut state = self.state();
        state.committing = false;
        match result {
            Ok(signed) => {
                state.last_batch = batch.len();
                state.last_commit = started.elapsed();
                state.head.commit_through(last_seq, &last_hash);
                if let (Some(tree), Some(frontier)) = (&mut state.tree, frontier) {
                    tree.commit_to(frontier);
                }
                self.fed(&mut state, signed);
                state.failure = None;
                if checkpoint.is_some() {
                    state.checkpointed = last_seq;
                    if let Some(schedule) = &mut state.schedule {
                        schedule.written(last_seq);
                    }
                }
            }
            Err(error) => {
                // The batch is not in the chain, nor what was sealed on top of it.
                state.queue.clear();
                state.head.roll_back();
                if let Some(tree) = &mut state.tree {
                    tree.roll_back();
                }
                state.epoch += 1;
                state.failure = Some(self.failed(super::explain(&error, self.busy_timeout)));
            }
        }
        self.changed.notify_all();
        state
    }

    /// As the leader, before a commit: while fewer records are queued than the last commit
    /// carried, waits for more, at most [`GATHER_MAX`] and half the last commit's time. Other
    /// threads see a commit under way meanwhile, so they queue and wait.
    fn gather<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        if state.queue.len() >= state.last_batch {
            return state;
        }
        let deadline = Instant::now() + GATHER_MAX.min(state.last_commit / 2);
        state.committing = true;
        state.gathering = true;
        while state.queue.len() < state.last_batch {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            state = self
                .gathered
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.gathering = false;
        state.committing = false;
        state
    }

    /// Waits until record `seq` (sealed in `epoch`) is committed, leading commits as needed;
    /// the error of the commit that failed it otherwise.
    fn committed<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        seq: u64,
        epoch: u64,
    ) -> Result<(), AuditError> {
        loop {
            if state.epoch != epoch {
                return Err(state
                    .failure
                    .clone()
                    .unwrap_or_else(|| self.failed("the record was not written")));
            }
            if seq <= state.head.committed().0 {
                return Ok(());
            }
            if !state.committing {
                state = self.commit(state);
                continue;
            }
            state = self.wait(state);
        }
    }

    /// Waits for a commit under way, then commits what is queued.
    fn flush<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
    ) -> (MutexGuard<'a, State>, Result<(), AuditError>) {
        while state.committing {
            state = self.wait(state);
        }
        let epoch = state.epoch;
        if !state.queue.is_empty() {
            state = self.commit(state);
        }
        let result = match &state.failure {
            Some(failure) if state.epoch != epoch => Err(failure.clone()),
            _ => Ok(()),
        };
        (state, result)
    }
}

/// Inserts a batch (and a checkpoint, and its tree's) in one durable transaction. The tree's
/// is signed there, naming the store's latest registration as this transaction reads it
/// (`capability_audit::tlog::writers`): a writer registered since is named, never one read
/// earlier and gone since.
fn write(
    conn: &mut Connection,
    batch: &[AuditRecord],
    checkpoint: Option<&Checkpoint>,
    note: Option<(&PendingCheckpoint, &dyn CheckpointSigner)>,
) -> Result<Option<SignedCheckpoint>, rusqlite::Error> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    records::insert_records(&tx, batch)?;
    if let Some(checkpoint) = checkpoint {
        records::insert_checkpoint(&tx, checkpoint)?;
    }
    let mut signed = None;
    if let Some((pending, signer)) = note {
        let latest = tree::latest_registration(&tx)?;
        match pending.sign(latest.as_ref(), signer) {
            Ok(note) => {
                tree::insert(&tx, &note)?;
                signed = Some(note);
            }
            Err(e) => tracing::error!(error = %e, "tree checkpoint not signed"),
        }
    }
    tx.commit().map(|()| signed)
}

/// The writer's tree, resumed from its records and checked against its last tree checkpoint;
/// a writer not yet registered in `mcp_audit_writer` is, with a checkpoint of its tree now.
/// `Ok(None)` for a writer id that cannot name a log; `Err` when the records do not match.
fn open_tree(
    conn: &Connection,
    writer: &str,
    signer: &dyn CheckpointSigner,
) -> Result<Option<WriterTree>, String> {
    if capability_audit::tlog::origin(writer).is_err() {
        tracing::warn!(
            writer,
            "no tree kept for this writer: its id cannot name a log"
        );
        return Ok(None);
    }
    let tree::Loaded {
        frontier,
        registered,
    } = match tree::load(conn, writer).map_err(|e| e.to_string())? {
        Ok(loaded) => loaded,
        Err(why) => return Err(format!("the writer's tree cannot be resumed: {why}")),
    };
    let tree = WriterTree::new(writer, frontier).map_err(|e| e.to_string())?;
    if !registered {
        // `load` read outside a transaction: a second writer of the same id is the caller's
        // mistake (ids are unique), and the registration is kept once either way. It names the
        // registration before it (`capability_audit::tlog::writers`).
        let registration = || -> Result<Result<(), String>, rusqlite::Error> {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
            let previous = tree::last_registration(&tx)?;
            let time = capability_audit::utc_now();
            let note = match sign_registration(&tree, &time, previous.as_deref(), signer) {
                Ok(note) => note,
                Err(e) => return Ok(Err(e.to_string())),
            };
            tree::register(&tx, writer, &note)?;
            tx.commit().map(Ok)
        };
        registration().map_err(|e| e.to_string())??;
    }
    Ok(Some(tree))
}

impl AuditSink for SqliteSink {
    fn append(&self, record: AuditRecord) -> Result<AuditRecord, AuditError> {
        crate::row::check_record(&record).map_err(|e| self.failed(e))?;
        let mut state = self.state();
        if state.closed {
            return Err(self.failed("the audit sink is closed"));
        }
        let state_ref = &mut *state;
        let record = match &mut state_ref.tree {
            Some(tree) => {
                let mut line = String::with_capacity(1024);
                let record = state_ref.head.seal_line(record, &mut line);
                tree.push_line(line.as_bytes());
                record
            }
            None => state_ref.head.seal(record),
        };
        state.queue.push(record.clone());
        if state.gathering {
            self.gathered.notify_one();
        }
        let (seq, epoch) = (record.seq, state.epoch);
        self.committed(state, seq, epoch)?;
        Ok(record)
    }

    fn ready(&self) -> Result<(), AuditError> {
        if self.state().closed {
            return Err(self.failed("the audit sink is closed"));
        }
        Ok(())
    }

    fn close(&self) -> Result<(), AuditError> {
        let state = self.state();
        if state.closed {
            return Ok(());
        }
        let (mut state, result) = self.flush(state);
        state.closed = true;
        result?;
        let (seq, head) = state.head.committed();
        let checkpoint = (self.signer.as_ref())
            .filter(|_| seq > state.checkpointed)
            .map(|signer| Checkpoint::sign(&self.writer, seq, head, signer.as_ref()));
        // The tree's last checkpoint says the writer stopped: no later one is missing.
        let note = self.stopped_note(&state);
        if checkpoint.is_some() || note.is_some() {
            let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
            let note = note.as_ref().zip(self.signer.as_deref());
            let signed = write(&mut conn, &[], checkpoint.as_ref(), note)
                .map_err(|e| self.failed(super::explain(&e, self.busy_timeout)))?;
            state.checkpointed = seq;
            self.fed(&mut state, signed);
        }
        Ok(())
    }

    fn digest_key(&self) -> Result<&DigestKey, AuditError> {
        if let Some(key) = self.key.get() {
            return Ok(key);
        }
        let key = DigestKey::generate().map_err(AuditError::DigestKey)?;
        Ok(self.key.get_or_init(|| key))
    }
}

impl Drop for SqliteSink {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
