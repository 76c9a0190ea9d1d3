//! `mcp_daily_stats` computed from records: for a JSON Lines trail, and for tests comparing a
//! database's view with their own `GROUP BY`.

use std::collections::BTreeMap;

use capability_audit::{AuditRecord, Phase, Verdict};

use crate::DailyStats;
use crate::row::{latency_bucket, nearest_rank};

/// Day, role, provider, tool.
type Key = (String, String, String, String);

impl DailyStats {
    /// `mcp_daily_stats` computed from records (a JSON Lines trail, or a test's own GROUP BY),
    /// by the same rules as the databases: the UTC day of `time`; a call counted once (by its
    /// intent when it ran, by its one record when it did not); errors are calls that ran and
    /// failed; latencies are those of calls that ran (their outcomes), nearest-rank percentiles
    /// over latencies rounded down to three significant digits ([`latency_bucket`]).
    pub fn from_records(records: &[AuditRecord]) -> Vec<DailyStats> {
        let mut rows: BTreeMap<Key, (DailyStats, Vec<u64>)> = BTreeMap::new();
        for record in records {
            let day = record.time.get(..10).unwrap_or(&record.time).to_owned();
            let provider = record.provider.clone().unwrap_or_default();
            let key = (
                day.clone(),
                record.role.clone(),
                provider.clone(),
                record.tool.clone(),
            );
            let (row, latencies) = rows.entry(key).or_insert_with(|| {
                (
                    DailyStats {
                        day,
                        role: record.role.clone(),
                        provider,
                        tool: record.tool.clone(),
                        calls: 0,
                        allowed: 0,
                        denied: 0,
                        errors: 0,
                        degraded: 0,
                        p50_latency_us: None,
                        p95_latency_us: None,
                    },
                    Vec::new(),
                )
            });
            let call = record.phase != Some(Phase::Outcome);
            row.calls += u64::from(call);
            match record.verdict {
                Verdict::Allowed if !call => {}
                Verdict::Allowed => row.allowed += 1,
                Verdict::Denied => row.denied += 1,
                Verdict::Degraded => row.degraded += 1,
                // Counted in `calls` only, as in the databases' `mcp_daily_stats`.
                Verdict::AuditFailed => {}
            }
            if record.success == Some(false) {
                row.errors += 1;
            }
            if let Some(latency) = record.latency_us {
                latencies.push(latency_bucket(latency));
            }
        }
        rows.into_values()
            .map(|(mut row, mut latencies)| {
                latencies.sort_unstable();
                row.p50_latency_us = percentile(&latencies, 50);
                row.p95_latency_us = percentile(&latencies, 95);
                row
            })
            .collect()
    }
}

/// The nearest-rank percentile of sorted values (see [`nearest_rank`]).
fn percentile(sorted: &[u64], percent: u64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    sorted
        .get(nearest_rank(percent, sorted.len() as u64) as usize - 1)
        .copied()
}
