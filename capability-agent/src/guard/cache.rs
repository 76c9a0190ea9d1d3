//! The stable cache: a loop's final outcome kept per incident, role and policy version for a
//! TTL, so a repeat is answered without a model turn or a tool call.
//!
//! A store keeps entries as opaque text ([`ResultCache`]); the guard seals each with an
//! HMAC-SHA-256 under its key ([`DigestKey`]) over the whole entry (its key, role, policy
//! version and expiry included). An entry planted or edited in the store, or copied under
//! another key, does not open: it is a miss, the loop runs, and the guard says so
//! ([`GuardNote::ForgedEntry`](super::GuardNote::ForgedEntry)).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use capability_audit::DigestKey;
use serde::{Deserialize, Serialize};

use super::GuardError;

/// The seam: where cache entries live. In memory ([`MemoryCache`]), or in a database every
/// replica shares (`capability-store`).
pub trait ResultCache: Send + Sync {
    /// The entry stored under `key`, unless it expired (`expires_ms <= now_ms`).
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<String>, GuardError>;

    /// Stores `entry` under `key` until `expires_ms`, replacing what was there (and may drop
    /// entries expired at `now_ms`).
    fn put(&self, key: &str, entry: &str, now_ms: u64, expires_ms: u64) -> Result<(), GuardError>;
}

/// Cache entries in this process's memory.
#[derive(Debug, Default)]
pub struct MemoryCache {
    entries: Mutex<HashMap<String, (String, u64)>>,
}

impl MemoryCache {
    /// An empty cache.
    pub fn new() -> Self {
        MemoryCache::default()
    }
}

impl ResultCache for MemoryCache {
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<String>, GuardError> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(entries
            .get(key)
            .filter(|(_, expires)| *expires > now_ms)
            .map(|(entry, _)| entry.clone()))
    }

    fn put(&self, key: &str, entry: &str, now_ms: u64, expires_ms: u64) -> Result<(), GuardError> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|_, (_, expires)| *expires > now_ms);
        entries.insert(key.to_owned(), (entry.to_owned(), expires_ms));
        Ok(())
    }
}

/// Where in the audit trail a loop's records are: from `first_seq` to `last_seq` of `writer`'s
/// chain (records of other work may sit between; the loop's carry its incident id).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRange {
    /// The writer (the audit sink's chain).
    pub writer: String,
    /// The first record.
    pub first_seq: u64,
    /// The last record.
    pub last_seq: u64,
}

/// How the cached run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CachedResult {
    /// The final answer.
    Answer {
        /// Its text.
        text: String,
    },
    /// The degrade (kept for the shorter TTL).
    Degraded {
        /// Why, as the degrade says it.
        reason: String,
    },
}

/// A loop's outcome as cached, with where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedOutcome {
    /// The incident's key.
    pub key: String,
    /// The role the loop ran as.
    pub role: String,
    /// The policy version it was decided under.
    pub policy_version: Option<String>,
    /// The answer or the degrade.
    pub result: CachedResult,
    /// Model turns the run made.
    pub iterations: u32,
    /// Tool calls it handled.
    pub tool_calls: u32,
    /// Where its records are in the audit trail (none when it recorded nothing).
    pub calls: Option<AuditRange>,
    /// The process that ran it.
    pub holder: String,
    /// Stored at (ms since the Unix epoch).
    pub stored_ms: u64,
    /// Not served from this moment on.
    pub expires_ms: u64,
}

impl CachedOutcome {
    /// The answer's text, if the run ended with one.
    pub fn answer(&self) -> Option<&str> {
        match &self.result {
            CachedResult::Answer { text } => Some(text),
            CachedResult::Degraded { .. } => None,
        }
    }
}

/// The store's key of an entry: incident, role and policy version, so a role or a policy change
/// is never answered from before it.
pub(super) fn cache_key(key: &str, role: &str, policy_version: Option<&str>) -> String {
    serde_json::json!([key, role, policy_version]).to_string()
}

/// `mac` then a newline then the entry's JSON.
pub(super) fn seal(entry: &CachedOutcome, mac_key: &DigestKey) -> String {
    let json = serde_json::to_string(entry).unwrap_or_default();
    format!("{}\n{json}", mac_key.digest(json.as_bytes()))
}

/// The entry, if `sealed` is one this key sealed, for `(key, role, policy_version)`, and not
/// expired at `now_ms`. `Err(())`: it is not (planted, edited, copied under another key).
pub(super) fn open(
    sealed: &str,
    mac_key: &DigestKey,
    wanted: (&str, &str, Option<&str>),
    now_ms: u64,
) -> Result<Option<CachedOutcome>, ()> {
    let (mac, json) = sealed.split_once('\n').ok_or(())?;
    if !constant_time_eq(mac.as_bytes(), mac_key.digest(json.as_bytes()).as_bytes()) {
        return Err(());
    }
    let entry: CachedOutcome = serde_json::from_str(json).map_err(|_| ())?;
    if (
        entry.key.as_str(),
        entry.role.as_str(),
        entry.policy_version.as_deref(),
    ) != wanted
    {
        return Err(());
    }
    Ok((entry.expires_ms > now_ms).then_some(entry))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
