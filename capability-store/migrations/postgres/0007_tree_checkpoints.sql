-- capability-store schema 7 (PostgreSQL): the tree each writer keeps beside its records.
--
-- 1. `mcp_audit_tree_checkpoint`: each writer's signed tree checkpoints, beside the chain's
--    (`mcp_audit_checkpoint`): a C2SP `tlog-checkpoint` signed note (origin
--    `capability/<writer>`, tree size, RFC 6962 root of its records, leaf i = the canonical
--    line of its record seq i+1, and a `time` extension line), signed with the writer's
--    checkpoint key. `size` and `root` (base64) repeat the note's, for queries; the note is
--    what counts. A writer resumes its tree from its records and checks it against its last
--    one (`capability_audit::tlog::resume`).
-- 2. `mcp_audit_writer`: every writer that ever wrote to this store, with its first signed
--    tree checkpoint (its registration), so that a writer whose records were all deleted is
--    still known.

CREATE TABLE mcp_audit_tree_checkpoint (
    id        BIGSERIAL   PRIMARY KEY,
    writer_id TEXT        NOT NULL,
    size      BIGINT      NOT NULL CHECK (size >= 0),
    root      TEXT        NOT NULL,
    time      TEXT        NOT NULL,
    note      TEXT        NOT NULL,
    UNIQUE (writer_id, size, time)
);

CREATE TABLE mcp_audit_writer (
    writer_id     TEXT PRIMARY KEY,
    registered_at TEXT NOT NULL,
    note          TEXT NOT NULL
);
