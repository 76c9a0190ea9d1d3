//! A trail summed up for people: what its records are ([`TrailCounts`]: records, calls, events,
//! checkpoints, in the words `capability audit verify` and `capability audit stats` share) and
//! its sessions ([`sessions`]: who, when, how many calls of each kind).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::*;

/// What a trail's records are. A call that runs is two records (its intent, then its outcome);
/// a call that does not run is one (denied, degraded, not recorded), and so is an event (a
/// reload, a log level: nothing decided or run). `calls` is what `audit stats` and
/// `mcp_daily_stats` count: every record but an outcome.
///
/// ```
/// use capability::audit::{AuditedDispatch, Caller, MemorySink, Outcome, TrailCounts};
/// use capability::authz::{Ceiling, ToolContext};
/// use capability::CapabilityManifest;
/// use std::sync::Arc;
///
/// let sink = Arc::new(MemorySink::new());
/// let dispatch = AuditedDispatch::new(sink.clone());
/// let ctx = ToolContext::new("monitor", "s-1", Ceiling::ReadOnly);
/// let list = CapabilityManifest::builder("list_pods").read_only(true).build()?;
/// let restart = CapabilityManifest::builder("restart_pod").destructive(true).build()?;
/// let input = serde_json::json!({});
/// let _: Outcome<u8, String> = dispatch.call(&ctx, Caller::new("a"), &list, &input, || Ok(1));
/// let _: Outcome<u8, String> = dispatch.call(&ctx, Caller::new("a"), &restart, &input, || Ok(1));
///
/// let counts = TrailCounts::of(&sink.records(), 0);
/// assert_eq!((counts.records, counts.calls, counts.intents, counts.refused), (3, 2, 1, 1));
/// assert_eq!(
///     counts.to_string(),
///     "3 records: 2 calls (1 ran, an intent and an outcome each; 1 refused, one record each)"
/// );
/// # Ok::<(), capability::ManifestError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TrailCounts {
    /// Every record (checkpoints are not records).
    pub records: u64,
    /// The calls: intents and single records (every record but an outcome), as `audit stats`
    /// counts them.
    pub calls: u64,
    /// Intents: calls that ran (or started).
    pub intents: u64,
    /// Outcomes of calls that ran.
    pub outcomes: u64,
    /// Calls that did not run, one record each (denied, degraded, not recorded).
    pub refused: u64,
    /// Events, one record each: nothing decided or run ([`Call::is_event`]).
    pub events: u64,
    /// Calls that ran, recorded in one record (trails written before intents).
    pub single_ran: u64,
    /// Signed checkpoints between the records.
    pub checkpoints: u64,
}

impl TrailCounts {
    /// The counts of `records`, and `checkpoints` checkpoints beside them.
    pub fn of(records: &[AuditRecord], checkpoints: usize) -> TrailCounts {
        let mut counts = TrailCounts {
            records: records.len() as u64,
            checkpoints: checkpoints as u64,
            ..TrailCounts::default()
        };
        for record in records {
            let call = Call {
                first: record,
                outcome: None,
            };
            match record.phase {
                Some(Phase::Intent) => counts.intents += 1,
                Some(Phase::Outcome) => counts.outcomes += 1,
                None if call.is_event() => counts.events += 1,
                None if record.verdict == Verdict::Allowed => counts.single_ran += 1,
                None => counts.refused += 1,
            }
        }
        counts.calls = counts.records - counts.outcomes;
        counts
    }
}

impl fmt::Display for TrailCounts {
    /// `21 records: 11 calls (10 ran, an intent and an outcome each; 1 refused, one record
    /// each); 2 checkpoints besides`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.intents > 0 || self.outcomes > 0 {
            parts.push(if self.intents == self.outcomes {
                format!("{} ran, an intent and an outcome each", self.intents)
            } else {
                format!(
                    "{} ran or started: {}, {}",
                    self.intents,
                    count(self.intents, "intent"),
                    count(self.outcomes, "outcome")
                )
            });
        }
        if self.single_ran > 0 {
            let written = "one record each (written before intents were)";
            parts.push(format!("{} ran, {written}", self.single_ran));
        }
        if self.refused > 0 {
            parts.push(format!("{} refused, one record each", self.refused));
        }
        if self.events > 0 {
            let events = count(self.events, "event");
            parts.push(format!("{events} (a reload, a log level), one record each"));
        }
        write!(
            f,
            "{}: {}",
            count(self.records, "record"),
            count(self.calls, "call")
        )?;
        if !parts.is_empty() {
            write!(f, " ({})", parts.join("; "))?;
        }
        if self.checkpoints > 0 {
            write!(f, "; {} besides", count(self.checkpoints, "checkpoint"))?;
        }
        Ok(())
    }
}

/// `1 record`, `2 records`.
fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// One session of a trail: who called in it, when, and how its calls went.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SessionSummary {
    /// The session.
    pub session: String,
    /// The principals that called in it ([`Principal::key`]), sorted; empty when no edge
    /// authenticated its callers.
    pub principals: Vec<String>,
    /// Its roles, sorted (one, as a rule: a session's name holds its role).
    pub roles: Vec<String>,
    /// When its first call was decided (RFC 3339, UTC).
    pub first: String,
    /// When its last record was written (RFC 3339, UTC).
    pub last: String,
    /// Its calls, as [`TrailCounts::calls`] counts them.
    pub calls: u64,
    /// Calls allowed (that ran, and events).
    pub allowed: u64,
    /// Calls denied (held ones among them).
    pub denied: u64,
    /// Calls refused because the session was degraded (over its budget).
    pub degraded: u64,
    /// Calls refused because their record could not be written.
    pub audit_failed: u64,
    /// Calls held for a human's approval that came without one ([`Call::held`]).
    pub held: u64,
    /// Calls that ran with a human's consent ([`Call::consent`]).
    pub approved: u64,
    /// Calls that ran and failed ([`Call::failed`]).
    pub failed: u64,
    /// Calls that started and have no outcome recorded.
    pub unfinished: u64,
}

/// The sessions of `records` (any order, any writers), by their first call's time.
pub fn sessions(records: &[AuditRecord]) -> Vec<SessionSummary> {
    let mut by_session: BTreeMap<&str, (SessionSummary, BTreeSet<String>, BTreeSet<&str>)> =
        BTreeMap::new();
    for call in join_calls(records) {
        let first = call.first;
        let (summary, principals, roles) = by_session.entry(&first.session).or_default();
        if summary.first.is_empty() || first.time < summary.first {
            summary.first.clone_from(&first.time);
        }
        let end = &call.end().time;
        if *end > summary.last {
            summary.last.clone_from(end);
        }
        principals.extend(first.principal.as_ref().map(Principal::key));
        roles.insert(&first.role);
        if first.phase == Some(Phase::Outcome) {
            // An outcome without its intent: no call of its own (`audit stats` skips it too).
            continue;
        }
        summary.calls += 1;
        match first.verdict {
            Verdict::Allowed => summary.allowed += 1,
            Verdict::Denied => summary.denied += 1,
            Verdict::Degraded => summary.degraded += 1,
            Verdict::AuditFailed => summary.audit_failed += 1,
        }
        summary.held += u64::from(call.held());
        summary.approved += u64::from(call.consent().is_some());
        summary.failed += u64::from(call.failed());
        summary.unfinished += u64::from(call.started_only());
    }
    let mut sessions: Vec<SessionSummary> = by_session
        .into_iter()
        .map(|(session, (mut summary, principals, roles))| {
            session.clone_into(&mut summary.session);
            summary.principals = principals.into_iter().collect();
            summary.roles = roles.into_iter().map(str::to_owned).collect();
            summary
        })
        .collect();
    sessions.sort_by(|a, b| (&a.first, &a.session).cmp(&(&b.first, &b.session)));
    sessions
}
