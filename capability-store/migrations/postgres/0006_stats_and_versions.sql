-- capability-store schema 6 (PostgreSQL).
--
-- 1. `mcp_daily_stats` stops scanning the log. Its sums are kept as records are written, in
--    the writer's own transaction, by statement triggers on `mcp_audit_log` (an insert adds
--    its rows, a delete takes them away, an update does both), so any SQL reader (Grafana,
--    psql) sees every committed record and nothing else:
--    - per UTC day, role, provider ('' for none) and tool, the counters;
--    - per the same key, how many calls took each latency, the latency rounded down to three
--      significant digits (`capability_latency_bucket`: 1234 -> 1230, 98765 -> 98700; under
--      1,000 us exact). The view's p50 and p95 are nearest-rank percentiles over these, so
--      they are at most 1% below the exact ones.
--    A trigger appends its statement's sums to `mcp_daily_count_deltas` and
--    `mcp_daily_latency_deltas` (plain inserts: writers of a fleet never wait for each other on
--    a shared counter row); `capability_daily_stats_compact()`, which the store's audit
--    writers call every few seconds, moves them into `mcp_daily_counts` and
--    `mcp_daily_latency`. The view adds both, so it is exact whenever compaction runs.
--    The view keeps its columns. Existing records are summed here, under a lock that holds
--    writers off until the triggers exist, so none is counted twice or missed.
-- 2. `mcp_tool_versions`: each (server, tool, MCP descriptor hash) a gateway saw or an operator
--    pinned, first and last seen, pinned by whom and when.

LOCK TABLE mcp_audit_log IN SHARE ROW EXCLUSIVE MODE;

CREATE FUNCTION capability_latency_bucket(v BIGINT) RETURNS BIGINT
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN v < 1000 THEN v
        WHEN v < 10000 THEN v / 10 * 10
        WHEN v < 100000 THEN v / 100 * 100
        WHEN v < 1000000 THEN v / 1000 * 1000
        WHEN v < 10000000 THEN v / 10000 * 10000
        WHEN v < 100000000 THEN v / 100000 * 100000
        WHEN v < 1000000000 THEN v / 1000000 * 1000000
        WHEN v < 10000000000 THEN v / 10000000 * 10000000
        WHEN v < 100000000000 THEN v / 100000000 * 100000000
        WHEN v < 1000000000000 THEN v / 1000000000 * 1000000000
        WHEN v < 10000000000000 THEN v / 10000000000 * 10000000000
        WHEN v < 100000000000000 THEN v / 100000000000 * 100000000000
        WHEN v < 1000000000000000 THEN v / 1000000000000 * 1000000000000
        WHEN v < 10000000000000000 THEN v / 10000000000000 * 10000000000000
        WHEN v < 100000000000000000 THEN v / 100000000000000 * 100000000000000
        WHEN v < 1000000000000000000 THEN v / 1000000000000000 * 1000000000000000
        ELSE v / 10000000000000000 * 10000000000000000 END
$$;

CREATE TABLE mcp_daily_counts (
    day      DATE   NOT NULL,
    role     TEXT   NOT NULL,
    provider TEXT   NOT NULL,
    tool     TEXT   NOT NULL,
    records  BIGINT NOT NULL,
    calls    BIGINT NOT NULL,
    allowed  BIGINT NOT NULL,
    denied   BIGINT NOT NULL,
    errors   BIGINT NOT NULL,
    degraded BIGINT NOT NULL,
    PRIMARY KEY (day, role, provider, tool)
);

CREATE TABLE mcp_daily_count_deltas (LIKE mcp_daily_counts);

CREATE TABLE mcp_daily_latency (
    day        DATE   NOT NULL,
    role       TEXT   NOT NULL,
    provider   TEXT   NOT NULL,
    tool       TEXT   NOT NULL,
    latency_us BIGINT NOT NULL,
    n          BIGINT NOT NULL,
    PRIMARY KEY (day, role, provider, tool, latency_us)
);

CREATE TABLE mcp_daily_latency_deltas (LIKE mcp_daily_latency);

-- Each trigger appends the sums of the rows it sees, with a `sign` (1 added, -1 taken away).
-- Static statements (planned once per session); the search path is the migration's, so a
-- writer whose session names the schema otherwise still folds into these tables. The copies
-- of the two statements differ only in the rows they read.
-- Records inserted.
CREATE FUNCTION capability_daily_stats_inserted() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO mcp_daily_count_deltas (day, role, provider, tool, records, calls, allowed, denied, errors, degraded)
    SELECT (time AT TIME ZONE 'UTC')::date, agent_role, COALESCE(provider, ''), tool,
           sum(sign),
           COALESCE(sum(sign) FILTER (WHERE phase IS DISTINCT FROM 'outcome'), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'allowed'
                                        AND phase IS DISTINCT FROM 'outcome'), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'denied'), 0),
           COALESCE(sum(sign) FILTER (WHERE success = false), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'degraded'), 0)
    FROM (SELECT *, 1 AS sign FROM new_rows) d
    GROUP BY 1, 2, 3, 4;
    INSERT INTO mcp_daily_latency_deltas (day, role, provider, tool, latency_us, n)
    SELECT (time AT TIME ZONE 'UTC')::date, agent_role, COALESCE(provider, ''), tool,
           capability_latency_bucket(latency_us), sum(sign)
    FROM (SELECT *, 1 AS sign FROM new_rows) d
    WHERE latency_us IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5;
    RETURN NULL;
END $$;

-- Records deleted.
CREATE FUNCTION capability_daily_stats_deleted() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO mcp_daily_count_deltas (day, role, provider, tool, records, calls, allowed, denied, errors, degraded)
    SELECT (time AT TIME ZONE 'UTC')::date, agent_role, COALESCE(provider, ''), tool,
           sum(sign),
           COALESCE(sum(sign) FILTER (WHERE phase IS DISTINCT FROM 'outcome'), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'allowed'
                                        AND phase IS DISTINCT FROM 'outcome'), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'denied'), 0),
           COALESCE(sum(sign) FILTER (WHERE success = false), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'degraded'), 0)
    FROM (SELECT *, -1 AS sign FROM old_rows) d
    GROUP BY 1, 2, 3, 4;
    INSERT INTO mcp_daily_latency_deltas (day, role, provider, tool, latency_us, n)
    SELECT (time AT TIME ZONE 'UTC')::date, agent_role, COALESCE(provider, ''), tool,
           capability_latency_bucket(latency_us), sum(sign)
    FROM (SELECT *, -1 AS sign FROM old_rows) d
    WHERE latency_us IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5;
    RETURN NULL;
END $$;

-- Records edited: the old rows taken away, the new ones added.
CREATE FUNCTION capability_daily_stats_updated() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO mcp_daily_count_deltas (day, role, provider, tool, records, calls, allowed, denied, errors, degraded)
    SELECT (time AT TIME ZONE 'UTC')::date, agent_role, COALESCE(provider, ''), tool,
           sum(sign),
           COALESCE(sum(sign) FILTER (WHERE phase IS DISTINCT FROM 'outcome'), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'allowed'
                                        AND phase IS DISTINCT FROM 'outcome'), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'denied'), 0),
           COALESCE(sum(sign) FILTER (WHERE success = false), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'degraded'), 0)
    FROM (SELECT *, 1 AS sign FROM new_rows UNION ALL SELECT *, -1 AS sign FROM old_rows) d
    GROUP BY 1, 2, 3, 4;
    INSERT INTO mcp_daily_latency_deltas (day, role, provider, tool, latency_us, n)
    SELECT (time AT TIME ZONE 'UTC')::date, agent_role, COALESCE(provider, ''), tool,
           capability_latency_bucket(latency_us), sum(sign)
    FROM (SELECT *, 1 AS sign FROM new_rows UNION ALL SELECT *, -1 AS sign FROM old_rows) d
    WHERE latency_us IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5;
    RETURN NULL;
END $$;

-- Moves the deltas into the sums, each delta once: a delta another compaction took is not
-- seen again, and one appended meanwhile waits for the next. Rows are upserted in key order,
-- so two compactions lock the rows they share in the same order. Returns the deltas moved.
CREATE FUNCTION capability_daily_stats_compact() RETURNS BIGINT LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
DECLARE
    moved BIGINT;
BEGIN
    WITH gone AS (DELETE FROM mcp_daily_count_deltas RETURNING *)
    INSERT INTO mcp_daily_counts AS c (day, role, provider, tool, records, calls, allowed, denied, errors, degraded)
    SELECT day, role, provider, tool, sum(records), sum(calls), sum(allowed), sum(denied), sum(errors),
           sum(degraded)
    FROM gone
    GROUP BY 1, 2, 3, 4
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (day, role, provider, tool) DO UPDATE SET
        records  = c.records  + EXCLUDED.records,
        calls    = c.calls    + EXCLUDED.calls,
        allowed  = c.allowed  + EXCLUDED.allowed,
        denied   = c.denied   + EXCLUDED.denied,
        errors   = c.errors   + EXCLUDED.errors,
        degraded = c.degraded + EXCLUDED.degraded;
    GET DIAGNOSTICS moved = ROW_COUNT;
    WITH gone AS (DELETE FROM mcp_daily_latency_deltas RETURNING *)
    INSERT INTO mcp_daily_latency AS l (day, role, provider, tool, latency_us, n)
    SELECT day, role, provider, tool, latency_us, sum(n)
    FROM gone
    GROUP BY 1, 2, 3, 4, 5
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (day, role, provider, tool, latency_us) DO UPDATE SET n = l.n + EXCLUDED.n;
    RETURN moved;
END $$;

-- The records already there.
    INSERT INTO mcp_daily_count_deltas (day, role, provider, tool, records, calls, allowed, denied, errors, degraded)
    SELECT (time AT TIME ZONE 'UTC')::date, agent_role, COALESCE(provider, ''), tool,
           sum(sign),
           COALESCE(sum(sign) FILTER (WHERE phase IS DISTINCT FROM 'outcome'), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'allowed'
                                        AND phase IS DISTINCT FROM 'outcome'), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'denied'), 0),
           COALESCE(sum(sign) FILTER (WHERE success = false), 0),
           COALESCE(sum(sign) FILTER (WHERE verdict = 'degraded'), 0)
    FROM (SELECT *, 1 AS sign FROM mcp_audit_log) d
    GROUP BY 1, 2, 3, 4;
    INSERT INTO mcp_daily_latency_deltas (day, role, provider, tool, latency_us, n)
    SELECT (time AT TIME ZONE 'UTC')::date, agent_role, COALESCE(provider, ''), tool,
           capability_latency_bucket(latency_us), sum(sign)
    FROM (SELECT *, 1 AS sign FROM mcp_audit_log) d
    WHERE latency_us IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5;
SELECT capability_daily_stats_compact();

CREATE TRIGGER mcp_daily_stats_insert AFTER INSERT ON mcp_audit_log
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION capability_daily_stats_inserted();
CREATE TRIGGER mcp_daily_stats_delete AFTER DELETE ON mcp_audit_log
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION capability_daily_stats_deleted();
CREATE TRIGGER mcp_daily_stats_update AFTER UPDATE ON mcp_audit_log
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION capability_daily_stats_updated();

-- Same columns as before; a key whose records were all deleted is left out.
DROP VIEW mcp_daily_stats;
CREATE VIEW mcp_daily_stats AS
WITH counts AS (
    SELECT day, role, provider, tool, sum(records) AS records, sum(calls)::bigint AS calls,
           sum(allowed)::bigint AS allowed, sum(denied)::bigint AS denied,
           sum(errors)::bigint AS errors, sum(degraded)::bigint AS degraded
    FROM (SELECT * FROM mcp_daily_counts UNION ALL SELECT * FROM mcp_daily_count_deltas) u
    GROUP BY day, role, provider, tool
),
-- A bucket may be in both tables (and in several deltas): the window's default frame counts
-- rows of one latency together (peers), so the running sum at a bucket is every row's up to
-- it, and a bucket whose rows add up to nothing is never the first to reach a rank.
ranked AS (
    SELECT day, role, provider, tool, latency_us,
           (sum(n) OVER (PARTITION BY day, role, provider, tool ORDER BY latency_us))::bigint
               AS upto,
           (sum(n) OVER (PARTITION BY day, role, provider, tool))::bigint AS total
    FROM (SELECT * FROM mcp_daily_latency UNION ALL SELECT * FROM mcp_daily_latency_deltas) u
),
percentiles AS (
    SELECT day, role, provider, tool,
           min(latency_us) FILTER (WHERE upto >= GREATEST(1, (total * 50 + 99) / 100))
               AS p50_latency_us,
           min(latency_us) FILTER (WHERE upto >= GREATEST(1, (total * 95 + 99) / 100))
               AS p95_latency_us
    FROM ranked
    GROUP BY day, role, provider, tool
)
SELECT c.day, c.role, c.provider, c.tool, c.calls, c.allowed, c.denied, c.errors, c.degraded,
       p.p50_latency_us, p.p95_latency_us
FROM counts c
LEFT JOIN percentiles p USING (day, role, provider, tool)
WHERE c.records > 0;

CREATE TABLE mcp_tool_versions (
    server          TEXT        NOT NULL,
    tool            TEXT        NOT NULL,
    descriptor_hash TEXT        NOT NULL,
    first_seen      TIMESTAMPTZ NOT NULL,
    last_seen       TIMESTAMPTZ NOT NULL,
    pinned_by       TEXT,
    pinned_at       TIMESTAMPTZ,
    PRIMARY KEY (server, tool, descriptor_hash)
);
