//! Agents: a name, a target and the tools they bind.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};

mod advisor;
mod bindable;

pub use advisor::{AdvisorViolation, MutatingReason, Offender, assert_advisor_only};
pub use bindable::{AdvisorBindable, AdvisorBound, OperatorBound};
#[doc(hidden)]
pub use bindable::{
    AdvisorBinding, AdvisorTokens, AdvisorTool, OperatorTool, bind_advisor_tool, bind_tool,
};

use crate::manifest::CapabilityManifest;

/// What an agent is for. The first three are advisor targets: such an agent only reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Gathers evidence (the default advisor target).
    Research,
    /// Chooses among options.
    Selection,
    /// Interprets data.
    Analysis,
    /// Acts on the world: may bind mutating tools. Not an advisor.
    Operator,
}

impl Target {
    /// Whether agents with this target are advisors, which may bind read-only tools only.
    pub const fn is_advisor(self) -> bool {
        !matches!(self, Target::Operator)
    }

    /// The lowercase name, as written in `target = "..."`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Target::Research => "research",
            Target::Selection => "selection",
            Target::Analysis => "analysis",
            Target::Operator => "operator",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An agent: the type implementing it carries a frozen [`AgentSpec`].
///
/// Implement it with `#[advisor_agent(...)]` or `#[agent(...)]`, which also register the agent.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an agent",
    label = "`{Self}` has no agent spec",
    note = "add `#[advisor_agent(tools(...))]` or `#[agent(tools(...))]` to `{Self}`"
)]
pub trait Agent {
    /// The agent's spec, built once.
    fn spec() -> &'static AgentSpec;
}

/// What an agent is and which tools it binds.
///
/// It serializes with serde and deserializes only through the
/// [builder](AgentSpec::builder)'s checks (a valid name, a target, no tool bound twice). Its
/// tools deserialize as [`CapabilityManifest`]s do, as claims nobody believes: a spec read from a
/// file says which tools it binds, and [`Registry::persist_spec`](crate::Registry::persist_spec)
/// takes their manifests from the registry, never from the file.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "SpecFile")]
pub struct AgentSpec {
    // Borrowed from the binary for a derived agent.
    name: Cow<'static, str>,
    target: Target,
    tools: Vec<CapabilityManifest>,
}

/// What an agent spec deserializes from; checked by the builder.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    name: String,
    target: Option<Target>,
    tools: Vec<CapabilityManifest>,
}

impl TryFrom<SpecFile> for AgentSpec {
    type Error = AgentSpecError;

    fn try_from(file: SpecFile) -> Result<Self, AgentSpecError> {
        let builder = AgentSpec::builder(file.name).tools(file.tools);
        match file.target {
            Some(target) => builder.target(target),
            None => builder,
        }
        .build()
    }
}

impl AgentSpec {
    pub(crate) fn new(
        name: Cow<'static, str>,
        target: Target,
        tools: Vec<CapabilityManifest>,
    ) -> Self {
        AgentSpec {
            name,
            target,
            tools,
        }
    }

    /// The same spec binding `tools` instead (the registry's manifests of the same tools).
    pub(crate) fn with_tools(self, tools: Vec<CapabilityManifest>) -> Self {
        AgentSpec { tools, ..self }
    }

    /// The agent name: snake_case of the type, or the `name = ".."` key.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the agent is for.
    pub fn target(&self) -> Target {
        self.target
    }

    /// Whether the agent is an advisor (research, selection or analysis), which only reads.
    pub fn is_advisor(&self) -> bool {
        self.target.is_advisor()
    }

    /// The manifests of the bound tools, in declaration order.
    pub fn tools(&self) -> &[CapabilityManifest] {
        &self.tools
    }

    /// The bound tools that are not read-only: must be empty for an advisor.
    pub fn mutating_tools(&self) -> impl Iterator<Item = &CapabilityManifest> {
        self.tools.iter().filter(|tool| !tool.read_only())
    }

    /// Starts a spec for an agent assembled at run time.
    ///
    /// [`build`](AgentSpecBuilder::build) checks the spec's own shape (a valid name, a target,
    /// no tool bound twice) but not the advisor rule: that is
    /// [`assert_advisor_only`]'s job, which
    /// [`Registry::persist_spec`](crate::Registry::persist_spec) runs.
    pub fn builder(name: impl Into<String>) -> AgentSpecBuilder {
        AgentSpecBuilder {
            name: name.into(),
            target: None,
            tools: Vec::new(),
        }
    }
}

/// Builds an [`AgentSpec`] at run time.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct AgentSpecBuilder {
    name: String,
    target: Option<Target>,
    tools: Vec<CapabilityManifest>,
}

impl AgentSpecBuilder {
    /// Sets the target (required).
    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// Binds a tool.
    pub fn tool(mut self, manifest: CapabilityManifest) -> Self {
        self.tools.push(manifest);
        self
    }

    /// Binds several tools.
    pub fn tools(mut self, manifests: impl IntoIterator<Item = CapabilityManifest>) -> Self {
        self.tools.extend(manifests);
        self
    }

    /// Checks the spec's shape and builds it, or reports every problem.
    pub fn build(self) -> Result<AgentSpec, AgentSpecError> {
        let mut problems = Vec::new();
        if let Err(violation) = capability_rules::check_agent_name(&self.name) {
            problems.push(violation.to_string());
        }
        if self.target.is_none() {
            problems.push(
                "no target: call `.target(..)` with `Target::Research`, `Selection`, \
                 `Analysis` or `Operator`"
                    .to_owned(),
            );
        }
        let mut seen: Vec<(Option<&str>, &str)> = Vec::with_capacity(self.tools.len());
        for tool in &self.tools {
            let key = (tool.provider(), tool.name());
            if seen.contains(&key) {
                problems.push(format!(
                    "tool `{}` is bound twice; bind each tool once",
                    tool.qualified_name()
                ));
            }
            seen.push(key);
        }
        match self.target {
            Some(target) if problems.is_empty() => {
                Ok(AgentSpec::new(self.name.into(), target, self.tools))
            }
            _ => Err(AgentSpecError {
                agent: self.name,
                problems,
            }),
        }
    }
}

/// An agent spec with the wrong shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSpecError {
    agent: String,
    problems: Vec<String>,
}

impl AgentSpecError {
    /// Every problem, as text.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl fmt::Display for AgentSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid agent spec `{}`: {}",
            self.agent,
            self.problems.join("; ")
        )
    }
}

impl std::error::Error for AgentSpecError {}
