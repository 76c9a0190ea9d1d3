//! The library half of the `capability` command: spawning and supervising a live MCP server to
//! list its tools ([`supervise`]), and `capability proxy` ([`proxy`]). The command itself (`src/main.rs`) is the user interface; this
//! part is a library so that its tests can drive it against real processes.
//!
//! Process supervision lives here, in the command line's crate, and nowhere in the libraries:
//! no library crate of the workspace enables `tokio/process`.

#![forbid(unsafe_code)]

mod blocking;
mod envelope;
pub mod escape;
pub mod files;
pub mod gateway;
mod lines;
pub mod metrics;
pub mod otlp;
pub mod proxy;
pub mod report;
pub mod supervise;
pub mod tools_file;

pub use lines::{MessageBound, parse_max_message};
