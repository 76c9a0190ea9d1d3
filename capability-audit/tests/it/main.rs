//! The audit trail's integration tests: audited dispatch (records, redaction, budgets, intent
//! before outcome, fail-closed sinks), the JSON Lines trail and its checkpoints, secrets in the
//! trail, the Merkle tree's proofs, tree sinks and witnesses. One module per former test file
//! (`cargo test -p capability-audit --test it <module>::`); the tracing tests are the `tracing`
//! binary.

use capability_testkit::fixtures as common;

mod audit;
mod audit_checkpoints;
mod audit_failclosed;
mod audit_intent;
mod audit_secrets;
mod audit_strict_jsonl;
mod tlog;
mod tree_held;
mod tree_sinks;
mod witness;
mod witness_feed;
mod writers;
