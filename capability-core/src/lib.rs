//! Runtime types of `capability`: capability manifests, agent specs and the registry.
//!
//! Use these through the facade crate `capability`, which also provides the macros that build
//! them. This crate has no macros of its own.

#![forbid(unsafe_code)]

mod advisor;
mod agent;
mod audit;
mod builder;
mod canonical;
mod dispatch;
pub mod gate;
mod hints;
mod lock;
mod manifest;
mod mcp;
mod policy;
mod registry;
#[cfg(feature = "rmcp")]
pub mod rmcp;

#[doc(hidden)]
pub mod derived;

pub use advisor::{AdvisorViolation, MutatingReason, Offender, assert_advisor_only};
pub use agent::{Agent, AgentSpec, AgentSpecBuilder, AgentSpecError, Target};
pub use audit::{
    AuditError, AuditRecord, AuditSink, AuditedDispatch, Budget, Caller, DegradeReason,
    FlushPolicy, GENESIS, JsonlSink, MemorySink, OnAuditFailure, Outcome, ProblemKind, Redactor,
    TrailProblem, Verdict, VerifyReport, read_jsonl, redact_sensitive, utc_now, verify_jsonl,
};
pub use builder::ManifestBuilder;
pub use canonical::to_canonical_json;
pub use dispatch::{Ceiling, Decision, Denial, DenyReason, Effect, ToolContext};
pub use hints::{Hint, HintKind, HintSource};
pub use lock::{
    DriftStatus, LOCKFILE_VERSION, LockError, LockedTool, Lockfile, Part, PartHashes, Review,
    ReviewedTool,
};
pub use manifest::{
    Assertion, Capability, CapabilityManifest, FieldProblem, ManifestError, ReadOnlyTool,
};
#[cfg(feature = "schemars")]
pub use mcp::mcp_tool;
pub use mcp::{MCP_DESCRIPTOR_FIELDS, Server, Trust, mcp_descriptor_hash};
pub use policy::{Pattern as ToolPattern, Policy, PolicyError, PolicyIndex, RoleId};
pub use registry::{PersistError, RUNTIME_ORIGIN, Registry, RegistryError, RegistryProblem};
