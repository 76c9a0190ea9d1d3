//! Agents: a name, a target and the tools they bind.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::CapabilityManifest;

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
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AgentSpec {
    name: String,
    target: Target,
    tools: Vec<CapabilityManifest>,
}

impl AgentSpec {
    pub(crate) fn new(name: String, target: Target, tools: Vec<CapabilityManifest>) -> Self {
        AgentSpec {
            name,
            target,
            tools,
        }
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
}
