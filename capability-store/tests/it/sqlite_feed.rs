//! The feed of a SQLite writer's tree checkpoints (`support/feed.rs`): its leaves once and in
//! order across a reopen, each checkpoint proven from the last, a cosigned one stored back.

use std::path::PathBuf;

use capability_store::sqlite::SqliteStore;
use capability_store::{SCHEMA_VERSION, Store};

#[test]
fn a_sqlite_writer_feeds_its_leaves_once_in_order_and_each_checkpoint_is_proven_from_the_last() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sqlite-feed");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("feed.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let store = SqliteStore::open(&path).expect("open");
    assert_eq!(store.migrate().expect("migrate"), SCHEMA_VERSION);
    crate::support::feed::feeds_its_leaves_once_in_order_proving_each_checkpoint(&store);
}
