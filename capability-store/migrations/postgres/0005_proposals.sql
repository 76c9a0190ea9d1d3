-- capability-store schema 5 (PostgreSQL): proposals a gateway keeps for approvers, one row per
-- proposal id (a digest of what it binds), until it is used or stops waiting (`expires_at`,
-- Unix seconds). `body` is the proposal file's JSON, as `capability approve` reads it.

CREATE TABLE capability_proposal (
    proposal_id TEXT PRIMARY KEY,
    audience    TEXT NOT NULL,
    server      TEXT NOT NULL,
    tool        TEXT NOT NULL,
    proposer    TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    body        TEXT NOT NULL
);

CREATE INDEX capability_proposal_expires ON capability_proposal (expires_at);
