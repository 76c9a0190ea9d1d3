//! The tree each writer keeps beside its records, on PostgreSQL (`support/tree.rs`): signed
//! tree checkpoints and registrations in `mcp_audit_tree_checkpoint` and `mcp_audit_writer`
//! (migration 7), resumed on restart; a cut tail, a rewritten record, a removed writer found.
//! Each test starts a throwaway server's schema (or prints SKIPPED without PostgreSQL;
//! `CAPABILITY_REQUIRE_POSTGRES=1` makes that a failure).

use capability_testkit::pg;

use crate::support::{tree, writers};

use capability_store::postgres::PgStore;
use capability_store::{SCHEMA_VERSION, Store};

fn store(test: &str) -> Option<(PgStore, String)> {
    let url = pg::schema_url(test)?;
    let store = PgStore::connect(&url).expect("connect");
    assert_eq!(store.migrate().expect("migrate"), SCHEMA_VERSION);
    Some((store, url))
}

struct Raw(String);

impl Raw {
    fn run(&self, sql: &str, writer: &str, n: i64) {
        let mut db = postgres::Client::connect(&self.0, postgres::NoTls).expect("connect");
        db.execute(sql, &[&writer, &n]).expect(sql);
    }
}

impl tree::Tamper for Raw {
    fn cut(&self, writer: &str, keep_through: u64) {
        let n = i64::try_from(keep_through).expect("seq");
        self.run(
            "DELETE FROM mcp_audit_log WHERE writer_id = $1 AND seq > $2",
            writer,
            n,
        );
    }

    fn rewrite(&self, writer: &str, seq: u64) {
        // These records fit the columns (no `record_json`): the column is the record.
        let n = i64::try_from(seq).expect("seq");
        self.run(
            "UPDATE mcp_audit_log SET tool = 'innocent' WHERE writer_id = $1 AND seq = $2",
            writer,
            n,
        );
    }

    fn cut_with_checkpoints(&self, writer: &str, keep_through: u64) {
        let n = i64::try_from(keep_through).expect("seq");
        for sql in [
            "DELETE FROM mcp_audit_log WHERE writer_id = $1 AND seq > $2",
            "DELETE FROM mcp_audit_checkpoint WHERE writer_id = $1 AND seq > $2",
            "DELETE FROM mcp_audit_tree_checkpoint WHERE writer_id = $1 AND size > $2",
        ] {
            self.run(sql, writer, n);
        }
    }

    fn remove(&self, writer: &str) {
        for table in [
            "mcp_audit_log",
            "mcp_audit_checkpoint",
            "mcp_audit_tree_checkpoint",
        ] {
            self.run(
                &format!("DELETE FROM {table} WHERE writer_id = $1 AND $2::bigint >= 0"),
                writer,
                0,
            );
        }
    }

    fn unregister(&self, writer: &str) {
        self.run(
            "DELETE FROM mcp_audit_writer WHERE writer_id = $1 AND $2::bigint >= 0",
            writer,
            0,
        );
    }
}

#[test]
fn postgres_writers_sign_register_and_resume_their_trees() {
    let Some((store, _)) = store("tree_resume") else {
        return;
    };
    tree::signs_registers_and_resumes(&store);
}

#[test]
fn postgres_a_cut_tail_is_found_by_the_tree_checkpoint() {
    let Some((store, url)) = store("tree_cut") else {
        return;
    };
    tree::finds_a_cut_tail(&store, &Raw(url));
}

#[test]
fn postgres_a_rewritten_record_is_found_and_not_resumed_over() {
    let Some((store, url)) = store("tree_rewrite") else {
        return;
    };
    tree::finds_a_rewritten_record(&store, &Raw(url));
}

#[test]
fn postgres_a_removed_writer_is_found_by_its_registration() {
    let Some((store, url)) = store("tree_removed") else {
        return;
    };
    tree::finds_a_removed_writer(&store, &Raw(url));
}

#[test]
fn postgres_an_idle_writer_signs_checkpoints_and_a_cut_with_its_checkpoints_leaves_a_gap() {
    let Some((store, url)) = store("tree_idle") else {
        return;
    };
    tree::idle_checkpoints_and_a_cut_with_them(&store, &Raw(url));
}

#[test]
fn postgres_the_latest_writer_removed_is_found_by_a_later_checkpoint_of_another() {
    let Some((store, url)) = store("tree_latest") else {
        return;
    };
    writers::finds_the_latest_writer_removed(&store, &Raw(url));
}

#[test]
fn postgres_idle_and_stopped_checkpoints_name_the_latest_registration() {
    let Some((store, url)) = store("tree_latest_idle") else {
        return;
    };
    writers::idle_and_stopped_checkpoints_name_the_latest(&store, &Raw(url));
}

#[test]
fn postgres_the_latest_writer_removed_before_any_checkpoint_names_it_is_not_found() {
    let Some((store, url)) = store("tree_latest_unnamed") else {
        return;
    };
    writers::the_latest_writer_removed_before_any_checkpoint_names_it_is_not_found(
        &store,
        &Raw(url),
    );
}

#[test]
fn postgres_writers_registering_while_another_checkpoints_are_never_a_finding() {
    let Some((store, _)) = store("tree_latest_race") else {
        return;
    };
    writers::writers_registering_while_another_checkpoints_are_never_a_finding(&store);
}

#[test]
fn postgres_a_writer_closing_in_the_millisecond_of_its_last_checkpoint_stores_its_stopped_one() {
    let Some((store, _)) = store("tree_stopped_same_ms") else {
        return;
    };
    writers::a_writer_closing_in_the_millisecond_of_its_last_checkpoint_stores_its_stopped_one(
        &store,
    );
}
