//! The approval ledger and the revocation store on PostgreSQL. Nothing is cached: every call
//! asks the database, so what one process records, the next decision of every other sees.

use std::fmt;
use std::sync::Arc;

use capability_gate::{ApprovalLedger, Consumed, RevocationStore, StoreError};

use super::pool::Pool;

/// The approval ledger in `capability_approval_ledger`: an id is consumed by the one insert that
/// creates its row.
pub struct PgLedger {
    pub(crate) pool: Arc<Pool>,
}

impl fmt::Debug for PgLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PgLedger").field(&self.pool.name).finish()
    }
}

impl ApprovalLedger for PgLedger {
    fn consume(&self, approval_id: &str, expires_at: u64) -> Result<Consumed, StoreError> {
        self.pool.ensure_schema()?;
        let expires_at = i64::try_from(expires_at).unwrap_or(i64::MAX);
        // Run again only after a closed connection: a first insert that did commit makes the
        // second one `Again`, a refusal, which is the safe side.
        let inserted = self.pool.with("cannot consume the approval", |c| {
            c.execute(
                "INSERT INTO capability_approval_ledger (approval_id, expires_at) VALUES ($1, $2)
                 ON CONFLICT (approval_id) DO NOTHING",
                &[&approval_id, &expires_at],
            )
        })?;
        Ok(if inserted == 1 {
            Consumed::First
        } else {
            Consumed::Again
        })
    }
}

/// The revocation store in `capability_revocation`.
pub struct PgRevocations {
    pub(crate) pool: Arc<Pool>,
}

impl fmt::Debug for PgRevocations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PgRevocations")
            .field(&self.pool.name)
            .finish()
    }
}

impl RevocationStore for PgRevocations {
    fn revoke(&self, grant_id: &str) -> Result<(), StoreError> {
        self.pool.ensure_schema()?;
        self.pool.with("cannot revoke the grant", |c| {
            c.execute(
                "INSERT INTO capability_revocation (grant_id) VALUES ($1)
                 ON CONFLICT (grant_id) DO NOTHING",
                &[&grant_id],
            )
        })?;
        Ok(())
    }

    fn revoked_among(&self, grant_ids: &[&str]) -> Result<Vec<String>, StoreError> {
        self.pool.ensure_schema()?;
        let rows = self.pool.with("cannot read the revocations", |c| {
            c.query(
                "SELECT grant_id FROM capability_revocation WHERE grant_id = ANY($1)",
                &[&grant_ids],
            )
        })?;
        let revoked: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
        Ok(grant_ids
            .iter()
            .filter(|id| revoked.iter().any(|r| r == *id))
            .map(|id| (*id).to_owned())
            .collect())
    }
}
