-- capability-store schema 4 (SQLite): the agent loop's ghost-loop guards, shared by every
-- process on the host. `capability_loop_lease`: one row per incident key, held by `holder`
-- until `expires_ms` (ms since the Unix epoch; 0 once released), `generation` counting every
-- take-over. `capability_loop_cache`: a loop's sealed final outcome per (incident, role, policy
-- version) key, served until `expires_ms`.

CREATE TABLE capability_loop_lease (
    lease_key  TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    generation INTEGER NOT NULL,
    since_ms   INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL
);

CREATE TABLE capability_loop_cache (
    cache_key  TEXT PRIMARY KEY,
    entry      TEXT NOT NULL,
    expires_ms INTEGER NOT NULL
);

CREATE INDEX capability_loop_cache_expires ON capability_loop_cache (expires_ms);
