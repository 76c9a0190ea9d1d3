//! The feed of a PostgreSQL writer's tree checkpoints (`support/feed.rs`): its leaves once and
//! in order across a reopen, each checkpoint proven from the last, a cosigned one stored back.
//! On a throwaway server's schema (or SKIPPED without PostgreSQL;
//! `CAPABILITY_REQUIRE_POSTGRES=1` makes that a failure).

use capability_store::postgres::PgStore;
use capability_store::{SCHEMA_VERSION, Store};
use capability_testkit::pg;

#[test]
fn a_postgres_writer_feeds_its_leaves_once_in_order_and_each_checkpoint_is_proven_from_the_last() {
    let Some(url) = pg::schema_url("pg_feed") else {
        return;
    };
    let store = PgStore::connect(&url).expect("connect");
    assert_eq!(store.migrate().expect("migrate"), SCHEMA_VERSION);
    crate::support::feed::feeds_its_leaves_once_in_order_proving_each_checkpoint(&store);
}
