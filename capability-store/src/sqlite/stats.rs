//! `mcp_daily_stats` in SQLite (migration 6): the log's tail folded into the sums.

/// Folds the records after the last one summed into `mcp_daily_counts` and
/// `mcp_daily_latency`, and moves the mark (`?1`: the largest rowid to fold). Run in one
/// transaction that holds the write lock, so no record commits in between.
pub(crate) const FOLD: &str = "
INSERT INTO mcp_daily_counts
    (day, role, provider, tool, records, calls, allowed, denied, errors, degraded)
SELECT substr(time, 1, 10), agent_role, COALESCE(provider, ''), tool,
       COUNT(*),
       COUNT(CASE WHEN phase IS NULL OR phase = 'intent' THEN 1 END),
       COUNT(CASE WHEN verdict = 'allowed' AND (phase IS NULL OR phase = 'intent') THEN 1 END),
       COUNT(CASE WHEN verdict = 'denied' THEN 1 END),
       COUNT(CASE WHEN success = 0 THEN 1 END),
       COUNT(CASE WHEN verdict = 'degraded' THEN 1 END)
FROM mcp_audit_log
WHERE rowid > (SELECT last_rowid FROM mcp_daily_folded) AND rowid <= ?1
GROUP BY 1, 2, 3, 4
ON CONFLICT (day, role, provider, tool) DO UPDATE SET
    records  = records  + excluded.records,
    calls    = calls    + excluded.calls,
    allowed  = allowed  + excluded.allowed,
    denied   = denied   + excluded.denied,
    errors   = errors   + excluded.errors,
    degraded = degraded + excluded.degraded";

/// The latencies of the same records, by bucket ([`crate::row::latency_bucket`]).
pub(crate) const FOLD_LATENCY: &str = "
INSERT INTO mcp_daily_latency (day, role, provider, tool, latency_us, n)
SELECT substr(time, 1, 10), agent_role, COALESCE(provider, ''), tool,
       CASE WHEN latency_us < 1000 THEN latency_us
           WHEN latency_us < 10000 THEN latency_us / 10 * 10
           WHEN latency_us < 100000 THEN latency_us / 100 * 100
           WHEN latency_us < 1000000 THEN latency_us / 1000 * 1000
           WHEN latency_us < 10000000 THEN latency_us / 10000 * 10000
           WHEN latency_us < 100000000 THEN latency_us / 100000 * 100000
           WHEN latency_us < 1000000000 THEN latency_us / 1000000 * 1000000
           WHEN latency_us < 10000000000 THEN latency_us / 10000000 * 10000000
           WHEN latency_us < 100000000000 THEN latency_us / 100000000 * 100000000
           WHEN latency_us < 1000000000000 THEN latency_us / 1000000000 * 1000000000
           WHEN latency_us < 10000000000000 THEN latency_us / 10000000000 * 10000000000
           WHEN latency_us < 100000000000000 THEN latency_us / 100000000000 * 100000000000
           WHEN latency_us < 1000000000000000 THEN latency_us / 1000000000000 * 1000000000000
           WHEN latency_us < 10000000000000000 THEN latency_us / 10000000000000 * 10000000000000
           WHEN latency_us < 100000000000000000 THEN latency_us / 100000000000000 * 100000000000000
           WHEN latency_us < 1000000000000000000 THEN latency_us / 1000000000000000 * 1000000000000000
           ELSE latency_us / 10000000000000000 * 10000000000000000 END,
       COUNT(*)
FROM mcp_audit_log
WHERE latency_us IS NOT NULL
  AND rowid > (SELECT last_rowid FROM mcp_daily_folded) AND rowid <= ?1
GROUP BY 1, 2, 3, 4, 5
ON CONFLICT (day, role, provider, tool, latency_us) DO UPDATE SET n = n + excluded.n";

/// The mark moved.
pub(crate) const FOLDED: &str = "UPDATE mcp_daily_folded SET last_rowid = ?1";
