//! The migrations this build ships, applied in order inside one transaction that holds an
//! advisory lock, so two processes migrating at once are safe.

use capability_gate::StoreError;

use super::pool::Pool;
use crate::SCHEMA_VERSION;

/// Every migration, by the version it brings the schema to.
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../../migrations/postgres/0001_init.sql")),
    (2, include_str!("../../migrations/postgres/0002_calls.sql")),
    (
        3,
        include_str!("../../migrations/postgres/0003_principal.sql"),
    ),
    (
        4,
        include_str!("../../migrations/postgres/0004_loop_guards.sql"),
    ),
    (
        5,
        include_str!("../../migrations/postgres/0005_proposals.sql"),
    ),
    (
        6,
        include_str!("../../migrations/postgres/0006_stats_and_versions.sql"),
    ),
    (
        7,
        include_str!("../../migrations/postgres/0007_tree_checkpoints.sql"),
    ),
];

/// The advisory lock key of migrations (`capability` in ASCII, as a number).
const LOCK_KEY: i64 = 0x6361_7061_6269_6c69;

/// Applies what is missing; returns the schema version.
pub(crate) fn migrate(pool: &Pool) -> Result<u32, StoreError> {
    let mut client = pool.connect()?;
    let error = |what: &str, e: postgres::Error| pool.error(what, &e);
    let mut tx = client
        .transaction()
        .map_err(|e| error("cannot start the migration", e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .map_err(|e| error("cannot take the migration lock", e))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS capability_schema_version (
             version    INTEGER     PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .map_err(|e| error("cannot create capability_schema_version", e))?;
    let current: i32 = tx
        .query_one(
            "SELECT COALESCE(max(version), 0) FROM capability_schema_version",
            &[],
        )
        .map_err(|e| error("cannot read the schema version", e))?
        .get(0);
    let current = u32::try_from(current).unwrap_or(0);
    if current > SCHEMA_VERSION {
        // Dropping the transaction rolls it back: nothing is changed.
        return Err(StoreError::new(
            pool.name.clone(),
            format!(
                "the database is at schema version {current}, newer than this build's version \
                 {SCHEMA_VERSION}: refusing to migrate it (upgrade capability)"
            ),
        ));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.batch_execute(sql)
            .map_err(|e| error(&format!("migration {version} failed"), e))?;
        let version = i32::try_from(*version).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO capability_schema_version (version) VALUES ($1)",
            &[&version],
        )
        .map_err(|e| error("cannot record the schema version", e))?;
    }
    tx.commit()
        .map_err(|e| error("cannot commit the migration", e))?;
    Ok(SCHEMA_VERSION.max(current))
}
