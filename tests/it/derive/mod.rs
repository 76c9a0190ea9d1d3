//! The macros of `capability-derive` as users write them, through the facade (generated code
//! names `::capability`): manifests as the derive builds them, and the descriptor hash. The
//! compile errors are checked by the UI cases of `ui-tests/` (`capability-ui-tests`).
//!
//! Here, not in `capability-derive/tests`: a proc-macro crate's dev-dependencies are built for
//! the host with features of their own, so the facade as its dev-dependency was a second build
//! of the whole library (rmcp, tokio and the crates between) for these tests alone.

mod descriptor_hash;
mod manifest;
