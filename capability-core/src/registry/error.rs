//! Why the registry, or a tool or agent added to it, was refused.

use std::fmt;

use crate::agent::AdvisorViolation;

/// Why [`Registry::register_tool`](crate::Registry::register_tool) refused a tool. Nothing was stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterError {
    /// A tool with this name is already registered.
    DuplicateTool {
        /// The name.
        name: String,
        /// Where the registered one comes from.
        origin: String,
    },
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::DuplicateTool { name, origin } => write!(
                f,
                "a tool named `{name}` is already registered (from `{origin}`); choose another name"
            ),
        }
    }
}

impl std::error::Error for RegisterError {}

/// Why [`Registry::persist_spec`](crate::Registry::persist_spec) refused a spec. Nothing was stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PersistError {
    /// The spec binds a tool the registry does not know (by `provider/name`).
    UnknownTool {
        /// The agent.
        agent: String,
        /// The tool, as `provider/name`.
        tool: String,
    },
    /// The spec binds a registered tool's name with another descriptor: not the registered tool.
    DescriptorMismatch {
        /// The agent.
        agent: String,
        /// The tool, as `provider/name`.
        tool: String,
        /// The registered tool's descriptor hash.
        registered: String,
        /// The descriptor hash the spec gives.
        given: String,
    },
    /// An advisor spec binds tools that are not read-only.
    Advisor(AdvisorViolation),
    /// An agent with this name is already registered.
    DuplicateAgent {
        /// The name.
        name: String,
        /// Where the registered one comes from.
        origin: String,
    },
}

impl fmt::Display for PersistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PersistError::UnknownTool { agent, tool } => write!(
                f,
                "agent `{agent}` binds `{tool}`, which the registry does not know; \
                 register the tool first (`Registry::register_tool`)"
            ),
            PersistError::DescriptorMismatch {
                agent,
                tool,
                registered,
                given,
            } => write!(
                f,
                "agent `{agent}` binds `{tool}` with descriptor hash {given}, but the registered \
                 `{tool}` has {registered}: the spec's tool is not the registered one"
            ),
            PersistError::Advisor(violation) => violation.fmt(f),
            PersistError::DuplicateAgent { name, origin } => write!(
                f,
                "an agent named `{name}` is already registered (from `{origin}`); choose another name"
            ),
        }
    }
}

impl std::error::Error for PersistError {}

/// The registry was refused: every problem found, not only the first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryError {
    pub(super) problems: Vec<RegistryProblem>,
}

impl RegistryError {
    /// Every problem, in a stable order.
    pub fn problems(&self) -> &[RegistryProblem] {
        &self.problems
    }
}

/// One reason a registry was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryProblem {
    /// Two or more tools share a name.
    DuplicateTool {
        /// The name.
        name: String,
        /// The modules that define them, sorted.
        origins: Vec<String>,
    },
    /// Two or more agents share a name.
    DuplicateAgent {
        /// The name.
        name: String,
        /// The modules that define them, sorted.
        origins: Vec<String>,
    },
    /// An advisor agent binds tools that are not read-only.
    AdvisorBindsMutatingTool {
        /// The module that defines the agent.
        origin: String,
        /// The agent and every offending tool, with the reason.
        violation: AdvisorViolation,
    },
}

impl fmt::Display for RegistryProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted = |items: &[String]| {
            items
                .iter()
                .map(|i| format!("`{i}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            RegistryProblem::DuplicateTool { name, origins } => write!(
                f,
                "{} tools are named `{name}`, defined in {}; give each a distinct `name = \"..\"`",
                origins.len(),
                quoted(origins)
            ),
            RegistryProblem::DuplicateAgent { name, origins } => write!(
                f,
                "{} agents are named `{name}`, defined in {}; give each a distinct `name = \"..\"`",
                origins.len(),
                quoted(origins)
            ),
            RegistryProblem::AdvisorBindsMutatingTool { origin, violation } => {
                write!(f, "in `{origin}`: {violation}")
            }
        }
    }
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the tool registry was refused:")?;
        for problem in &self.problems {
            // A problem of several lines keeps its inner list indented under its bullet.
            let text = problem.to_string().replace('\n', "\n    ");
            write!(f, "\n  - {text}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RegistryError {}
