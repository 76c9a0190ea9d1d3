//! Capability manifests for AI-agent tools, and an advisor-only gate the compiler enforces.
//!
//! Every tool carries a frozen [`CapabilityManifest`], attached where the tool is defined by
//! [`#[derive(Capability)]`](derive@Capability). Its four hints mean what the MCP tool annotations
//! mean, with the same fail-closed defaults: a tool that says nothing is mutating. An agent
//! declared with [`#[advisor_agent]`](advisor_agent) may bind read-only tools only, and binding
//! anything else is a compile error that points at the tool:
//!
//! ```rust,standalone_crate
//! use capability::{advisor_agent, agent, Agent, Capability, Registry};
//!
//! /// Run a PromQL query.
//! #[derive(Capability)]
//! #[capability(read_only, idempotent, open_world = false, scopes = ["metrics:read"])]
//! struct PromQuery { query: String }
//!
//! /// Restart a pod.
//! #[derive(Capability)]
//! #[capability(destructive, scopes = ["k8s:write"], provider = "k8s")]
//! struct RestartPod { name: String }
//!
//! #[advisor_agent(tools(PromQuery), target = "analysis")]
//! struct Analyst;
//!
//! #[agent(tools(PromQuery, RestartPod))]
//! struct Operator;
//!
//! let m = PromQuery::manifest();
//! assert_eq!(m.name(), "prom_query");
//! assert!(m.read_only() && !m.destructive() && !m.open_world());
//! assert_eq!(m.description(), Some("Run a PromQL query."));
//! assert!(Analyst::spec().is_advisor());
//! assert_eq!(Operator::spec().tools()[1].name(), "restart_pod");
//!
//! let registry = Registry::from_inventory()?;
//! assert!(registry.tool("restart_pod").is_some_and(|t| t.destructive()));
//! # Ok::<(), capability::registry::RegistryError>(())
//! ```
//!
//! The same analyst binding `RestartPod` does not build:
//!
//! ```compile_fail,E0277
//! use capability::{advisor_agent, Capability};
//!
//! #[derive(Capability)]
//! #[capability(destructive, scopes = ["k8s:write"])]
//! struct RestartPod { name: String }
//!
//! #[advisor_agent(tools(RestartPod), target = "analysis")]
//! struct Analyst;
//! ```
//!
//! ```text
//! error[E0277]: advisor agent `Analyst` cannot bind `RestartPod`, because `RestartPod` is not a read-only tool
//!  --> src/agents.rs:7:23
//!   |
//! 7 | #[advisor_agent(tools(RestartPod), target = "analysis")]
//!   |                       ^^^^^^^^^^ `RestartPod` may mutate state, and `Analyst` is an advisor
//! ```
//!
//! # What the compiler cannot see
//!
//! The gate covers tools known at compile time. Tools behind `dyn`, and tools that arrive at run
//! time (an MCP server's `tools/list`, a plugin), have no type for the compiler to check; the
//! registry re-checks every advisor at startup, and the runtime core decides those calls.
//!
//! # The facade's name
//!
//! Generated code names this crate `::capability`. If you rename the dependency in
//! `Cargo.toml`, tell the macros with `crate = "::new_name"` in each attribute.

#![forbid(unsafe_code)]

// The curated root: what nearly every user names. Everything else lives in a module below.
pub use capability_core::authz::Decision;
pub use capability_core::manifest::ManifestError;
pub use capability_core::{
    Agent, AgentSpec, Capability, CapabilityManifest, Policy, ReadOnlyTool, Registry, Target,
    assert_advisor_only,
};
#[cfg(feature = "gate")]
pub use capability_gate::{AdvisorSession, Approved, Execute, Proposal, Run, WriteGate};
pub use capability_mcp::Server;

pub use capability_core::{agent, authz, clock, json, manifest, registry};

/// The audit trail: audited dispatch, records, sinks, budgets (crate `capability-audit`).
///
#[doc = include_str!("../docs/audit.md")]
pub mod audit {
    pub use capability_audit::*;
}

/// The MCP side: tools from MCP servers, export, descriptor pinning (crate `capability-mcp`).
///
#[doc = include_str!("../docs/mcp.md")]
pub mod mcp {
    pub use capability_mcp::*;
}

/// rmcp: conversions, listing, the governed client (feature `rmcp`).
#[cfg(feature = "rmcp")]
pub use capability_mcp::rmcp;

/// The HTTP edge of a governed server: an OAuth 2.1 resource server (JWT access tokens of the
/// policy's `[auth]` issuer), the bearer-token table, Origin checks, sessions bound to their
/// caller, body and rate limits (feature `http`; crate `capability-http`).
///
#[doc = include_str!("../docs/http-edge.md")]
#[cfg(feature = "http")]
pub mod http {
    pub use capability_http::*;
}

/// The gated write path: proposals, signed approvals, the write gate, authority grants (feature
/// `gate`, on by default; crate `capability-gate`).
///
#[doc = include_str!("../docs/write-path.md")]
#[cfg(feature = "gate")]
pub mod gate {
    pub use capability_gate::*;
}

/// Durable shared state: the approval ledger, revocations and the audit trail on SQLite and
/// (feature `postgres`) PostgreSQL (feature `store`; crate `capability-store`).
///
#[doc = include_str!("../docs/storage.md")]
#[cfg(feature = "store")]
pub mod store {
    pub use capability_store::*;
}

/// The agent loop of ADR-105: role-filtered tools in the provider's schema, audited tool
/// calls, `max_iterations`, degrade, the circuit breaker, shadow mode (feature `agent-loop`;
/// crate `capability-agent`).
///
#[doc = include_str!("../docs/agent-loop.md")]
#[cfg(feature = "agent-loop")]
pub mod agent_loop {
    pub use capability_agent::*;
}

/// The gateway: `capability gateway` and `capability proxy` govern any MCP client in front of
/// the servers it already uses (crate `capability-gateway`, the engine of the `capability`
/// command). The facade does not depend on that crate, to keep its weight off users who only
/// declare tools: this module holds the chapter and no items.
///
#[doc = include_str!("../docs/gateway.md")]
pub mod gateway {}

/// Declares an advisor agent: a research, selection or analysis agent, which only reads.
///
/// ```
/// use capability::{advisor_agent, Agent, Capability, Target};
///
/// /// Search the runbooks.
/// #[derive(Capability)]
/// #[capability(read_only, scopes = ["rag:read"])]
/// struct SearchRunbooks { query: String }
///
/// #[advisor_agent(tools(SearchRunbooks), target = "selection", name = "runbook_picker")]
/// struct Picker;
///
/// let spec = Picker::spec();
/// assert_eq!(spec.name(), "runbook_picker");
/// assert_eq!(spec.target(), Target::Selection);
/// ```
///
/// Keys: `tools(A, B<C>, path::D)` (required: type paths of the bound tools, each implementing
/// [`Capability`] with `READ_ONLY = true`), `target = "research" | "selection" | "analysis"`
/// (default `"research"`), `name = ".."` (default: snake_case of the type), `crate = ".."`.
/// Binding a tool that is not read-only, also through a type alias or from another crate, is a
/// compile error at that tool's path, in every build profile.
pub use capability_derive::advisor_agent;

/// Declares an operator agent, which may bind any tool.
///
/// ```
/// use capability::{agent, Agent, Capability, Target};
///
/// /// Scale a deployment.
/// #[derive(Capability)]
/// #[capability(idempotent, destructive = false, scopes = ["k8s:write"])]
/// struct Scale { replicas: u32 }
///
/// #[agent(tools(Scale))]
/// struct Deployer;
///
/// assert_eq!(Deployer::spec().target(), Target::Operator);
/// assert!(!Deployer::spec().is_advisor());
/// ```
///
/// Keys: `tools(...)` (required), `name = ".."`, `crate = ".."`. Each tool must have a
/// capability manifest.
pub use capability_derive::agent;

/// Gives each `#[tool(...)]` method of an rmcp `#[tool_router]` impl block a capability manifest
/// and a type agents can bind, read from the same `#[tool(...)]` tokens rmcp publishes.
///
/// Place it above `#[tool_router]`. For each tool method it reads what rmcp reads: the name
/// (`name = ".."`, else the method name), the description (`description = ..`, else the doc
/// comment), and `annotations(read_only_hint, destructive_hint, idempotent_hint,
/// open_world_hint)`; absent hints take the MCP defaults on both sides, so the manifest and the
/// `Tool.annotations` rmcp lists never disagree. `#[capability(scopes = [..], provider = "..")]`
/// next to `#[tool(...)]` adds scopes and a provider, and is removed before rmcp sees the item.
/// The rules of [`derive@Capability`] are compile errors at the token they are about.
///
/// Each tool becomes a unit struct named after the tool in CamelCase, in a module named after
/// the type (`impl OpsServer` -> `ops_server_tools::ListPods`; `module = name` overrides it),
/// with `impl Capability` (and `ReadOnlyTool` for a read-only tool), registered in the
/// inventory. An advisor can bind the read-only ones only:
///
/// ```rust,standalone_crate
/// use capability::{advisor_agent, agent, tool_capabilities, Agent, Capability};
/// use rmcp::handler::server::wrapper::Parameters;
/// use rmcp::{tool, tool_router};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct PodRef { name: String }
///
/// struct OpsServer;
///
/// #[tool_capabilities]
/// #[tool_router]
/// impl OpsServer {
///     /// List the pods of the cluster.
///     #[tool(annotations(read_only_hint = true, open_world_hint = false))]
///     #[capability(scopes = ["k8s:read"], provider = "k8s")]
///     fn list_pods(&self) -> String { "web-1".into() }
///
///     /// Restart a pod.
///     #[tool(annotations(destructive_hint = true))]
///     #[capability(scopes = ["k8s:write"])]
///     fn restart_pod(&self, Parameters(pod): Parameters<PodRef>) -> String { pod.name }
/// }
///
/// #[advisor_agent(tools(ops_server_tools::ListPods))]
/// struct Viewer;
///
/// #[agent(tools(ops_server_tools::ListPods, ops_server_tools::RestartPod))]
/// struct Operator;
///
/// let m = ops_server_tools::ListPods::manifest();
/// assert_eq!(m.name(), "list_pods");
/// assert!(m.read_only() && !m.open_world());
/// assert_eq!(m.description(), Some("List the pods of the cluster."));
/// assert!(ops_server_tools::RestartPod::manifest().destructive());
/// assert_eq!(OpsServer::tool_router().list_all().len(), 2);
/// assert!(Viewer::spec().is_advisor());
/// ```
///
/// Keys of `#[tool_capabilities(...)]`: `module = name`, `crate = ".."`. Keys of
/// `#[capability(...)]` on a tool method: `scopes = [..]`, `provider = ".."`.
pub use capability_derive::tool_capabilities;

/// Attaches a frozen [`CapabilityManifest`] to a tool type and registers it.
///
/// Works on named, tuple and unit structs and on enums, generic ones included. Several
/// `#[capability(...)]` attributes merge; a key given twice is an error.
///
/// | key | value | default |
/// |---|---|---|
/// | `read_only` | bare, or `= true / false` | `false` |
/// | `destructive` | bare, or `= true / false` | `true`; `false` for a read-only tool |
/// | `idempotent` | bare, or `= true / false` | `false` |
/// | `open_world` | bare, or `= true / false` | `true` |
/// | `scopes` | `["a:read", ...]` | none |
/// | `name` | `".."`, 1 to 128 of `A-Z a-z 0-9 _ - .` | snake_case of the type |
/// | `title` | `".."` | none |
/// | `description` | `".."` | the doc comment |
/// | `provider` | `".."` | none |
/// | `output` | a type | none |
/// | `version` | `".."` | first 12 hex digits of the descriptor hash |
/// | `sensitive` | `["field", ..]`, named fields the audit trail stores as digests | none |
/// | `crate` | `".."`, the facade's path | `"::capability"` |
///
/// ```
/// use capability::Capability;
///
/// /// Fetch a document by id.
/// #[derive(Capability)]
/// #[capability(read_only, idempotent)]
/// #[capability(scopes = ["docs:read"], output = String, version = "2")]
/// struct Fetch<T> { id: T }
///
/// let m = Fetch::<u64>::manifest();
/// assert_eq!(m.name(), "fetch");
/// assert_eq!(m.schema_version(), "2");
/// assert_eq!(m.output_schema_id(), Some("String"));
/// // One manifest for every instantiation.
/// assert!(std::ptr::eq(m, Fetch::<String>::manifest()));
/// ```
pub use capability_derive::Capability;

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[doc(hidden)]
pub mod __private {
    //! What generated code names. Not a public API.
    pub use capability_core::__private::*;
}
