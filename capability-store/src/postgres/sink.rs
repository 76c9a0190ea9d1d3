//! The audit sink on PostgreSQL: one writer, one chain, group commit.
//!
//! `append` seals the record into the writer's chain, queues it and waits. One committer thread
//! takes everything queued, inserts it with one statement in one transaction (with a signed
//! checkpoint when one is due) and wakes the waiters: `append` returns only once its record is
//! committed. A batch that fails fails every record sealed since the last commit (those queued
//! behind it were sealed on top of it): their waiters get [`AuditError::Store`], the chain's
//! head goes back to the last committed record, and the dispatcher appends them again later.
//! Before the next record is sealed, the head is read again from the database, in case the
//! failed commit did reach it (a connection lost after `COMMIT` was sent).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use capability_audit::{
    AuditError, AuditRecord, AuditSink, ChainHead, Checkpoint, CheckpointSchedule,
    CheckpointSigner, DigestKey, GENESIS,
};
use capability_gate::StoreError;
use postgres::{Client, Statement};

use super::lock;
use super::pool::Pool;
use super::rows::{self, Columns, MAX_BATCH};
use super::tree;
use crate::SinkOptions;

mod keep;

/// The longest the committer waits for a batch to fill up to the appends seen waiting last.
const GATHER: Duration = Duration::from_millis(1);

/// When no record was committed for this long, `ready` asks the server before a call runs.
const PROBE_AFTER: Duration = Duration::from_millis(100);

/// The audit sink of one writer on PostgreSQL.
pub struct PgSink {
    shared: Arc<Shared>,
    pool: Arc<Pool>,
    committer: Mutex<Option<JoinHandle<()>>>,
    key: Option<DigestKey>,
    random_key: OnceLock<DigestKey>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the committer.
    work: Condvar,
    /// Wakes the waiters.
    done: Condvar,
}

struct State {
    /// The chain: sealed up to the last record queued, committed up to the last committed.
    head: ChainHead,
    /// Sealed records not yet committed, each with its ticket (increasing, never reused).
    queue: Vec<(u64, AuditRecord)>,
    last_ticket: u64,
    /// Every ticket up to this one is committed.
    committed_ticket: u64,
    /// Every ticket up to this one was answered with an error (and taken back).
    failed_ticket: u64,
    error: Option<String>,
    /// A commit failed: read the head from the database before sealing again.
    resync: bool,
    /// A batch is being written.
    in_flight: bool,
    closing: bool,
    last_ok: Instant,
}

/// What the committer thread owns.
struct Committer {
    shared: Arc<Shared>,
    pool: Arc<Pool>,
    /// The connection, and the insert prepared on it.
    client: Option<(Client, Statement)>,
    /// Appends waiting when the last batch was committed: the next batch waits (at most
    /// [`GATHER`]) for as many, so that threads woken together commit together.
    waiters: usize,
    checkpoints: Option<(Arc<dyn CheckpointSigner>, CheckpointSchedule)>,
    /// The last seq a checkpoint vouches for.
    checkpointed: u64,
    /// The writer's tree of what is committed, kept while it signs checkpoints (`tree`).
    tree: Option<capability_audit::tlog::WriterTree>,
    /// Where its tree checkpoints go once stored (`keep.rs`).
    feed: Option<keep::Fed>,
    /// The time of the last tree checkpoint it stored: the next is never given the same.
    noted: Option<String>,
    /// When `mcp_daily_stats`' deltas were last compacted by this writer.
    compacted: Instant,
    /// Whether a compaction is running.
    compacting: Arc<std::sync::atomic::AtomicBool>,
}

/// How often a writer moves `mcp_daily_stats`' deltas into its sums (see migration 6).
const COMPACT_EVERY: Duration = Duration::from_secs(5);

impl PgSink {
    /// Opens the sink of `options.writer`, going on from that writer's last record.
    pub(crate) fn open(pool: Arc<Pool>, options: SinkOptions) -> Result<PgSink, AuditError> {
        let store_error = |e: StoreError| AuditError::Store {
            store: e.store,
            message: e.message,
        };
        pool.ensure_schema().map_err(store_error)?;
        let writer = options.writer;
        let mut client = pool.connect().map_err(store_error)?;
        let last = rows::last_record(&mut client, &writer)
            .map_err(|e| store_error(pool.error("cannot read the writer's chain", &e)))?;
        let (seq, prev) = match last {
            None => (0, GENESIS.to_owned()),
            Some(Err(problem)) => return Err(broken(&pool, &writer, problem)),
            Some(Ok(record)) if record.hash != record.compute_hash() => {
                let problem = format!("its last record ({}) was edited", record.seq);
                return Err(broken(&pool, &writer, problem));
            }
            Some(Ok(record)) => (record.seq, record.hash),
        };
        let checkpointed = rows::last_checkpoint(&mut client, &writer)
            .map_err(|e| store_error(pool.error("cannot read the checkpoints", &e)))?;
        let signer = options.checkpoints.as_ref().map(|c| &*c.0);
        let tree = tree::open_sink(&pool, &mut client, &writer, signer)?;
        let feed = (options.feed.zip(tree.as_ref())).map(|(feed, tree)| {
            feed.start(tree.committed());
            keep::Fed {
                feed,
                first: tree.committed().size(),
                leaves: Vec::new(),
            }
        });
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                head: ChainHead::new(writer, seq, prev),
                queue: Vec::new(),
                last_ticket: 0,
                committed_ticket: 0,
                failed_ticket: 0,
                error: None,
                resync: false,
                in_flight: false,
                closing: false,
                last_ok: Instant::now(),
            }),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let committer = Committer {
            compacted: Instant::now(),
            compacting: Arc::default(),
            shared: shared.clone(),
            pool: pool.clone(),
            client: client
                .prepare(rows::INSERT)
                .ok()
                .map(|insert| (client, insert)),
            waiters: 0,
            checkpoints: options
                .checkpoints
                .map(|(signer, every)| (signer, CheckpointSchedule::new(every, checkpointed))),
            checkpointed,
            tree,
            feed,
            noted: None,
        };
        let handle = std::thread::Builder::new()
            .name("capability-pg-audit".to_owned())
            .spawn(move || committer.run())
            .map_err(|e| AuditError::Store {
                store: pool.name.clone(),
                message: format!("cannot start the committer thread: {e}"),
            })?;
        Ok(PgSink {
            shared,
            pool,
            committer: Mutex::new(Some(handle)),
            key: options.digest_key,
            random_key: OnceLock::new(),
        })
    }

    fn error(&self, message: impl Into<String>) -> AuditError {
        AuditError::Store {
            store: self.pool.name.clone(),
            message: message.into(),
        }
    }

    /// Waits until every ticket up to `ticket` is committed (`Ok`) or answered with an error.
    fn wait(&self, mut state: MutexGuard<'_, State>, ticket: u64) -> Result<(), AuditError> {
        loop {
            if state.committed_ticket >= ticket {
                return Ok(());
            }
            if state.failed_ticket >= ticket {
                let message = state.error.clone().unwrap_or_else(|| "not written".into());
                return Err(self.error(message));
            }
            state = wait(&self.shared.done, state);
        }
    }
}

fn broken(pool: &Pool, writer: &str, problem: String) -> AuditError {
    AuditError::Store {
        store: pool.name.clone(),
        message: format!(
            "the chain of writer `{writer}` is broken ({problem}): verify it with `capability \
             audit verify`, and write as another writer"
        ),
    }
}

fn wait<'a>(condvar: &Condvar, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    condvar
        .wait(guard)
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PgSink {
    /// After a failed commit: the head as the database has it (the commit may have reached it
    /// before the connection was lost), read with no commit in flight.
    fn resync<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        while state.in_flight {
            state = wait(&self.shared.done, state);
        }
        if !state.resync || !state.queue.is_empty() {
            return state;
        }
        let writer = state.head.writer().to_owned();
        let last = self.pool.with("cannot read the writer's chain", |c| {
            rows::last_record(c, &writer)
        });
        match last {
            Ok(Some(Ok(record))) if record.hash == record.compute_hash() => {
                state.head = ChainHead::new(writer, record.seq, record.hash);
                state.resync = false;
            }
            Ok(None) => {
                state.head = ChainHead::new(writer, 0, GENESIS);
                state.resync = false;
            }
            // Not readable now: sealed on the head as it is; a record the database already
            // holds under the same seq makes the commit fail, and the head is read again.
            _ => {}
        }
        state
    }
}

impl AuditSink for PgSink {
    fn append(&self, record: AuditRecord) -> Result<AuditRecord, AuditError> {
        let mut state = lock(&self.shared.state);
        if state.closing {
            return Err(self.error("the audit sink is closed"));
        }
        if state.resync {
            state = self.resync(state);
        }
        let record = state.head.seal(record);
        state.last_ticket += 1;
        let ticket = state.last_ticket;
        state.queue.push((ticket, record.clone()));
        self.shared.work.notify_one();
        self.wait(state, ticket).map(|()| record)
    }

    fn ready(&self) -> Result<(), AuditError> {
        let state = lock(&self.shared.state);
        if state.closing {
            return Err(self.error("the audit sink is closed"));
        }
        if state.queue.is_empty() && state.last_ok.elapsed() >= PROBE_AFTER {
            // Idle: make sure the server is still there before a call runs.
            drop(state);
            self.pool
                .with("the audit database does not answer", |c| c.simple_query(""))
                .map_err(|e| self.error(e.message))?;
            lock(&self.shared.state).last_ok = Instant::now();
        }
        Ok(())
    }

    fn close(&self) -> Result<(), AuditError> {
        lock(&self.shared.state).closing = true;
        self.shared.work.notify_all();
        let handle = lock(&self.committer).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
        let state = lock(&self.shared.state);
        match (&state.error, state.queue.len()) {
            (_, 0) => Ok(()),
            (error, n) => Err(self.error(format!(
                "{n} record(s) could not be written: {}",
                error.as_deref().unwrap_or("closed")
            ))),
        }
    }

    fn digest_key(&self) -> Result<&DigestKey, AuditError> {
        if let Some(key) = &self.key {
            return Ok(key);
        }
        if let Some(key) = self.random_key.get() {
            return Ok(key);
        }
        let key = DigestKey::generate().map_err(AuditError::DigestKey)?;
        Ok(self.random_key.get_or_init(|| key))
    }
}

impl Drop for PgSink {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl Committer {
    fn run(mut self) {
        loop {
            let mut state = lock(&self.shared.state);
            while state.queue.is_empty() && !state.closing {
                let Some(tick) = self.idle_tick() else {
                    state = wait(&self.shared.work, state);
                    continue;
                };
                // Idle: a tree checkpoint when the interval passes with none (`keep.rs`).
                let waited = self.shared.work.wait_timeout(state, tick);
                let (guard, waited) = waited.unwrap_or_else(std::sync::PoisonError::into_inner);
                state = guard;
                if waited.timed_out() && state.queue.is_empty() && !state.closing {
                    drop(state);
                    self.idle();
                    state = lock(&self.shared.state);
                }
            }
            if state.closing && state.queue.is_empty() {
                let (seq, head) = state.head.committed();
                let (seq, head) = (seq, head.to_owned());
                let writer = state.head.writer().to_owned();
                drop(state);
                self.final_checkpoint(&writer, seq, &head);
                self.compact();
                return;
            }
            // Group commit: let the appends woken by the last commit join this batch.
            let gather_until = Instant::now() + GATHER;
            while state.queue.len() < self.waiters.min(MAX_BATCH) && !state.closing {
                let left = gather_until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                state = self
                    .shared
                    .work
                    .wait_timeout(state, left)
                    .map_or_else(|e| e.into_inner().0, |(guard, _)| guard);
            }
            let n = state.queue.len().min(MAX_BATCH);
            let batch: Vec<AuditRecord> = state.queue[..n].iter().map(|(_, r)| r.clone()).collect();
            let last_ticket = state.queue[n - 1].0;
            state.in_flight = true;
            drop(state);

            let result = self.write(&batch);

            let mut state = lock(&self.shared.state);
            state.in_flight = false;
            match result {
                Ok(()) => {
                    state.queue.drain(..n);
                    state.committed_ticket = last_ticket;
                    if let Some(last) = batch.last() {
                        state.head.commit_through(last.seq, &last.hash);
                    }
                    state.error = None;
                    state.last_ok = Instant::now();
                    self.waiters = n + state.queue.len();
                }
                Err(message) => {
                    // The batch is not in the chain, nor what was sealed on top of it: every
                    // waiter is answered, and the head goes back to the last commit (read
                    // again from the database before the next record).
                    state.queue.clear();
                    state.head.roll_back();
                    state.failed_ticket = state.last_ticket;
                    state.error = Some(message);
                    state.resync = true;
                }
            }
            self.shared.done.notify_all();
            drop(state);
            if self.compacted.elapsed() >= COMPACT_EVERY {
                self.compact();
            }
        }
    }

    /// Moves `mcp_daily_stats`' deltas into its sums, on a thread and a connection of its own
    /// (the appends do not wait for it), one at a time. A failure loses nothing (the deltas
    /// stay, and the view counts them): it is tried again later.
    fn compact(&mut self) {
        self.compacted = Instant::now();
        if self
            .compacting
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let (pool, compacting) = (self.pool.clone(), self.compacting.clone());
        let spawned = std::thread::Builder::new()
            .name("capability-stats-compaction".to_owned())
            .spawn(move || {
                let _ = pool.with("cannot compact mcp_daily_stats", |c| {
                    c.batch_execute("SELECT capability_daily_stats_compact()")
                });
                compacting.store(false, std::sync::atomic::Ordering::Release);
            });
        if spawned.is_err() {
            self.compacting
                .store(false, std::sync::atomic::Ordering::Release);
        }
    }

    /// Inserts `batch` in one transaction, with a checkpoint when one is due.
    fn write(&mut self, batch: &[AuditRecord]) -> Result<(), String> {
        let mut columns = Columns::default();
        for record in batch {
            columns.push(record);
        }
        let checkpoint = match (&self.checkpoints, batch.last()) {
            (Some((signer, schedule)), Some(last)) if schedule.due(last.seq) => Some(
                Checkpoint::sign(&last.writer, last.seq, &last.hash, signer.as_ref()),
            ),
            _ => None,
        };
        let frontier = self.advance(batch);
        let (t, keys) = (self.tree.as_ref(), self.checkpoints.as_ref());
        let note = tree::note(t, frontier.as_ref(), checkpoint.as_ref(), keys);
        let pool = self.pool.clone();
        let written = self
            .with_client(|client, insert| {
                let mut tx = client.transaction()?;
                columns.insert(&mut tx, insert)?;
                let signed = tree::insert_checkpoints(&mut tx, checkpoint.as_ref(), note.as_ref())?;
                tx.commit().map(|()| signed)
            })
            .map_err(|e| e.message)?;
        match written {
            Ok(signed) => {
                if let (Some(t), Some(f)) = (&mut self.tree, frontier) {
                    t.commit_to(f);
                }
                self.fed(batch, signed);
                if let (Some(c), Some((_, schedule))) = (&checkpoint, &mut self.checkpoints) {
                    schedule.written(c.seq);
                    self.checkpointed = c.seq;
                }
                Ok(())
            }
            Err(e) if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) => Err(pool
                .scrub(format!(
                    "another writer is writing as `{}` ({}): give each process its own writer id",
                    batch.first().map_or("", |r| r.writer.as_str()),
                    super::pool::chain(&e)
                ))),
            Err(e) => Err(pool.error("cannot insert the records", &e).message),
        }
    }

    /// Runs `f` on the committer's connection (with the insert prepared on it), connecting
    /// again when it was lost; the outer error is a failed connection.
    fn with_client<T>(
        &mut self,
        f: impl FnOnce(&mut Client, &Statement) -> Result<T, postgres::Error>,
    ) -> Result<Result<T, postgres::Error>, StoreError> {
        let (mut client, insert) = match self.client.take() {
            Some((client, insert)) if !client.is_closed() => (client, insert),
            _ => {
                let mut client = self.pool.connect()?;
                match client.prepare(rows::INSERT) {
                    Ok(insert) => (client, insert),
                    Err(e) => return Ok(Err(e)),
                }
            }
        };
        let result = f(&mut client, &insert);
        if !client.is_closed() {
            self.client = Some((client, insert));
        }
        Ok(result)
    }
}
