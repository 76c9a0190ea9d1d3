-- capability-store schema 2 (SQLite): a call that runs is two records, its intent (written
-- before it runs) and its outcome (after), sharing `call_id`; requests other than tool calls
-- (resources, prompts, completions, server requests) name their MCP `method`. Reasons are JSON
-- objects (`{"reason": ..., "message": ...}`; plain strings in records written before).

ALTER TABLE mcp_audit_log ADD COLUMN call_id TEXT;
ALTER TABLE mcp_audit_log ADD COLUMN phase   TEXT CHECK (phase IN ('intent', 'outcome'));
ALTER TABLE mcp_audit_log ADD COLUMN method  TEXT;

CREATE INDEX mcp_audit_log_call ON mcp_audit_log (call_id);

-- A call is counted once: by its intent when it ran (the outcome carries its latency and
-- success), by its one record when it did not, and as before for records without a phase.
DROP VIEW mcp_daily_stats;
CREATE VIEW mcp_daily_stats AS
WITH ran AS (
    SELECT substr(time, 1, 10) AS day, agent_role AS role, COALESCE(provider, '') AS provider,
           tool, latency_us,
           ROW_NUMBER() OVER w AS rank,
           COUNT(*) OVER (PARTITION BY substr(time, 1, 10), agent_role,
                          COALESCE(provider, ''), tool) AS n
    FROM mcp_audit_log
    WHERE latency_us IS NOT NULL
    WINDOW w AS (PARTITION BY substr(time, 1, 10), agent_role, COALESCE(provider, ''), tool
                 ORDER BY latency_us)
),
percentiles AS (
    SELECT day, role, provider, tool,
           MAX(CASE WHEN rank = (n * 50 + 99) / 100 THEN latency_us END) AS p50_latency_us,
           MAX(CASE WHEN rank = (n * 95 + 99) / 100 THEN latency_us END) AS p95_latency_us
    FROM ran
    GROUP BY day, role, provider, tool
),
counts AS (
    SELECT substr(time, 1, 10) AS day, agent_role AS role, COALESCE(provider, '') AS provider,
           tool,
           COUNT(CASE WHEN phase IS NULL OR phase = 'intent' THEN 1 END) AS calls,
           COUNT(CASE WHEN verdict = 'allowed' AND (phase IS NULL OR phase = 'intent')
                      THEN 1 END) AS allowed,
           COUNT(CASE WHEN verdict = 'denied' THEN 1 END) AS denied,
           COUNT(CASE WHEN success = 0 THEN 1 END) AS errors,
           COUNT(CASE WHEN verdict = 'degraded' THEN 1 END) AS degraded
    FROM mcp_audit_log
    GROUP BY 1, 2, 3, 4
)
SELECT c.day, c.role, c.provider, c.tool, c.calls, c.allowed, c.denied, c.errors, c.degraded,
       p.p50_latency_us, p.p95_latency_us
FROM counts c
LEFT JOIN percentiles p
    ON p.day = c.day AND p.role = c.role AND p.provider = c.provider AND p.tool = c.tool;
