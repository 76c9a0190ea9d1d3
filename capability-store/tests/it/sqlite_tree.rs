//! The tree each writer keeps beside its records, on SQLite (`support/tree.rs`): signed tree
//! checkpoints and registrations in `mcp_audit_tree_checkpoint` and `mcp_audit_writer`
//! (migration 7), resumed on restart; a cut tail, a rewritten record, a removed writer found.

use crate::support::{tree, writers};

use std::path::PathBuf;

use capability_store::sqlite::SqliteStore;
use capability_store::{SCHEMA_VERSION, Store};
use rusqlite::{Connection, params};

fn store(name: &str) -> (SqliteStore, PathBuf) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sqlite-tree");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let store = SqliteStore::open(&path).expect("open");
    assert_eq!(store.migrate().expect("migrate"), SCHEMA_VERSION);
    (store, path)
}

struct Raw(PathBuf);

impl tree::Tamper for Raw {
    fn cut(&self, writer: &str, keep_through: u64) {
        let db = Connection::open(&self.0).expect("open");
        db.execute(
            "DELETE FROM mcp_audit_log WHERE writer_id = ?1 AND seq > ?2",
            params![writer, keep_through],
        )
        .expect("cut");
    }

    fn rewrite(&self, writer: &str, seq: u64) {
        let db = Connection::open(&self.0).expect("open");
        db.execute(
            "UPDATE mcp_audit_log SET tool = 'innocent' WHERE writer_id = ?1 AND seq = ?2",
            params![writer, seq],
        )
        .expect("rewrite");
    }

    fn cut_with_checkpoints(&self, writer: &str, keep_through: u64) {
        let db = Connection::open(&self.0).expect("open");
        for sql in [
            "DELETE FROM mcp_audit_log WHERE writer_id = ?1 AND seq > ?2",
            "DELETE FROM mcp_audit_checkpoint WHERE writer_id = ?1 AND seq > ?2",
            "DELETE FROM mcp_audit_tree_checkpoint WHERE writer_id = ?1 AND size > ?2",
        ] {
            db.execute(sql, params![writer, keep_through]).expect(sql);
        }
    }

    fn remove(&self, writer: &str) {
        let db = Connection::open(&self.0).expect("open");
        for table in [
            "mcp_audit_log",
            "mcp_audit_checkpoint",
            "mcp_audit_tree_checkpoint",
        ] {
            db.execute(
                &format!("DELETE FROM {table} WHERE writer_id = ?1"),
                params![writer],
            )
            .expect("remove");
        }
    }

    fn unregister(&self, writer: &str) {
        let db = Connection::open(&self.0).expect("open");
        db.execute(
            "DELETE FROM mcp_audit_writer WHERE writer_id = ?1",
            params![writer],
        )
        .expect("unregister");
    }
}

#[test]
fn sqlite_writers_sign_register_and_resume_their_trees() {
    let (store, _) = store("resume");
    tree::signs_registers_and_resumes(&store);
}

#[test]
fn sqlite_a_cut_tail_is_found_by_the_tree_checkpoint() {
    let (store, path) = store("cut");
    tree::finds_a_cut_tail(&store, &Raw(path));
}

#[test]
fn sqlite_a_rewritten_record_is_found_and_not_resumed_over() {
    let (store, path) = store("rewrite");
    tree::finds_a_rewritten_record(&store, &Raw(path));
}

#[test]
fn sqlite_a_removed_writer_is_found_by_its_registration() {
    let (store, path) = store("removed");
    tree::finds_a_removed_writer(&store, &Raw(path));
}

#[test]
fn sqlite_a_database_of_schema_6_migrates_to_the_tree_tables() {
    let (store, path) = store("migrate");
    drop(store);
    // Back to schema 6: without migration 7's tables and its row.
    let db = Connection::open(&path).expect("open");
    db.execute_batch(
        "DROP TABLE mcp_audit_tree_checkpoint; DROP TABLE mcp_audit_writer;
         DELETE FROM capability_schema_version WHERE version = 7;",
    )
    .expect("schema 6");
    drop(db);
    let store = SqliteStore::open(&path).expect("open");
    assert_eq!(store.migrate().expect("migrate"), SCHEMA_VERSION);
    let (key, _) = tree::key();
    tree::write(&store, "after-migration", &key, 2).expect("write");
    let trail = store.read_trail().expect("trail");
    assert_eq!(trail.tree_checkpoints.len(), 1);
    assert_eq!(trail.writers.len(), 1);
}

#[test]
fn sqlite_an_idle_writer_signs_checkpoints_and_a_cut_with_its_checkpoints_leaves_a_gap() {
    let (store, path) = store("idle");
    tree::idle_checkpoints_and_a_cut_with_them(&store, &Raw(path));
}

#[test]
fn sqlite_the_latest_writer_removed_is_found_by_a_later_checkpoint_of_another() {
    let (store, path) = store("latest");
    writers::finds_the_latest_writer_removed(&store, &Raw(path));
}

#[test]
fn sqlite_idle_and_stopped_checkpoints_name_the_latest_registration() {
    let (store, path) = store("latest-idle");
    writers::idle_and_stopped_checkpoints_name_the_latest(&store, &Raw(path));
}

#[test]
fn sqlite_the_latest_writer_removed_before_any_checkpoint_names_it_is_not_found() {
    let (store, path) = store("latest-unnamed");
    writers::the_latest_writer_removed_before_any_checkpoint_names_it_is_not_found(
        &store,
        &Raw(path),
    );
}

#[test]
fn sqlite_writers_registering_while_another_checkpoints_are_never_a_finding() {
    let (store, _) = store("latest-race");
    writers::writers_registering_while_another_checkpoints_are_never_a_finding(&store);
}

#[test]
fn sqlite_a_writer_closing_in_the_millisecond_of_its_last_checkpoint_stores_its_stopped_one() {
    let (store, _) = store("stopped-same-ms");
    writers::a_writer_closing_in_the_millisecond_of_its_last_checkpoint_stores_its_stopped_one(
        &store,
    );
}
