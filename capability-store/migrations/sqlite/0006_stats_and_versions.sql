-- capability-store schema 6 (SQLite).
--
-- 1. `mcp_daily_stats` stops scanning the log. It adds sums kept in two tables to the records
--    not yet summed (the log's tail), so it is exact at every moment:
--    - `mcp_daily_counts`: per UTC day, role, provider ('' for none) and tool, the counters;
--    - `mcp_daily_latency`: per the same key, how many calls took each latency, the latency
--      rounded down to three significant digits (1234 -> 1230, 98765 -> 98700; under 1,000 us
--      exact). The view's p50 and p95 are nearest-rank percentiles over these, so they are at
--      most 1% below the exact ones.
--    `mcp_daily_folded` holds the last rowid summed. The store folds the tail into the sums
--    when it reads the stats (one transaction; SQLite has one writer at a time, so rowids
--    commit in order), so a writer pays nothing per record. A record deleted or edited after
--    it was summed is taken away (and its new version added) by the triggers below, and one
--    inserted under a rowid already summed (SQLite reuses the largest after a delete) is added
--    at once.
-- 2. `mcp_tool_versions`: each (server, tool, MCP descriptor hash) a gateway saw or an operator
--    pinned, first and last seen, pinned by whom and when (RFC 3339 UTC text, as the log's times).

CREATE TABLE mcp_daily_counts (
    day      TEXT    NOT NULL,
    role     TEXT    NOT NULL,
    provider TEXT    NOT NULL,
    tool     TEXT    NOT NULL,
    records  INTEGER NOT NULL,
    calls    INTEGER NOT NULL,
    allowed  INTEGER NOT NULL,
    denied   INTEGER NOT NULL,
    errors   INTEGER NOT NULL,
    degraded INTEGER NOT NULL,
    PRIMARY KEY (day, role, provider, tool)
) WITHOUT ROWID;

CREATE TABLE mcp_daily_latency (
    day        TEXT    NOT NULL,
    role       TEXT    NOT NULL,
    provider   TEXT    NOT NULL,
    tool       TEXT    NOT NULL,
    latency_us INTEGER NOT NULL,
    n          INTEGER NOT NULL,
    PRIMARY KEY (day, role, provider, tool, latency_us)
) WITHOUT ROWID;

CREATE TABLE mcp_daily_folded (
    only       INTEGER PRIMARY KEY CHECK (only = 1),
    last_rowid INTEGER NOT NULL
);
INSERT INTO mcp_daily_folded VALUES (1, 0);

CREATE TRIGGER mcp_daily_stats_insert AFTER INSERT ON mcp_audit_log
WHEN NEW.rowid <= (SELECT last_rowid FROM mcp_daily_folded) BEGIN
    INSERT INTO mcp_daily_counts
        (day, role, provider, tool, records, calls, allowed, denied, errors, degraded)
    SELECT substr(NEW.time, 1, 10), NEW.agent_role, COALESCE(NEW.provider, ''), NEW.tool,
           1,
           (NEW.phase IS NULL OR NEW.phase = 'intent'),
           (NEW.verdict = 'allowed' AND (NEW.phase IS NULL OR NEW.phase = 'intent')),
           (NEW.verdict = 'denied'),
           COALESCE(NEW.success = 0, 0),
           (NEW.verdict = 'degraded')
    WHERE NEW.rowid <= (SELECT last_rowid FROM mcp_daily_folded)
    ON CONFLICT (day, role, provider, tool) DO UPDATE SET
        records  = records  + excluded.records,
        calls    = calls    + excluded.calls,
        allowed  = allowed  + excluded.allowed,
        denied   = denied   + excluded.denied,
        errors   = errors   + excluded.errors,
        degraded = degraded + excluded.degraded;
    INSERT INTO mcp_daily_latency (day, role, provider, tool, latency_us, n)
    SELECT substr(NEW.time, 1, 10), NEW.agent_role, COALESCE(NEW.provider, ''), NEW.tool,
           CASE WHEN NEW.latency_us < 1000 THEN NEW.latency_us
               WHEN NEW.latency_us < 10000 THEN NEW.latency_us / 10 * 10
               WHEN NEW.latency_us < 100000 THEN NEW.latency_us / 100 * 100
               WHEN NEW.latency_us < 1000000 THEN NEW.latency_us / 1000 * 1000
               WHEN NEW.latency_us < 10000000 THEN NEW.latency_us / 10000 * 10000
               WHEN NEW.latency_us < 100000000 THEN NEW.latency_us / 100000 * 100000
               WHEN NEW.latency_us < 1000000000 THEN NEW.latency_us / 1000000 * 1000000
               WHEN NEW.latency_us < 10000000000 THEN NEW.latency_us / 10000000 * 10000000
               WHEN NEW.latency_us < 100000000000 THEN NEW.latency_us / 100000000 * 100000000
               WHEN NEW.latency_us < 1000000000000 THEN NEW.latency_us / 1000000000 * 1000000000
               WHEN NEW.latency_us < 10000000000000 THEN NEW.latency_us / 10000000000 * 10000000000
               WHEN NEW.latency_us < 100000000000000 THEN NEW.latency_us / 100000000000 * 100000000000
               WHEN NEW.latency_us < 1000000000000000 THEN NEW.latency_us / 1000000000000 * 1000000000000
               WHEN NEW.latency_us < 10000000000000000 THEN NEW.latency_us / 10000000000000 * 10000000000000
               WHEN NEW.latency_us < 100000000000000000 THEN NEW.latency_us / 100000000000000 * 100000000000000
               WHEN NEW.latency_us < 1000000000000000000 THEN NEW.latency_us / 1000000000000000 * 1000000000000000
               ELSE NEW.latency_us / 10000000000000000 * 10000000000000000 END,
           1
    WHERE NEW.latency_us IS NOT NULL AND NEW.rowid <= (SELECT last_rowid FROM mcp_daily_folded)
    ON CONFLICT (day, role, provider, tool, latency_us) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER mcp_daily_stats_delete AFTER DELETE ON mcp_audit_log
WHEN OLD.rowid <= (SELECT last_rowid FROM mcp_daily_folded) BEGIN
    INSERT INTO mcp_daily_counts
        (day, role, provider, tool, records, calls, allowed, denied, errors, degraded)
    SELECT substr(OLD.time, 1, 10), OLD.agent_role, COALESCE(OLD.provider, ''), OLD.tool,
           -1,
           -(OLD.phase IS NULL OR OLD.phase = 'intent'),
           -(OLD.verdict = 'allowed' AND (OLD.phase IS NULL OR OLD.phase = 'intent')),
           -(OLD.verdict = 'denied'),
           -COALESCE(OLD.success = 0, 0),
           -(OLD.verdict = 'degraded')
    WHERE OLD.rowid <= (SELECT last_rowid FROM mcp_daily_folded)
    ON CONFLICT (day, role, provider, tool) DO UPDATE SET
        records  = records  + excluded.records,
        calls    = calls    + excluded.calls,
        allowed  = allowed  + excluded.allowed,
        denied   = denied   + excluded.denied,
        errors   = errors   + excluded.errors,
        degraded = degraded + excluded.degraded;
    INSERT INTO mcp_daily_latency (day, role, provider, tool, latency_us, n)
    SELECT substr(OLD.time, 1, 10), OLD.agent_role, COALESCE(OLD.provider, ''), OLD.tool,
           CASE WHEN OLD.latency_us < 1000 THEN OLD.latency_us
               WHEN OLD.latency_us < 10000 THEN OLD.latency_us / 10 * 10
               WHEN OLD.latency_us < 100000 THEN OLD.latency_us / 100 * 100
               WHEN OLD.latency_us < 1000000 THEN OLD.latency_us / 1000 * 1000
               WHEN OLD.latency_us < 10000000 THEN OLD.latency_us / 10000 * 10000
               WHEN OLD.latency_us < 100000000 THEN OLD.latency_us / 100000 * 100000
               WHEN OLD.latency_us < 1000000000 THEN OLD.latency_us / 1000000 * 1000000
               WHEN OLD.latency_us < 10000000000 THEN OLD.latency_us / 10000000 * 10000000
               WHEN OLD.latency_us < 100000000000 THEN OLD.latency_us / 100000000 * 100000000
               WHEN OLD.latency_us < 1000000000000 THEN OLD.latency_us / 1000000000 * 1000000000
               WHEN OLD.latency_us < 10000000000000 THEN OLD.latency_us / 10000000000 * 10000000000
               WHEN OLD.latency_us < 100000000000000 THEN OLD.latency_us / 100000000000 * 100000000000
               WHEN OLD.latency_us < 1000000000000000 THEN OLD.latency_us / 1000000000000 * 1000000000000
               WHEN OLD.latency_us < 10000000000000000 THEN OLD.latency_us / 10000000000000 * 10000000000000
               WHEN OLD.latency_us < 100000000000000000 THEN OLD.latency_us / 100000000000000 * 100000000000000
               WHEN OLD.latency_us < 1000000000000000000 THEN OLD.latency_us / 1000000000000000 * 1000000000000000
               ELSE OLD.latency_us / 10000000000000000 * 10000000000000000 END,
           -1
    WHERE OLD.latency_us IS NOT NULL AND OLD.rowid <= (SELECT last_rowid FROM mcp_daily_folded)
    ON CONFLICT (day, role, provider, tool, latency_us) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER mcp_daily_stats_update AFTER UPDATE ON mcp_audit_log BEGIN
    INSERT INTO mcp_daily_counts
        (day, role, provider, tool, records, calls, allowed, denied, errors, degraded)
    SELECT substr(OLD.time, 1, 10), OLD.agent_role, COALESCE(OLD.provider, ''), OLD.tool,
           -1,
           -(OLD.phase IS NULL OR OLD.phase = 'intent'),
           -(OLD.verdict = 'allowed' AND (OLD.phase IS NULL OR OLD.phase = 'intent')),
           -(OLD.verdict = 'denied'),
           -COALESCE(OLD.success = 0, 0),
           -(OLD.verdict = 'degraded')
    WHERE OLD.rowid <= (SELECT last_rowid FROM mcp_daily_folded)
    ON CONFLICT (day, role, provider, tool) DO UPDATE SET
        records  = records  + excluded.records,
        calls    = calls    + excluded.calls,
        allowed  = allowed  + excluded.allowed,
        denied   = denied   + excluded.denied,
        errors   = errors   + excluded.errors,
        degraded = degraded + excluded.degraded;
    INSERT INTO mcp_daily_latency (day, role, provider, tool, latency_us, n)
    SELECT substr(OLD.time, 1, 10), OLD.agent_role, COALESCE(OLD.provider, ''), OLD.tool,
           CASE WHEN OLD.latency_us < 1000 THEN OLD.latency_us
               WHEN OLD.latency_us < 10000 THEN OLD.latency_us / 10 * 10
               WHEN OLD.latency_us < 100000 THEN OLD.latency_us / 100 * 100
               WHEN OLD.latency_us < 1000000 THEN OLD.latency_us / 1000 * 1000
               WHEN OLD.latency_us < 10000000 THEN OLD.latency_us / 10000 * 10000
               WHEN OLD.latency_us < 100000000 THEN OLD.latency_us / 100000 * 100000
               WHEN OLD.latency_us < 1000000000 THEN OLD.latency_us / 1000000 * 1000000
               WHEN OLD.latency_us < 10000000000 THEN OLD.latency_us / 10000000 * 10000000
               WHEN OLD.latency_us < 100000000000 THEN OLD.latency_us / 100000000 * 100000000
               WHEN OLD.latency_us < 1000000000000 THEN OLD.latency_us / 1000000000 * 1000000000
               WHEN OLD.latency_us < 10000000000000 THEN OLD.latency_us / 10000000000 * 10000000000
               WHEN OLD.latency_us < 100000000000000 THEN OLD.latency_us / 100000000000 * 100000000000
               WHEN OLD.latency_us < 1000000000000000 THEN OLD.latency_us / 1000000000000 * 1000000000000
               WHEN OLD.latency_us < 10000000000000000 THEN OLD.latency_us / 10000000000000 * 10000000000000
               WHEN OLD.latency_us < 100000000000000000 THEN OLD.latency_us / 100000000000000 * 100000000000000
               WHEN OLD.latency_us < 1000000000000000000 THEN OLD.latency_us / 1000000000000000 * 1000000000000000
               ELSE OLD.latency_us / 10000000000000000 * 10000000000000000 END,
           -1
    WHERE OLD.latency_us IS NOT NULL AND OLD.rowid <= (SELECT last_rowid FROM mcp_daily_folded)
    ON CONFLICT (day, role, provider, tool, latency_us) DO UPDATE SET n = n + excluded.n;
    INSERT INTO mcp_daily_counts
        (day, role, provider, tool, records, calls, allowed, denied, errors, degraded)
    SELECT substr(NEW.time, 1, 10), NEW.agent_role, COALESCE(NEW.provider, ''), NEW.tool,
           1,
           (NEW.phase IS NULL OR NEW.phase = 'intent'),
           (NEW.verdict = 'allowed' AND (NEW.phase IS NULL OR NEW.phase = 'intent')),
           (NEW.verdict = 'denied'),
           COALESCE(NEW.success = 0, 0),
           (NEW.verdict = 'degraded')
    WHERE NEW.rowid <= (SELECT last_rowid FROM mcp_daily_folded)
    ON CONFLICT (day, role, provider, tool) DO UPDATE SET
        records  = records  + excluded.records,
        calls    = calls    + excluded.calls,
        allowed  = allowed  + excluded.allowed,
        denied   = denied   + excluded.denied,
        errors   = errors   + excluded.errors,
        degraded = degraded + excluded.degraded;
    INSERT INTO mcp_daily_latency (day, role, provider, tool, latency_us, n)
    SELECT substr(NEW.time, 1, 10), NEW.agent_role, COALESCE(NEW.provider, ''), NEW.tool,
           CASE WHEN NEW.latency_us < 1000 THEN NEW.latency_us
               WHEN NEW.latency_us < 10000 THEN NEW.latency_us / 10 * 10
               WHEN NEW.latency_us < 100000 THEN NEW.latency_us / 100 * 100
               WHEN NEW.latency_us < 1000000 THEN NEW.latency_us / 1000 * 1000
               WHEN NEW.latency_us < 10000000 THEN NEW.latency_us / 10000 * 10000
               WHEN NEW.latency_us < 100000000 THEN NEW.latency_us / 100000 * 100000
               WHEN NEW.latency_us < 1000000000 THEN NEW.latency_us / 1000000 * 1000000
               WHEN NEW.latency_us < 10000000000 THEN NEW.latency_us / 10000000 * 10000000
               WHEN NEW.latency_us < 100000000000 THEN NEW.latency_us / 100000000 * 100000000
               WHEN NEW.latency_us < 1000000000000 THEN NEW.latency_us / 1000000000 * 1000000000
               WHEN NEW.latency_us < 10000000000000 THEN NEW.latency_us / 10000000000 * 10000000000
               WHEN NEW.latency_us < 100000000000000 THEN NEW.latency_us / 100000000000 * 100000000000
               WHEN NEW.latency_us < 1000000000000000 THEN NEW.latency_us / 1000000000000 * 1000000000000
               WHEN NEW.latency_us < 10000000000000000 THEN NEW.latency_us / 10000000000000 * 10000000000000
               WHEN NEW.latency_us < 100000000000000000 THEN NEW.latency_us / 100000000000000 * 100000000000000
               WHEN NEW.latency_us < 1000000000000000000 THEN NEW.latency_us / 1000000000000000 * 1000000000000000
               ELSE NEW.latency_us / 10000000000000000 * 10000000000000000 END,
           1
    WHERE NEW.latency_us IS NOT NULL AND NEW.rowid <= (SELECT last_rowid FROM mcp_daily_folded)
    ON CONFLICT (day, role, provider, tool, latency_us) DO UPDATE SET n = n + excluded.n;
END;

-- Same columns as before; a key whose records were all deleted is left out. A latency bucket
-- may be in the sums and in the tail: the window's default frame counts rows of one latency
-- together (peers), so the running sum at a bucket is every row's up to it.
DROP VIEW mcp_daily_stats;
CREATE VIEW mcp_daily_stats AS
WITH tail AS (
    SELECT * FROM mcp_audit_log WHERE rowid > (SELECT last_rowid FROM mcp_daily_folded)
),
counts AS (
    SELECT day, role, provider, tool, SUM(records) AS records, SUM(calls) AS calls,
           SUM(allowed) AS allowed, SUM(denied) AS denied, SUM(errors) AS errors,
           SUM(degraded) AS degraded
    FROM (
        SELECT day, role, provider, tool, records, calls, allowed, denied, errors, degraded
        FROM mcp_daily_counts
        UNION ALL
        SELECT substr(time, 1, 10), agent_role, COALESCE(provider, ''), tool, 1,
               (phase IS NULL OR phase = 'intent'),
               (verdict = 'allowed' AND (phase IS NULL OR phase = 'intent')),
               (verdict = 'denied'), COALESCE(success = 0, 0), (verdict = 'degraded')
        FROM tail
    )
    GROUP BY day, role, provider, tool
),
ranked AS (
    SELECT day, role, provider, tool, latency_us,
           SUM(n) OVER (PARTITION BY day, role, provider, tool ORDER BY latency_us) AS upto,
           SUM(n) OVER (PARTITION BY day, role, provider, tool) AS total
    FROM (
        SELECT day, role, provider, tool, latency_us, n FROM mcp_daily_latency
        UNION ALL
        SELECT substr(time, 1, 10) AS day, agent_role AS role, COALESCE(provider, '') AS provider,
               tool,
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
           ELSE latency_us / 10000000000000000 * 10000000000000000 END AS latency_us,
               1 AS n
        FROM tail
        WHERE latency_us IS NOT NULL
    )
),
percentiles AS (
    SELECT day, role, provider, tool,
           MIN(CASE WHEN upto >= MAX(1, (total * 50 + 99) / 100) THEN latency_us END)
               AS p50_latency_us,
           MIN(CASE WHEN upto >= MAX(1, (total * 95 + 99) / 100) THEN latency_us END)
               AS p95_latency_us
    FROM ranked
    GROUP BY day, role, provider, tool
)
SELECT c.day, c.role, c.provider, c.tool, c.calls, c.allowed, c.denied, c.errors, c.degraded,
       p.p50_latency_us, p.p95_latency_us
FROM counts c
LEFT JOIN percentiles p
    ON p.day = c.day AND p.role = c.role AND p.provider = c.provider AND p.tool = c.tool
WHERE c.records > 0;

CREATE TABLE mcp_tool_versions (
    server          TEXT NOT NULL,
    tool            TEXT NOT NULL,
    descriptor_hash TEXT NOT NULL,
    first_seen      TEXT NOT NULL,
    last_seen       TEXT NOT NULL,
    pinned_by       TEXT,
    pinned_at       TEXT,
    PRIMARY KEY (server, tool, descriptor_hash)
) WITHOUT ROWID;
