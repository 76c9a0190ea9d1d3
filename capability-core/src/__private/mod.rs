//! What `#[derive(Capability)]`, `#[advisor_agent]` and `#[agent]` expand to call.
//!
//! Not a public API: generated code reaches it only through `capability::__private`, whose
//! contents may change in any release. Nothing here is documented for users, and nothing a user
//! writes by hand should name it.

mod derived;
mod meta;

pub use crate::agent::{
    AdvisorBinding, AdvisorBound, AdvisorTokens, AdvisorTool, OperatorBound, OperatorTool,
    bind_advisor_tool, bind_tool,
};
pub use derived::{AgentEntry, StaticAgent, StaticTool, ToolData, ToolEntry};
pub use meta::tool_meta;

// The public names generated code uses, reached through this module so that a user's own item
// called `Capability` or `Agent` can never capture what the macros mean.
pub use crate::agent::{Agent, AgentSpec, Target};
pub use crate::manifest::data::ManifestData;
pub use crate::manifest::{Capability, CapabilityManifest, HintSet, ReadOnlyProof, ReadOnlyTool};
pub use core::marker::PhantomData;
pub use core::option::Option;
pub use core::{concat, module_path, unreachable};
pub use inventory;
