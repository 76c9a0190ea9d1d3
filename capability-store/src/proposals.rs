//! The SQL of kept proposals (`capability_proposal`), the same text for SQLite and
//! PostgreSQL (numbered parameters, `ON CONFLICT ... DO UPDATE ... WHERE`).

/// Inserts a proposal, or replaces one of the same id that stopped waiting.
pub(crate) const KEEP: &str = "INSERT INTO capability_proposal
    (proposal_id, audience, server, tool, proposer, created_at, expires_at, body)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (proposal_id) DO UPDATE SET
        audience = excluded.audience, server = excluded.server, tool = excluded.tool,
        proposer = excluded.proposer, created_at = excluded.created_at,
        expires_at = excluded.expires_at, body = excluded.body
    WHERE capability_proposal.expires_at <= excluded.created_at";

/// The proposals still waiting, oldest first.
pub(crate) const WAITING: &str = "SELECT proposal_id, audience, server, tool, proposer,
    created_at, expires_at, body FROM capability_proposal WHERE expires_at > $1
    ORDER BY created_at, proposal_id";

/// Forgets one.
pub(crate) const DROP: &str = "DELETE FROM capability_proposal WHERE proposal_id = $1";

/// A Unix time as the databases store it.
pub(crate) fn secs(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A stored Unix time back (a negative one, which no writer stores, reads as 0).
pub(crate) fn unsecs(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
