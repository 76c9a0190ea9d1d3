-- capability-store, PostgreSQL schema version 1 (ADR-105).
-- Applied by `capability db migrate <url>` inside a transaction that holds an advisory lock.

-- One row per audit record. Each writer (a process, a replica) keeps its own hash chain,
-- numbered by `seq` from 1. `record_json` is NULL except for a record that the columns cannot
-- hold exactly (a NUL character, a number beyond BIGINT, a time not in the canonical form, an
-- incident id over 64 characters): it then holds the record's canonical JSON, which wins.
CREATE TABLE mcp_audit_log (
    id              BIGSERIAL PRIMARY KEY,
    writer_id       TEXT        NOT NULL,
    seq             BIGINT      NOT NULL,
    time            TIMESTAMPTZ NOT NULL,
    agent_name      TEXT        NOT NULL,
    agent_role      TEXT        NOT NULL,
    session_id      TEXT        NOT NULL,
    incident_id     VARCHAR(64),
    flywheel_node   TEXT,
    provider        TEXT,
    tool            TEXT        NOT NULL,
    descriptor_hash TEXT        NOT NULL,
    policy_version  TEXT,
    verdict         TEXT        NOT NULL,
    -- JSON, not JSONB: the text is kept as written (canonical JSON), so the record's hash
    -- verifies after a round trip; JSONB would refuse \u0000 and rewrite numbers.
    reasons         JSON        NOT NULL,
    input           JSON        NOT NULL,
    input_digest    TEXT        NOT NULL,
    input_size      BIGINT      NOT NULL,
    output_digest   TEXT,
    output_size     BIGINT,
    latency_us      BIGINT,
    success         BOOLEAN,
    error           TEXT,
    prev_hash       TEXT        NOT NULL,
    hash            TEXT        NOT NULL,
    record_json     JSON,
    UNIQUE (writer_id, seq)
);

-- Signed checkpoints: "writer's chain had `seq` records, the last with hash `head`".
CREATE TABLE mcp_audit_checkpoint (
    id        BIGSERIAL PRIMARY KEY,
    writer_id TEXT        NOT NULL,
    seq       BIGINT      NOT NULL,
    head      TEXT        NOT NULL,
    time      TIMESTAMPTZ NOT NULL,
    key       TEXT        NOT NULL,
    signature TEXT        NOT NULL,
    UNIQUE (writer_id, seq)
);

-- Used approval ids: a row inserted once (INSERT ... ON CONFLICT DO NOTHING).
CREATE TABLE capability_approval_ledger (
    approval_id TEXT        PRIMARY KEY,
    expires_at  BIGINT      NOT NULL,
    used_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Revoked grants (and, through the chain every decision checks, everything attenuated from them).
CREATE TABLE capability_revocation (
    grant_id   TEXT        PRIMARY KEY,
    revoked_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Per day (UTC), role, provider and tool. A view: always current, nothing to maintain.
CREATE VIEW mcp_daily_stats AS
SELECT (time AT TIME ZONE 'UTC')::date                          AS day,
       agent_role                                               AS role,
       COALESCE(provider, '')                                   AS provider,
       tool,
       count(*)                                                 AS calls,
       count(*) FILTER (WHERE verdict = 'allowed')              AS allowed,
       count(*) FILTER (WHERE verdict = 'denied')               AS denied,
       count(*) FILTER (WHERE success = false)                  AS errors,
       count(*) FILTER (WHERE verdict = 'degraded')             AS degraded,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY latency_us)
           FILTER (WHERE latency_us IS NOT NULL)                AS p50_latency_us,
       percentile_disc(0.95) WITHIN GROUP (ORDER BY latency_us)
           FILTER (WHERE latency_us IS NOT NULL)                AS p95_latency_us
FROM mcp_audit_log
GROUP BY 1, 2, 3, 4;
