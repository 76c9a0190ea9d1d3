//! Runtime types of `capability`: capability manifests, agent specs and the registry.
//!
//! Use these through the facade crate `capability`, which also provides the macros that build
//! them. This crate has no macros of its own.

#![forbid(unsafe_code)]

mod agent;
pub mod gate;
mod manifest;
mod registry;

#[doc(hidden)]
pub mod derived;

pub use agent::{Agent, AgentSpec, Target};
pub use manifest::{Capability, CapabilityManifest, InvalidManifest, ReadOnlyTool};
pub use registry::{Registry, RegistryError, RegistryProblem};
