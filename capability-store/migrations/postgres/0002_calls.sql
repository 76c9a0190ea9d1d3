-- capability-store, PostgreSQL schema version 2: a call that runs is two records, its intent
-- (written before it runs) and its outcome (after), sharing `call_id`; requests other than tool
-- calls (resources, prompts, completions, server requests) name their MCP `method`. Reasons
-- are JSON objects (`{"reason": ..., "message": ...}`; plain strings in records written before).

ALTER TABLE mcp_audit_log ADD COLUMN call_id TEXT;
ALTER TABLE mcp_audit_log ADD COLUMN phase   TEXT CHECK (phase IN ('intent', 'outcome'));
ALTER TABLE mcp_audit_log ADD COLUMN method  TEXT;

CREATE INDEX mcp_audit_log_call ON mcp_audit_log (call_id);

-- A call is counted once: by its intent when it ran (the outcome carries its latency and
-- success), by its one record when it did not, and as before for records without a phase.
DROP VIEW mcp_daily_stats;
CREATE VIEW mcp_daily_stats AS
SELECT (time AT TIME ZONE 'UTC')::date                          AS day,
       agent_role                                               AS role,
       COALESCE(provider, '')                                   AS provider,
       tool,
       count(*) FILTER (WHERE phase IS DISTINCT FROM 'outcome') AS calls,
       count(*) FILTER (WHERE verdict = 'allowed'
                          AND phase IS DISTINCT FROM 'outcome') AS allowed,
       count(*) FILTER (WHERE verdict = 'denied')               AS denied,
       count(*) FILTER (WHERE success = false)                  AS errors,
       count(*) FILTER (WHERE verdict = 'degraded')             AS degraded,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY latency_us)
           FILTER (WHERE latency_us IS NOT NULL)                AS p50_latency_us,
       percentile_disc(0.95) WITHIN GROUP (ORDER BY latency_us)
           FILTER (WHERE latency_us IS NOT NULL)                AS p95_latency_us
FROM mcp_audit_log
GROUP BY 1, 2, 3, 4;
