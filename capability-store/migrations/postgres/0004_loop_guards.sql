-- capability-store schema 4 (PostgreSQL): the agent loop's ghost-loop guards, shared by every
-- process of the fleet. `capability_loop_lease`: one row per incident key, held by `holder`
-- until `expires_ms` (ms since the Unix epoch; 0 once released), `generation` counting every
-- take-over. `capability_loop_cache`: a loop's sealed final outcome per (incident, role, policy
-- version) key, served until `expires_ms`.

CREATE TABLE capability_loop_lease (
    lease_key  TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    generation BIGINT NOT NULL,
    since_ms   BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);

CREATE TABLE capability_loop_cache (
    cache_key  TEXT PRIMARY KEY,
    entry      TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);

CREATE INDEX capability_loop_cache_expires ON capability_loop_cache (expires_ms);
