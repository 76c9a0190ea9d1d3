//! The stores' integration tests, on SQLite and on PostgreSQL (a throwaway server,
//! `capability_testkit::pg`, shared by the tests of this binary, a schema each). One module per
//! former test file (`cargo test -p capability-store --test it <module>::`); `support` holds the
//! checks both stores run.

mod support;

mod loop_guards;
mod pg_audit;
mod pg_feed;
mod pg_gate;
mod pg_outage;
mod pg_store;
mod pg_tree;
mod sqlite_audit;
mod sqlite_feed;
mod sqlite_gate;
mod sqlite_store;
mod sqlite_tree;
