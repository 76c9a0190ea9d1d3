//! The model and the decision of `capability`: capability manifests, agents, the registry and
//! authorization.
//!
//! Depend on the facade crate `capability` instead: it re-exports what users need and provides
//! the macros that build these types. This crate is for the other crates of the workspace, which
//! build on the model (`capability-audit`, `capability-mcp`, `capability-gate`); it has no
//! macros, no cryptography, no async runtime and no I/O beyond reading policy files, so every
//! crate can depend on it cheaply.
//!
//! - [`manifest`]: `Capability`, `ReadOnlyTool`, `CapabilityManifest`, its hints and their
//!   provenance, the builder.
//! - [`agent`]: `Agent`, `AgentSpec`, `Target`, and the advisor rule checked at run time.
//! - [`registry`]: every derived tool and agent of a program.
//! - [`authz`]: the one decision, policies, the compiled index, `ToolContext`, `Authorize`.
//! - [`clock`]: where the runtime reads the time, and the manual clock tests move instead.
//! - [`json`]: the canonical JSON writer that descriptor hashes and digests use.
//! - [`toml_file`]: the error type of a TOML file with its line and column.

#![forbid(unsafe_code)]

pub mod agent;
pub mod authz;
pub mod clock;
pub mod json;
pub mod manifest;
pub mod registry;
pub mod toml_file;

#[doc(hidden)]
pub mod __private;

pub use agent::{Agent, AgentSpec, Target, assert_advisor_only};
pub use authz::Policy;
pub use manifest::{Capability, CapabilityManifest, ReadOnlyTool};
pub use registry::Registry;
