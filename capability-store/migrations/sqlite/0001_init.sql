-- capability-store schema 1 (SQLite): the tables of ADR-105, with the column names the
-- PostgreSQL schema uses. Applied by `capability db migrate <path>`, inside one transaction.

-- One row per audit record. Each writer (a process, a replica) numbers and chains its own
-- records: (writer_id, seq) is unique, `prev_hash` is the `hash` of the writer's record seq - 1.
CREATE TABLE mcp_audit_log (
    writer_id       TEXT    NOT NULL,
    seq             INTEGER NOT NULL CHECK (seq >= 1),
    time            TEXT    NOT NULL,  -- RFC 3339, UTC, with milliseconds
    agent_name      TEXT    NOT NULL,
    agent_role      TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    incident_id     VARCHAR(64) CHECK (length(incident_id) <= 64),
    flywheel_node   TEXT,              -- the workflow step
    provider        TEXT,
    tool            TEXT    NOT NULL,
    descriptor_hash TEXT    NOT NULL,
    policy_version  TEXT,
    verdict         TEXT    NOT NULL,  -- allowed | denied | degraded | audit_failed
    reasons         TEXT    NOT NULL,  -- JSON array of strings
    input           TEXT    NOT NULL,  -- the redacted input, canonical JSON
    input_digest    TEXT    NOT NULL,
    input_size      INTEGER NOT NULL,
    output_digest   TEXT,
    output_size     INTEGER,
    latency_us      INTEGER,
    success         INTEGER,           -- 1 | 0 | NULL (did not run)
    error           TEXT,
    prev_hash       TEXT    NOT NULL,
    hash            TEXT    NOT NULL,
    UNIQUE (writer_id, seq)
);

CREATE INDEX mcp_audit_log_stats ON mcp_audit_log (
    substr(time, 1, 10), agent_role, provider, tool
);

-- Each writer's signed checkpoints: "my chain had `seq` records, the last with hash `head`".
CREATE TABLE mcp_audit_checkpoint (
    writer_id TEXT    NOT NULL,
    seq       INTEGER NOT NULL CHECK (seq >= 0),
    head      TEXT    NOT NULL,
    time      TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    signature TEXT    NOT NULL,
    UNIQUE (writer_id, seq)
);

-- Used approval ids: an approval executes once, across processes and restarts.
CREATE TABLE capability_approval_ledger (
    approval_id TEXT    PRIMARY KEY,
    expires_at  INTEGER NOT NULL,  -- Unix seconds
    used_at     INTEGER NOT NULL   -- Unix seconds
);

CREATE INDEX capability_approval_ledger_expiry ON capability_approval_ledger (expires_at);

-- Revoked grants (a grant attenuated from a revoked one is revoked with it).
CREATE TABLE capability_revocation (
    grant_id   TEXT    PRIMARY KEY,
    revoked_at INTEGER NOT NULL  -- Unix seconds
);

-- Per UTC day (the first 10 characters of `time`), role, provider ('' when none) and tool:
-- calls, allowed, denied, errors (ran and failed), degraded, and the nearest-rank p50 and p95
-- of the latency of the calls that ran (`latency_us` not null): the value at 1-based rank
-- ceil(p * n / 100) of the n latencies sorted ascending. A view: always current.
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
           COUNT(*) AS calls,
           COUNT(CASE WHEN verdict = 'allowed' THEN 1 END) AS allowed,
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
