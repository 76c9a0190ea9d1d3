//! Durable shared state of `capability`: the approval ledger, the revocation store and the audit
//! trail, in a database every process of a deployment shares.
//!
//! - **SQLite** (feature `sqlite`, on by default): one file, no server, SQLite compiled in.
//! - **PostgreSQL** (feature `postgres`): for fleets; the audit goes into the tables of ADR-105,
//!   `mcp_audit_log` and `mcp_daily_stats`, next to the platform's other data.
//!
//! [`open`] takes what a user types: a path is a SQLite database, `postgres://...` (or
//! `postgresql://...`) is PostgreSQL. Both apply the same schema ([`migrate`](Store::migrate),
//! `capability db migrate <url>`), and refuse a database at a newer schema version.
//!
//! A store that cannot be reached means refusal: no approval consumed, no grant believed, no
//! call run.
//!
//! # Which store for what
//!
//! | state | in memory (tests, one process) | SQLite (one host) | PostgreSQL (a fleet) |
//! |---|---|---|---|
//! | used approval ids | `capability_gate::MemoryLedger` | [`Store::ledger`] | [`Store::ledger`] |
//! | revocations | `capability_gate::MemoryRevocations` | [`Store::revocations`] | [`Store::revocations`] |
//! | audit trail | `MemorySink`, `JsonlSink` (a file per process) | [`Store::audit_sink`] | [`Store::audit_sink`] |
//! | agent loop leases | `capability_agent::guard::MemoryLeases` | [`Store::leases`] | [`Store::leases`] |
//! | agent loop results | `capability_agent::guard::MemoryCache` | [`Store::loop_cache`] | [`Store::loop_cache`] |
//!
//! Use SQLite when every process that gates, decides or audits runs on one host (one file,
//! no server; its processes share it safely); PostgreSQL when they run on several hosts, or
//! when the audit belongs next to the platform's other data (ADR-105).
//!
//! # Schema
//!
//! `mcp_audit_log` (one row per record; each writer's chain is (`writer_id`, `seq`), unique),
//! `mcp_audit_checkpoint` (signed checkpoints), `capability_approval_ledger`,
//! `capability_revocation`, `capability_loop_lease` and `capability_loop_cache` (the agent
//! loop's guards), `capability_proposal` (a gateway's proposals waiting for approvers),
//! `mcp_tool_versions` (each server's tool descriptors as gateways saw them and operators
//! pinned them), the view `mcp_daily_stats` (per UTC day, role, provider, tool: calls,
//! allowed, denied, errors, degraded, nearest-rank p50 and p95 latency), and
//! `capability_schema_version`. How a record maps to its row, and the percentile rule: [`row`].
//!
//! `mcp_daily_stats` does not scan the log: it reads sums (`mcp_daily_counts`, and
//! `mcp_daily_latency`, a count per latency rounded down to three significant digits,
//! [`row::latency_bucket`], so its percentiles are at most 1% below the exact ones), and costs
//! the number of its keys and latency buckets, not of records. It is exact at every moment:
//! - PostgreSQL: statement triggers on `mcp_audit_log` append each insert's (delete's, edit's)
//!   sums as deltas in the writer's own transaction (no shared counter row, so writers never
//!   wait for each other); the audit sinks compact them every 5 seconds, and
//!   [`Store::daily_stats`] before it reads; the view adds the deltas not yet compacted.
//! - SQLite: the sums cover the records up to a mark; the view adds the records after it (the
//!   log's tail), and [`Store::daily_stats`] folds the tail in first. A writer pays nothing per
//!   record; triggers take away a summed record that is deleted or edited.
//!
//! # Audit sinks
//!
//! A sink writes as one writer ([`SinkOptions::writer`]; [`row::new_writer_id`] makes a unique
//! one), resumes that writer's chain if the database has it, and returns from `append` only
//! once the record is committed: a process killed afterwards does not lose it. Concurrent
//! appends share one commit (group commit). With [`SinkOptions::checkpoints`] it signs
//! checkpoints at intervals and when closed; verify a store's trail with
//! `capability_audit::verify_chains(&trail.records, &trail.checkpoints, Some(&public_key))`
//! over [`Store::read_trail`].

//!
#![doc = include_str!("../../docs/storage.md")]
#![forbid(unsafe_code)]

use std::sync::Arc;

use capability_agent::guard::{LeaseStore, ResultCache};
use capability_audit::{AuditError, AuditSink, Checkpoint, CheckpointEvery, CheckpointSigner};
use capability_audit::{AuditRecord, DigestKey};
use capability_gate::{ApprovalLedger, RevocationStore, StoreError};
use serde::Serialize;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod guards;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod proposals;
pub mod row;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod stats;
mod target;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod versions;

pub use target::{TargetKind, target_kind};

/// The schema version this build writes and reads. A database at a newer version is refused.
pub const SCHEMA_VERSION: u32 = 7;

/// A database holding the shared state: a SQLite file or a PostgreSQL database.
pub trait Store: Send + Sync {
    /// Where it is, for messages: `sqlite:/path` or `postgres://host:port/db` (no password).
    fn describe(&self) -> String;

    /// Applies the migrations this build ships, in order, and returns the schema version. A
    /// database at a newer version than [`SCHEMA_VERSION`] is refused, and nothing is changed.
    fn migrate(&self) -> Result<u32, StoreError>;

    /// The approval ledger, shared with every process using this database.
    fn ledger(&self) -> Arc<dyn ApprovalLedger>;

    /// The revocation store, shared with every process using this database.
    fn revocations(&self) -> Arc<dyn RevocationStore>;

    /// The agent loop's in-flight leases (`capability_loop_lease`), shared with every process
    /// using this database: one loop per incident across them.
    fn leases(&self) -> Arc<dyn LeaseStore>;

    /// The agent loop's result cache (`capability_loop_cache`), shared likewise.
    fn loop_cache(&self) -> Arc<dyn ResultCache>;

    /// An audit sink appending to `mcp_audit_log` as one writer (its own chain).
    fn audit_sink(&self, options: SinkOptions) -> Result<Arc<dyn AuditSink>, AuditError>;

    /// Every record and checkpoint, for verification.
    fn read_trail(&self) -> Result<Trail, StoreError>;

    /// Stores `note`, one of a writer's tree checkpoints with witnesses' cosignature lines
    /// added, over the stored note of the same body (`capability audit witness-submit`);
    /// `false` when the store holds no tree checkpoint of that body.
    fn store_cosigned(
        &self,
        note: &capability_audit::tlog::SignedCheckpoint,
    ) -> Result<bool, StoreError>;

    /// `mcp_daily_stats`, sorted by day, role, provider and tool.
    fn daily_stats(&self) -> Result<Vec<DailyStats>, StoreError>;

    /// Keeps a gateway's proposal for approvers (`capability_proposal`). One already kept
    /// under the same id is replaced only once it stopped waiting (the same call proposed
    /// again keeps its first proposal).
    fn keep_proposal(&self, proposal: &KeptProposal) -> Result<(), StoreError>;

    /// The proposals still waiting at `now` (Unix seconds), oldest first.
    fn proposals(&self, now: u64) -> Result<Vec<KeptProposal>, StoreError>;

    /// Forgets a proposal (its approval was used); `false` when none had this id.
    fn drop_proposal(&self, id: &str) -> Result<bool, StoreError>;

    /// Records in `mcp_tool_versions` that a gateway saw these tools at `at` (Unix seconds): a
    /// new (server, tool, descriptor hash) is first and last seen then; a known one is last
    /// seen then (never earlier than it was). One transaction.
    fn saw_tools(&self, tools: &[ToolHash], at: u64) -> Result<(), StoreError>;

    /// Records that `by` pinned these tools at `at` (Unix seconds); they are seen then too.
    /// One transaction.
    fn pinned_tools(&self, tools: &[ToolHash], by: &str, at: u64) -> Result<(), StoreError>;

    /// `mcp_tool_versions`, of one server and one tool when given, by server, tool and first
    /// seen.
    fn tool_versions(
        &self,
        server: Option<&str>,
        tool: Option<&str>,
    ) -> Result<Vec<ToolVersion>, StoreError>;
}

/// One tool descriptor of a server: what [`Store::saw_tools`] and [`Store::pinned_tools`]
/// record.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ToolHash {
    /// The server, as the policy names it.
    pub server: String,
    /// The tool's own name on that server.
    pub tool: String,
    /// The SHA-256 of its MCP descriptor, as `capability.lock` pins it.
    pub descriptor_hash: String,
}

/// One row of `mcp_tool_versions`: a descriptor of a tool, when it was seen, who pinned it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolVersion {
    /// The server.
    pub server: String,
    /// The tool's own name.
    pub tool: String,
    /// The SHA-256 of its MCP descriptor.
    pub descriptor_hash: String,
    /// When a gateway (or a pin) first saw it, in Unix seconds.
    pub first_seen: u64,
    /// When last, in Unix seconds.
    pub last_seen: u64,
    /// Who pinned it last, if anyone did.
    pub pinned_by: Option<String>,
    /// When, in Unix seconds.
    pub pinned_at: Option<u64>,
}

/// A proposal kept in the store for approvers: its id, what it is for, and the proposal file's
/// JSON (`body`), which `capability approve` reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeptProposal {
    /// The proposal's id.
    pub id: String,
    /// The gateway it is for.
    pub audience: String,
    /// The server of the tool.
    pub server: String,
    /// The tool's own name.
    pub tool: String,
    /// Who proposed it.
    pub proposer: String,
    /// When, in Unix seconds.
    pub created_at: u64,
    /// Until when it waits, in Unix seconds.
    pub expires_at: u64,
    /// The proposal file's JSON.
    pub body: String,
}

/// Opens the store `target` names: a path is SQLite, `postgres://...` is PostgreSQL. It is not
/// migrated: call [`Store::migrate`] (or `capability db migrate`) first.
pub fn open(target: &str) -> Result<Box<dyn Store>, StoreError> {
    if target.starts_with("postgres://") || target.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        {
            return Ok(Box::new(postgres::PgStore::connect(target)?));
        }
        #[cfg(not(feature = "postgres"))]
        {
            return Err(StoreError::new(
                redact_url(target),
                "this build has no PostgreSQL support (the `postgres` feature of capability-store)",
            ));
        }
    }
    if target_kind(target) == TargetKind::Jsonl {
        return Err(StoreError::new(
            target,
            "a file that is not a SQLite database: a JSON Lines trail is read with `capability \
             audit verify` (or `capability_audit::verify_jsonl`), a database is made with \
             `capability db migrate <new file>`",
        ));
    }
    #[cfg(feature = "sqlite")]
    {
        Ok(Box::new(sqlite::SqliteStore::open(target)?))
    }
    #[cfg(not(feature = "sqlite"))]
    {
        Err(StoreError::new(
            target,
            "this build has no SQLite support (the `sqlite` feature of capability-store)",
        ))
    }
}

/// A PostgreSQL URL without its password, for messages: the `user:password@` part keeps only
/// the user, and a `password=` parameter's value becomes `***`.
pub fn redact_url(url: &str) -> String {
    let url = match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{}{}@{}", &url[..scheme + 3], user, &url[at + 1..])
        }
        _ => url.to_owned(),
    };
    let Some((base, query)) = url.split_once('?') else {
        return url;
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

/// How an audit sink writes.
pub struct SinkOptions {
    /// This writer's id: each writer keeps its own chain (writer, seq). Two live writers must
    /// not share one id.
    pub writer: String,
    /// The key of the records' keyed digests; a random one of this sink when `None`.
    pub digest_key: Option<DigestKey>,
    /// Signs checkpoints, at these intervals and when the sink is closed.
    pub checkpoints: Option<(Arc<dyn CheckpointSigner>, CheckpointEvery)>,
    /// Where each tree checkpoint goes once stored, with the leaf hashes since (for witnesses:
    /// `capability_http::witness::WitnessFeed`).
    pub feed: Option<Arc<dyn capability_audit::jsonl::CheckpointFeed>>,
}

impl SinkOptions {
    /// Options for writer `writer`, with a random digest key and no checkpoints.
    pub fn writer(writer: impl Into<String>) -> Self {
        SinkOptions {
            writer: writer.into(),
            digest_key: None,
            checkpoints: None,
            feed: None,
        }
    }
}

/// Everything in a store's audit tables.
#[derive(Clone, Debug, Default)]
pub struct Trail {
    /// The records, by writer and seq.
    pub records: Vec<AuditRecord>,
    /// The checkpoints, by writer and seq.
    pub checkpoints: Vec<Checkpoint>,
    /// The signed tree checkpoints (C2SP notes, as text), by writer and size
    /// (`mcp_audit_tree_checkpoint`): check them with [`Trail::tree_problems`].
    pub tree_checkpoints: Vec<String>,
    /// Every writer registered in the store (`mcp_audit_writer`), by writer id.
    pub writers: Vec<RegisteredWriter>,
    /// Rows whose columns say something else than the record they verify as: what the stats
    /// and the dashboards read is not what the chain vouches for. Any entry here means the
    /// table was edited.
    pub problems: Vec<RowProblem>,
}

/// A writer registered in a store (`mcp_audit_writer`): the first time it opened a sink that
/// signs checkpoints, it signed a tree checkpoint of what it had then (its registration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredWriter {
    /// The writer id.
    pub writer: String,
    /// Its registration: a signed tree checkpoint (C2SP note, as text).
    pub note: String,
}

impl Trail {
    /// What the stored tree checkpoints and the writers' registrations show, by writer
    /// (`capability_audit::tlog::verify_trees`): with `key`, their signatures; a checkpoint
    /// beyond the writer's records (a cut tail), one whose root the records no longer hash to
    /// (a rewritten record); a registered writer with no records and no checkpoint left (a
    /// removed writer); a registration that names one no longer stored, and a writer's tree
    /// checkpoint that names the store's latest registration as it signed, no longer stored (a
    /// writer removed with its registration, even the latest: `capability_audit::tlog::writers`).
    pub fn tree_problems(
        &self,
        key: Option<&dyn capability_audit::CheckpointVerifier>,
    ) -> std::collections::BTreeMap<String, Vec<capability_audit::ChainProblem>> {
        use capability_audit::tlog;
        let (notes, bad) = tlog::stored::parse_notes(&self.tree_checkpoints);
        let mut problems = tlog::verify_trees(&self.records, &notes, key);
        if !bad.is_empty() {
            problems.entry(String::new()).or_default().extend(bad);
        }
        for registered in &self.writers {
            let writer = registered.writer.as_str();
            let (registration, bad) =
                tlog::stored::parse_notes(std::slice::from_ref(&registered.note));
            let found = problems.entry(writer.to_owned()).or_default();
            found.extend(bad);
            let Some(note) = registration.first() else {
                continue;
            };
            if let Some(key) = key
                && let Err(e) = note.verify(&note.head.origin, key)
            {
                found.push(capability_audit::ChainProblem::BadTreeCheckpoint {
                    size: note.head.size,
                    why: format!("the writer's registration: {e}"),
                });
                continue;
            }
            let has_records = self.records.iter().any(|r| r.writer == writer);
            let has_notes = notes
                .iter()
                .any(|n| tlog::stored::checkpoint_writer(n) == Some(writer));
            if !has_records && !has_notes {
                found.push(capability_audit::ChainProblem::WriterGone {
                    writer: writer.to_owned(),
                    registered_at: tlog::checkpoint_time(note).unwrap_or_default().to_owned(),
                });
            }
        }
        let registrations: Vec<String> = self.writers.iter().map(|w| w.note.clone()).collect();
        let gone = tlog::writers::registration_problems(&registrations);
        let removed = tlog::writers::removed_registration_problems(&notes, &registrations, key);
        for (writer, found) in gone.into_iter().chain(removed) {
            problems.entry(writer).or_default().extend(found);
        }
        problems.retain(|_, p| !p.is_empty());
        problems
    }

    /// Every writer's chain checked (`capability_audit::verify_chains` over the records and
    /// checkpoints) and, with `key`, what the tree checkpoints and the registrations show added
    /// to each writer's problems ([`tree_problems`](Self::tree_problems)); a registered writer
    /// with no record left is reported too. What `capability audit verify` says of a database.
    /// Without a key, as the chain's checkpoints, the tree's are not looked at.
    pub fn verify(
        &self,
        key: Option<&dyn capability_audit::CheckpointVerifier>,
    ) -> capability_audit::ChainsReport {
        let mut report = capability_audit::verify_chains(&self.records, &self.checkpoints, key);
        if key.is_none() {
            return report;
        }
        for (writer, problems) in self.tree_problems(key) {
            match report.writers.iter_mut().find(|w| w.writer == writer) {
                Some(found) => found.problems.extend(problems),
                None => report.writers.push(capability_audit::WriterReport {
                    writer,
                    records: 0,
                    checkpointed: 0,
                    problems,
                    unfinished: Vec::new(),
                }),
            }
        }
        report.writers.sort_by(|a, b| a.writer.cmp(&b.writer));
        report
    }

    /// Spans longer than a writer's sink lets pass without a signed tree checkpoint (`every`:
    /// the interval of its `CheckpointEvery`), up to `now` (RFC 3339 UTC) for a writer that did
    /// not stop: a cut that also removed the checkpoints after it, or a writer killed
    /// (`capability_audit::tlog::checkpoint_gaps`). A sink of [`Store::audit_sink`] (SQLite
    /// and PostgreSQL) signs one when idle too, and marks the one it signs as it closes.
    pub fn checkpoint_gaps(
        &self,
        every: std::time::Duration,
        now: &str,
    ) -> std::collections::BTreeMap<String, Vec<capability_audit::ChainProblem>> {
        let (notes, _) = capability_audit::tlog::stored::parse_notes(&self.tree_checkpoints);
        capability_audit::tlog::checkpoint_gaps(&notes, every, now)
    }
}

/// A row of `mcp_audit_log` one of whose columns differs from the record the row verifies as
/// (its `record_json`, on PostgreSQL): an edit that the hash chain alone would not show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowProblem {
    /// The row's writer.
    pub writer: String,
    /// The row's `seq`.
    pub seq: u64,
    /// The column.
    pub column: String,
    /// What the column holds.
    pub found: String,
    /// What the record says it should hold.
    pub expected: String,
}

impl std::fmt::Display for RowProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "row of writer `{}`, seq {}: column `{}` holds {}, but the record it verifies as \
             says {} (the column was edited)",
            self.writer, self.seq, self.column, self.found, self.expected
        )
    }
}

/// One row of `mcp_daily_stats`: the calls of one day (UTC), role, provider and tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DailyStats {
    /// The day, `YYYY-MM-DD`.
    pub day: String,
    /// The role (`agent_role`).
    pub role: String,
    /// The tool's provider (empty when it has none).
    pub provider: String,
    /// The tool.
    pub tool: String,
    /// Every call.
    pub calls: u64,
    /// Calls allowed (and run).
    pub allowed: u64,
    /// Calls denied.
    pub denied: u64,
    /// Calls that ran and failed (or were aborted).
    pub errors: u64,
    /// Calls degraded.
    pub degraded: u64,
    /// The median latency of the calls that ran, in microseconds.
    pub p50_latency_us: Option<u64>,
    /// The 95th percentile latency of the calls that ran, in microseconds.
    pub p95_latency_us: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn a_json_lines_path_is_not_opened_as_a_database() {
        let dir =
            std::env::temp_dir().join(format!("capability-store-jsonl-{}", std::process::id()));
        let path = dir.join("audit.jsonl");
        let error = match super::open(&path.display().to_string()) {
            Ok(_) => panic!("opened a JSON Lines path as a database"),
            Err(error) => error,
        };
        assert!(error.to_string().contains("JSON Lines"), "{error}");
        assert!(!path.exists(), "nothing is created");
    }

    #[test]
    fn urls_lose_their_passwords() {
        assert_eq!(
            redact_url("postgres://app:s3cret@db/platform"),
            "postgres://app@db/platform"
        );
        assert_eq!(
            redact_url("postgres://db/platform?user=app&password=s3cret&sslmode=disable"),
            "postgres://db/platform?user=app&password=***&sslmode=disable"
        );
        assert_eq!(redact_url("state.db"), "state.db");
    }
}
