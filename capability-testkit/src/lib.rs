//! What the workspace's tests and benchmarks share, written once (a `publish = false` crate, as
//! tracing's `tracing-test`).
//!
//! Depend on it as a dev-dependency only; no library of the workspace may use it.
//!
//! - [`Rng`]: the one deterministic generator of the property tests and benchmarks.
//! - [`wait_for`]: poll a condition until it holds or ten seconds pass.
//! - [`Scratch`]: a test's own folder under the temporary directory, removed when it passes.
//! - [`pg`]: a throwaway PostgreSQL server and a schema per test.
//! - [`servers`]: the official MCP reference servers, the TypeScript and Python SDK clients, the
//!   conformance suite and Chromium, installed from the project's pinned lock files; raw HTTP
//!   and an OTLP receiver.
//! - [`Binary`]: a harness that runs the `capability` binary (its path comes from the caller:
//!   `CARGO_BIN_EXE_capability` is only set for `capability-cli`'s own tests).
//! - [`relay`]: the benchmarks' plain byte relay, a baseline for a process in between.
//! - [`tier`]: the tier of `.ci/tiers` a test runs in; what only the interop tier provides
//!   refuses in the default one, so `.ci/interop-tests` cannot miss a test.
//! - `fixtures` (feature `facade`): manifests, grants and trail checks built with the facade.
//!
//! The tools crate of the registry tests stays its own crate (`tests/toolkit`): a crate of
//! derived tools registers them (inventory) in every binary that links it, which is what the
//! registry tests measure, and what no other test binary should get.

// Each test binary uses only part of the kit.
#![allow(dead_code, missing_docs)]

mod bin;
#[cfg(feature = "facade")]
pub mod fixtures;
pub mod pg;
mod port;
pub mod relay;
mod rng;
mod scratch;
pub mod servers;
pub mod tier;
mod wait;
pub mod workspace;

pub use bin::Binary;
pub use port::free_port;
pub use rng::Rng;
pub use scratch::{Scratch, fresh_dir};
pub use wait::wait_for;
