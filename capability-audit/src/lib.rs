//! The audit trail of `capability`: every tool call decided, recorded, run and recorded again.
//!
//! [`AuditedDispatch`] is the one entry point for a tool call. It asks any decider
//! ([`Authorize`](capability_core::authz::Authorize): a policy's role, an authority grant) before
//! the call, runs the tool only when allowed, and leaves one [`AuditRecord`] per call in an
//! [`AuditSink`]. The per-session [`Budget`] turns runaway agent loops into a degrade.
//!
//! Use it through the facade, `capability::audit`. Depend on this crate directly only to write a
//! sink of your own; a program that only declares tools and agents does not need it.
//!
//! - [`record`]: the record and its hash chain; [`reason`]: its typed reasons; [`chain`]: the
//!   head of a writer's chain, which every sink seals records onto.
//! - [`sink`]: the `AuditSink` seam and the in-memory sink; [`jsonl`]: the JSON Lines file sink
//!   (with signed checkpoints between the records); [`verify`]: reading and verifying a JSON
//!   Lines trail byte for byte, and against the checkpoint key.
//! - [`checkpoint`]: signed checkpoints and [`verify_chains`], per-writer chains; [`problem`]:
//!   what each check finds wrong ([`ChainProblem`]).
//! - [`calls`]: the records as calls (an intent joined to its outcome); [`summary`]: a trail
//!   summed up for people (what its records are, its sessions).
//! - [`dispatch`]: `AuditedDispatch` (fail-closed by itself; one record per call, even a
//!   panicked or cancelled one) and `Caller`; [`budget`]: budgets and degrade.
//! - [`redact`]: sensitive fields; [`key`]: the secret key of the trail's digests;
//!   [`trace`]: each call an OpenTelemetry-style `execute_tool` span, each record a `tracing`
//!   event; [`time`]: timestamps.
//! - [`tlog`]: evidence anyone can check: a writer's records as an RFC 6962 Merkle tree,
//!   checkpoints as C2SP signed notes, inclusion and consistency proofs.

//!
#![doc = include_str!("../../docs/audit.md")]
#![forbid(unsafe_code)]

pub mod budget;
pub mod calls;
pub mod chain;
pub mod checkpoint;
pub mod dispatch;
pub mod error;
pub mod jsonl;
pub mod key;
pub mod problem;
pub mod reason;
pub mod record;
pub mod redact;
mod scratch;
mod sha_pair;
pub mod sink;
pub mod summary;
pub mod time;
pub mod tlog;
pub mod trace;
pub mod verify;

pub use budget::{Budget, DegradeReason, OnAuditFailure, Outcome};
pub use calls::{Call, Unfinished, join_calls, unfinished_calls};
pub use chain::ChainHead;
pub use checkpoint::{
    ChainProblem, ChainsReport, Checkpoint, CheckpointEvery, CheckpointSchedule, CheckpointSigner,
    CheckpointVerifier, WriterReport, verify_chains,
};
pub use dispatch::{
    AuditedDispatch, Caller, MAX_INCIDENT_ID_CHARS, Redactor, Request, Started, Subject,
};
pub use error::AuditError;
pub use jsonl::{FlushPolicy, JsonlSink};
pub use key::{DIGEST_KEY_LEN, DigestKey, KEYED_DIGEST_PREFIX, KeyError};
pub use reason::{Consent, ConsentKind, Reason};
pub use record::{AuditRecord, GENESIS, Phase, Principal, Verdict};
pub use redact::redact_sensitive;
pub(crate) use sink::SinkKey;
pub use sink::{AuditSink, MemorySink};
pub use summary::{SessionSummary, TrailCounts, sessions};
pub use time::{utc_now, utc_now_after};
pub use verify::{
    ProblemKind, TrailProblem, VerifyReport, read_jsonl, verify_jsonl,
    verify_jsonl_with_checkpoints, verify_jsonl_with_key,
};

/// Locks a mutex, going on with its data after a panic elsewhere: a poisoned lock must not stop
/// the trail, and every writer leaves the data consistent between statements.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
