//! Checks that every store must pass, written once and run on SQLite and on PostgreSQL.

pub mod feed;
pub mod proposals;
pub mod tree;
pub mod versions;
pub mod writers;
