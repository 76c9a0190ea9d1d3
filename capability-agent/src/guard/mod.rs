//! The ghost-loop guards of ADR-105 that need state shared by replicas: **one loop per
//! incident** (an in-flight lease on the incident's key) and **a stable cache** of the loop's
//! final outcome. With the provider's [circuit breaker](crate::breaker) and `max_iterations`
//! they are the four guards that keep a repeated alert from running the model again.
//!
//! [`LoopGuard::run`] wraps one run of the loop:
//!
//! 1. The cache is asked for `(incident, role, policy version)`: a hit is answered at once
//!    ([`Guarded::Cached`]), without a model turn or a tool call, and the audit trail gets a
//!    record of it (`agent/cached`, naming the run it came from and its records' range).
//! 2. The incident's lease is taken: if another process (or loop) holds it, the run does not
//!    start ([`Guarded::InFlight`], with the holder and since when); the caller falls back to
//!    its pre-gathered path, or waits and asks again.
//! 3. The cache is asked again (the holder may have just finished), then the start is recorded
//!    (`agent/loop_started`, with the holder and the lease's generation) and the loop runs.
//!    A thread renews the lease every third of its TTL; a holder that dies (SIGKILL) stops
//!    renewing, and its key is taken over once the TTL has passed.
//! 4. The outcome is cached (an answer for `answer_ttl`, a degrade for the shorter
//!    `degrade_ttl`, so a provider outage does not pin a failure), and the lease released,
//!    also when the loop panics.
//!
//! The cache is used only with a policy version (the dispatch's, else the decider's): without
//! one a policy change could not be told apart, so every run runs ([`GuardNote::Unversioned`]).
//! Nothing here is believed from the store without a check: a cache entry is sealed with an
//! HMAC under the guard's key ([`cache`]), and a lease's generation fences a holder whose lease
//! was taken over. A store that fails means no run and no answer ([`GuardError`]): fall back.
//!
//! ```
//! use std::sync::Arc;
//! use capability_agent::driver::LoopOutcome;
//! use capability_agent::guard::{Guarded, LoopGuard, MemoryCache, MemoryLeases};
//! use capability_audit::{AuditedDispatch, Caller, DigestKey, MemorySink};
//! use capability_core::authz::{Ceiling, ToolContext};
//!
//! let dispatch = AuditedDispatch::new(Arc::new(MemorySink::new())).with_policy_version("p-1");
//! let guard = LoopGuard::new(Arc::new(MemoryLeases::new()), Arc::new(MemoryCache::new()), DigestKey::generate()?);
//! let monitor = ToolContext::new("monitor", "s-1", Ceiling::ReadOnly);
//! let caller = Caller::new("watcher").incident("INC-7");
//! let answer = || LoopOutcome::Answer { text: "disk full on db-2".into(), iterations: 2, tool_calls: 1 };
//!
//! let first = guard.run(&dispatch, "INC-7", &monitor, caller, answer)?;
//! assert!(matches!(first, Guarded::Ran { .. }));
//! let repeat = guard.run(&dispatch, "INC-7", &monitor, caller, || unreachable!("answered from the cache"))?;
//! assert_eq!(repeat.answer(), Some("disk full on db-2"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cache;
mod clock;
mod error;
pub mod lease;
mod renew;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use capability_audit::{AuditedDispatch, Caller, DigestKey, Reason, Subject};
use capability_core::authz::Authorize;

use crate::driver::LoopOutcome;

pub use cache::{AuditRange, CachedOutcome, CachedResult, MemoryCache, ResultCache};
pub use clock::{FakeWallClock, SystemWallClock, WallClock};
pub use error::GuardError;
pub use lease::{Acquire, Lease, LeaseStore, MemoryLeases};

use renew::Renewer;

/// The default TTL of a lease: renewed every third of it while the loop runs.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);
/// The default TTL of a cached answer.
pub const DEFAULT_ANSWER_TTL: Duration = Duration::from_secs(600);
/// The default TTL of a cached degrade.
pub const DEFAULT_DEGRADE_TTL: Duration = Duration::from_secs(30);

/// The record's method of a run's start and of a cache hit.
pub const STARTED_METHOD: &str = "agent/loop_started";
/// See [`STARTED_METHOD`].
pub const CACHED_METHOD: &str = "agent/cached";

/// The guards of one process: its lease store, its cache, its key and its TTLs. Cheap to
/// share (`Arc`), thread-safe.
pub struct LoopGuard {
    leases: Arc<dyn LeaseStore>,
    cache: Arc<dyn ResultCache>,
    mac_key: DigestKey,
    clock: Arc<dyn WallClock>,
    holder: String,
    lease_ttl: Duration,
    answer_ttl: Duration,
    degrade_ttl: Duration,
}

impl std::fmt::Debug for LoopGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopGuard")
            .field("holder", &self.holder)
            .field("lease_ttl", &self.lease_ttl)
            .field("answer_ttl", &self.answer_ttl)
            .field("degrade_ttl", &self.degrade_ttl)
            .finish_non_exhaustive()
    }
}

/// How a guarded run went.
#[derive(Clone, Debug, PartialEq)]
pub enum Guarded {
    /// The loop ran here.
    Ran {
        /// How it ended.
        outcome: LoopOutcome,
        /// Where its records are in the audit trail: from its start record to the last.
        calls: Option<AuditRange>,
        /// What else happened that the caller should know.
        notes: Vec<GuardNote>,
    },
    /// Answered from the cache: no model turn, no tool call.
    Cached(CachedOutcome),
    /// Another holder runs the incident's loop: this one did not start.
    InFlight {
        /// Who.
        holder: String,
        /// Since when (ms since the Unix epoch).
        since_ms: u64,
        /// Until when, unless it renews.
        expires_ms: u64,
    },
}

impl Guarded {
    /// The answer's text: the run's or the cached one.
    pub fn answer(&self) -> Option<&str> {
        match self {
            Guarded::Ran { outcome, .. } => outcome.answer(),
            Guarded::Cached(cached) => cached.answer(),
            Guarded::InFlight { .. } => None,
        }
    }
}

/// Something a run met besides its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuardNote {
    /// The cache held an entry for the key that does not open under the guard's key (planted,
    /// edited or copied in the store): ignored, and replaced by this run's.
    ForgedEntry,
    /// The lease was not this holder's any more when the run ended (its renewals failed and it
    /// lapsed, or it was taken over): the outcome was not cached.
    LeaseLost,
    /// The outcome could not be cached.
    NotCached(GuardError),
    /// Neither the dispatch nor the decider has a policy version, so a policy change could not
    /// be told apart: the cache was neither read nor written (declare `version` in the policy).
    Unversioned,
    /// The lease could not be released: it lapses after its TTL.
    NotReleased(GuardError),
}

impl LoopGuard {
    /// Guards over `leases` and `cache`, sealing cache entries with `mac_key` (replicas that
    /// share a cache share the key), with the default TTLs, the system clock and a holder id
    /// unique to this process.
    pub fn new(
        leases: Arc<dyn LeaseStore>,
        cache: Arc<dyn ResultCache>,
        mac_key: DigestKey,
    ) -> Self {
        let random = RandomState::new().build_hasher().finish();
        LoopGuard {
            leases,
            cache,
            mac_key,
            clock: Arc::new(SystemWallClock),
            holder: format!("pid-{}-{random:016x}", std::process::id()),
            lease_ttl: DEFAULT_LEASE_TTL,
            answer_ttl: DEFAULT_ANSWER_TTL,
            degrade_ttl: DEFAULT_DEGRADE_TTL,
        }
    }

    /// Names this process as a holder (default: its pid and a random number).
    pub fn holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = holder.into();
        self
    }

    /// The lease's TTL: a crashed holder's key is taken over this long after its last renewal.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// How long an answer is served from the cache.
    pub fn answer_ttl(mut self, ttl: Duration) -> Self {
        self.answer_ttl = ttl;
        self
    }

    /// How long a degrade is served from the cache (zero: degrades are not cached).
    pub fn degrade_ttl(mut self, ttl: Duration) -> Self {
        self.degrade_ttl = ttl;
        self
    }

    /// Reads the time from `clock` (a fake one in tests).
    pub fn clock(mut self, clock: Arc<dyn WallClock>) -> Self {
        self.clock = clock;
        self
    }

    /// This process's holder id.
    pub fn holder_id(&self) -> &str {
        &self.holder
    }

    /// One guarded run of the loop for `incident` (the incident id or the alert's fingerprint),
    /// as `decider` (whose role, with the dispatch's or the decider's policy version, keys the
    /// cache) and `caller`: see the [module docs](self). `run` runs the loop (it is called at
    /// most once, and not at all on a hit or while another holder runs).
    pub fn run<D, F>(
        &self,
        dispatch: &AuditedDispatch,
        incident: &str,
        decider: &D,
        caller: Caller<'_>,
        run: F,
    ) -> Result<Guarded, GuardError>
    where
        D: Authorize + ?Sized,
        F: FnOnce() -> LoopOutcome,
    {
        let subject = Subject::of(decider);
        let policy_version = dispatch.policy_version().or(subject.policy_version);
        let wanted = (incident, subject.role, policy_version);
        let key = cache::cache_key(incident, subject.role, policy_version);
        let mut notes = Vec::new();
        // Without a version a policy change cannot be told from no change: no cache.
        let cached = policy_version.is_some();
        if !cached {
            notes.push(GuardNote::Unversioned);
        }

        if cached && let Some(hit) = self.lookup(&key, wanted, &mut notes)? {
            return self.served(dispatch, &subject, caller, hit);
        }
        let now = self.clock.now_ms();
        let lease =
            match self
                .leases
                .acquire(incident, &self.holder, now, millis(self.lease_ttl))?
            {
                Acquire::InFlight(other) => {
                    return Ok(Guarded::InFlight {
                        holder: other.holder,
                        since_ms: other.since_ms,
                        expires_ms: other.expires_ms,
                    });
                }
                Acquire::Held(lease) => lease,
            };
        let held = Held::new(self, lease);
        notes.retain(|note| *note != GuardNote::ForgedEntry);
        if cached && let Some(hit) = self.lookup(&key, wanted, &mut notes)? {
            drop(held);
            return self.served(dispatch, &subject, caller, hit);
        }
        let started = dispatch
            .notice(
                &subject,
                caller,
                STARTED_METHOD,
                "agent_loop",
                &json!({"key": incident, "holder": self.holder, "generation": held.lease.generation}),
                Reason::note("loop_started", "the agent loop started for this incident"),
            )
            .map_err(|error| GuardError::new("audit", error.to_string()))?;

        let outcome = run();

        let calls = dispatch
            .last_written()
            .filter(|(writer, _)| *writer == started.writer)
            .map(|(writer, last_seq)| AuditRange {
                writer,
                first_seq: started.seq,
                last_seq: last_seq.max(started.seq),
            });
        // Still ours? (A renewal that failed, or a row edited from under us, means another
        // holder may have run: its outcome, not this one, is the cached one.)
        let still_held = !held.lost()
            && self
                .leases
                .renew(&held.lease, self.clock.now_ms(), millis(self.lease_ttl))
                .unwrap_or(false);
        if !still_held {
            notes.push(GuardNote::LeaseLost);
        } else if cached && let Err(error) = self.store(&key, wanted, &outcome, calls.clone()) {
            notes.push(GuardNote::NotCached(error));
        }
        if let Err(error) = held.release() {
            notes.push(GuardNote::NotReleased(error));
        }
        Ok(Guarded::Ran {
            outcome,
            calls,
            notes,
        })
    }

    /// The cache's entry for `key`, if one opens; a forged one is noted and ignored.
    fn lookup(
        &self,
        key: &str,
        wanted: (&str, &str, Option<&str>),
        notes: &mut Vec<GuardNote>,
    ) -> Result<Option<CachedOutcome>, GuardError> {
        let now = self.clock.now_ms();
        let Some(sealed) = self.cache.get(key, now)? else {
            return Ok(None);
        };
        match cache::open(&sealed, &self.mac_key, wanted, now) {
            Ok(hit) => Ok(hit),
            Err(()) => {
                notes.push(GuardNote::ForgedEntry);
                Ok(None)
            }
        }
    }

    /// Records the hit, then answers with it.
    fn served(
        &self,
        dispatch: &AuditedDispatch,
        subject: &Subject<'_>,
        caller: Caller<'_>,
        hit: CachedOutcome,
    ) -> Result<Guarded, GuardError> {
        let message = format!(
            "answered from the cache: the run of {} at {} ms{}",
            hit.holder,
            hit.stored_ms,
            hit.calls.as_ref().map_or(String::new(), |r| {
                let of = if r.writer.is_empty() {
                    String::new()
                } else {
                    format!(" of writer {}", r.writer)
                };
                format!(", records {}..={}{of}", r.first_seq, r.last_seq)
            })
        );
        dispatch
            .notice(
                subject,
                caller,
                CACHED_METHOD,
                "agent_loop",
                &json!({"key": hit.key, "holder": hit.holder, "stored_ms": hit.stored_ms, "calls": hit.calls}),
                Reason::note("cache_hit", message),
            )
            .map_err(|error| GuardError::new("audit", error.to_string()))?;
        Ok(Guarded::Cached(hit))
    }

    fn store(
        &self,
        key: &str,
        (incident, role, policy_version): (&str, &str, Option<&str>),
        outcome: &LoopOutcome,
        calls: Option<AuditRange>,
    ) -> Result<(), GuardError> {
        let (result, ttl) = match outcome {
            LoopOutcome::Answer { text, .. } => {
                (CachedResult::Answer { text: text.clone() }, self.answer_ttl)
            }
            LoopOutcome::Degraded { degrade, .. } => (
                CachedResult::Degraded {
                    reason: degrade.to_string(),
                },
                self.degrade_ttl,
            ),
        };
        if ttl.is_zero() {
            return Ok(());
        }
        let now = self.clock.now_ms();
        let entry = CachedOutcome {
            key: incident.to_owned(),
            role: role.to_owned(),
            policy_version: policy_version.map(str::to_owned),
            result,
            iterations: outcome.iterations(),
            tool_calls: outcome.tool_calls(),
            calls,
            holder: self.holder.clone(),
            stored_ms: now,
            expires_ms: now.saturating_add(millis(ttl)),
        };
        self.cache.put(
            key,
            &cache::seal(&entry, &self.mac_key),
            now,
            entry.expires_ms,
        )
    }
}

/// A lease held for a run: renewed by a thread, released when dropped (a panicking loop too).
struct Held<'a> {
    guard: &'a LoopGuard,
    lease: Lease,
    renewer: Option<Renewer>,
    released: bool,
}

impl<'a> Held<'a> {
    fn new(guard: &'a LoopGuard, lease: Lease) -> Self {
        let renewer = Renewer::start(
            guard.leases.clone(),
            guard.clock.clone(),
            lease.clone(),
            guard.lease_ttl,
        );
        Held {
            guard,
            lease,
            renewer: Some(renewer),
            released: false,
        }
    }

    fn lost(&self) -> bool {
        self.renewer.as_ref().is_some_and(Renewer::lost)
    }

    fn release(mut self) -> Result<(), GuardError> {
        self.released = true;
        if let Some(renewer) = self.renewer.take() {
            renewer.stop();
        }
        self.guard.leases.release(&self.lease)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some(renewer) = self.renewer.take() {
            renewer.stop();
        }
        if !self.released {
            let _ = self.guard.leases.release(&self.lease);
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
