//! The registry of derived tools and agents, collected through `inventory`.

use std::borrow::Cow;
use std::fmt;

use crate::derived::{AgentEntry, ToolEntry};
use crate::{AgentSpec, CapabilityManifest};

/// Every tool and agent a program knows, sorted by name.
///
/// Build it with [`Registry::from_inventory`] at startup: it collects every
/// `#[derive(Capability)]` tool and every `#[advisor_agent]` / `#[agent]` agent linked into the
/// program, and refuses an inconsistent set.
///
/// ```rust,standalone_crate
/// use capability::{Capability, Registry, advisor_agent};
///
/// /// Count the pods of a namespace.
/// #[derive(Capability)]
/// #[capability(read_only, provider = "k8s", scopes = ["k8s:read"])]
/// struct CountPods { namespace: String }
///
/// #[advisor_agent(tools(CountPods))]
/// struct Census;
///
/// let registry = Registry::from_inventory()?;
/// let tool = registry.tool("count_pods").expect("registered");
/// assert!(tool.read_only());
/// assert_eq!(registry.agent("census").map(|a| a.tools().len()), Some(1));
/// # Ok::<(), capability::RegistryError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Registry {
    tools: Vec<Registered<CapabilityManifest>>,
    agents: Vec<Registered<AgentSpec>>,
}

#[derive(Clone, Debug)]
struct Registered<T: Clone + 'static> {
    item: Cow<'static, T>,
    origin: Cow<'static, str>,
}

impl Registry {
    /// Collects every registered tool and agent, and checks that the set is consistent.
    ///
    /// Errors, all reported together: two tools with one name, two agents with one name, an
    /// advisor agent whose spec binds a tool that is not read-only (the compile-time gate makes
    /// that impossible for derived tools; this catches hand-written `Capability` impls).
    pub fn from_inventory() -> Result<Registry, RegistryError> {
        let tools = inventory::iter::<ToolEntry>
            .into_iter()
            .map(|entry| Registered {
                item: Cow::Borrowed(entry.0.manifest()),
                origin: Cow::Borrowed(entry.0.module_path()),
            })
            .collect();
        let agents = inventory::iter::<AgentEntry>
            .into_iter()
            .map(|entry| Registered {
                item: Cow::Borrowed(entry.0.spec()),
                origin: Cow::Borrowed(entry.0.module_path()),
            })
            .collect();
        Registry::check(tools, agents)
    }

    fn check(
        mut tools: Vec<Registered<CapabilityManifest>>,
        mut agents: Vec<Registered<AgentSpec>>,
    ) -> Result<Registry, RegistryError> {
        // inventory's order is unspecified: sort (name, then origin) so that listings, errors
        // and anything hashed from them are the same in every build.
        tools.sort_by(|a, b| (a.item.name(), &a.origin).cmp(&(b.item.name(), &b.origin)));
        agents.sort_by(|a, b| (a.item.name(), &a.origin).cmp(&(b.item.name(), &b.origin)));

        let mut problems = Vec::new();
        for (name, origins) in same_names(&tools, CapabilityManifest::name) {
            problems.push(RegistryProblem::DuplicateTool { name, origins });
        }
        for (name, origins) in same_names(&agents, AgentSpec::name) {
            problems.push(RegistryProblem::DuplicateAgent { name, origins });
        }
        for agent in &agents {
            let spec = &agent.item;
            if !spec.is_advisor() {
                continue;
            }
            let mutating: Vec<String> =
                spec.mutating_tools().map(|t| t.name().to_owned()).collect();
            if !mutating.is_empty() {
                problems.push(RegistryProblem::AdvisorBindsMutatingTool {
                    agent: spec.name().to_owned(),
                    origin: agent.origin.to_string(),
                    tools: mutating,
                });
            }
        }
        if problems.is_empty() {
            Ok(Registry { tools, agents })
        } else {
            Err(RegistryError { problems })
        }
    }

    /// The tools' manifests, sorted by name.
    pub fn tools(&self) -> impl ExactSizeIterator<Item = &CapabilityManifest> + '_ {
        self.tools.iter().map(|r| r.item.as_ref())
    }

    /// The agents' specs, sorted by name.
    pub fn agents(&self) -> impl ExactSizeIterator<Item = &AgentSpec> + '_ {
        self.agents.iter().map(|r| r.item.as_ref())
    }

    /// The tool with this name.
    pub fn tool(&self, name: &str) -> Option<&CapabilityManifest> {
        find(&self.tools, name, |m| m.name()).map(|r| r.item.as_ref())
    }

    /// The agent with this name.
    pub fn agent(&self, name: &str) -> Option<&AgentSpec> {
        find(&self.agents, name, |a| a.name()).map(|r| r.item.as_ref())
    }

    /// The module that defines the tool with this name.
    pub fn tool_origin(&self, name: &str) -> Option<&str> {
        find(&self.tools, name, |m| m.name()).map(|r| r.origin.as_ref())
    }

    /// The module that defines the agent with this name.
    pub fn agent_origin(&self, name: &str) -> Option<&str> {
        find(&self.agents, name, |a| a.name()).map(|r| r.origin.as_ref())
    }
}

/// Each name held by more than one entry of a sorted list, with the origins holding it.
fn same_names<'r, T: Clone>(
    sorted: &'r [Registered<T>],
    name: fn(&T) -> &str,
) -> impl Iterator<Item = (String, Vec<String>)> + 'r {
    sorted
        .chunk_by(move |a, b| name(&a.item) == name(&b.item))
        .filter(|group| group.len() > 1)
        .map(move |group| {
            let origins = group.iter().map(|r| r.origin.to_string()).collect();
            (name(&group[0].item).to_owned(), origins)
        })
}

fn find<'r, T: Clone>(
    sorted: &'r [Registered<T>],
    name: &str,
    key: impl Fn(&T) -> &str,
) -> Option<&'r Registered<T>> {
    sorted
        .binary_search_by(|r| key(&r.item).cmp(name))
        .ok()
        .map(|i| &sorted[i])
}

/// The registry was refused: every problem found, not only the first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryError {
    problems: Vec<RegistryProblem>,
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
        /// The agent.
        agent: String,
        /// The module that defines it.
        origin: String,
        /// The offending tools, in declaration order.
        tools: Vec<String>,
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
            RegistryProblem::AdvisorBindsMutatingTool {
                agent,
                origin,
                tools,
            } => write!(
                f,
                "advisor agent `{agent}` (in `{origin}`) binds tools that are not read-only: {}",
                quoted(tools)
            ),
        }
    }
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the tool registry was refused:")?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RegistryError {}
