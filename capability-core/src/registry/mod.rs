//! The registry of derived tools and agents, collected through `inventory`.

use std::borrow::Cow;

use crate::__private::{AgentEntry, ToolEntry};
use crate::agent::{AgentSpec, assert_advisor_only};
use crate::manifest::CapabilityManifest;

mod error;

pub use error::{PersistError, RegisterError, RegistryError, RegistryProblem};

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
/// # Ok::<(), capability::registry::RegistryError>(())
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
            if let Err(violation) = assert_advisor_only(&agent.item) {
                problems.push(RegistryProblem::AdvisorBindsMutatingTool {
                    origin: agent.origin.to_string(),
                    violation,
                });
            }
        }
        if problems.is_empty() {
            Ok(Registry { tools, agents })
        } else {
            Err(RegistryError { problems })
        }
    }

    /// Adds a tool built at run time (a plugin, an MCP server's tool through
    /// `capability::mcp`, anything [`CapabilityManifest::builder`] made). The caller's code is
    /// trusted: the manifest is stored as given, and it is what
    /// [`persist_spec`](Self::persist_spec) gives agents that bind a tool of this name. A second
    /// tool with a name already taken is refused and nothing is stored.
    ///
    /// ```
    /// use capability::{CapabilityManifest, Registry};
    /// use capability::registry::RegisterError;
    ///
    /// let mut registry = Registry::default();
    /// let list = CapabilityManifest::builder("list_pods").provider("k8s").read_only(true).build()?;
    /// registry.register_tool(list.clone())?;
    /// assert_eq!(registry.tool("list_pods"), Some(&list));
    /// let again = registry.register_tool(list);
    /// assert!(matches!(again, Err(RegisterError::DuplicateTool { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn register_tool(&mut self, manifest: CapabilityManifest) -> Result<(), RegisterError> {
        match self
            .tools
            .binary_search_by(|r| r.item.name().cmp(manifest.name()))
        {
            Ok(i) => Err(RegisterError::DuplicateTool {
                name: manifest.name().to_owned(),
                origin: self.tools[i].origin.to_string(),
            }),
            Err(i) => {
                self.tools.insert(
                    i,
                    Registered {
                        item: Cow::Owned(manifest),
                        origin: Cow::Borrowed(RUNTIME_ORIGIN),
                    },
                );
                Ok(())
            }
        }
    }

    /// Stores an agent assembled at run time, after the registration gate.
    ///
    /// The spec names its tools; their manifests come from the registry, never from the spec.
    /// Each tool is looked up by its qualified name (`provider/name`), and its descriptor hash
    /// must be the registered tool's: a tool the registry does not know, or knows with another
    /// descriptor, is refused. The advisor rule then runs on the registry's manifests, and those
    /// are what is stored, so a spec whose manifests were edited (in a file, or built with other
    /// hints under a registered tool's name) gains nothing. An advisor spec that binds a tool
    /// whose effective `read_only` is false is refused, and so is a second agent with a name
    /// already taken. Nothing is stored on refusal.
    ///
    /// ```
    /// use capability::{AgentSpec, CapabilityManifest, Registry, Target};
    /// use capability::registry::PersistError;
    ///
    /// let mut registry = Registry::default();
    /// let write = CapabilityManifest::builder("restart_pod").provider("k8s").build()?;
    /// registry.register_tool(write.clone())?;
    /// let spec = AgentSpec::builder("analyst").target(Target::Analysis).tool(write).build()?;
    /// let refused = registry.persist_spec(spec);
    /// assert!(matches!(refused, Err(PersistError::Advisor(_))));
    /// assert!(registry.agent("analyst").is_none());
    ///
    /// // The same name, claimed read-only: the registry knows better.
    /// let forged = CapabilityManifest::builder("restart_pod").provider("k8s").read_only(true).build()?;
    /// let spec = AgentSpec::builder("analyst").target(Target::Analysis).tool(forged).build()?;
    /// let refused = registry.persist_spec(spec);
    /// assert!(matches!(refused, Err(PersistError::DescriptorMismatch { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn persist_spec(&mut self, spec: AgentSpec) -> Result<(), PersistError> {
        let spec = self.resolve(spec)?;
        assert_advisor_only(&spec).map_err(PersistError::Advisor)?;
        match self
            .agents
            .binary_search_by(|r| r.item.name().cmp(spec.name()))
        {
            Ok(i) => Err(PersistError::DuplicateAgent {
                name: spec.name().to_owned(),
                origin: self.agents[i].origin.to_string(),
            }),
            Err(i) => {
                self.agents.insert(
                    i,
                    Registered {
                        item: Cow::Owned(spec),
                        origin: Cow::Borrowed(RUNTIME_ORIGIN),
                    },
                );
                Ok(())
            }
        }
    }

    /// The spec with each tool's manifest replaced by the registry's.
    fn resolve(&self, spec: AgentSpec) -> Result<AgentSpec, PersistError> {
        let mut tools = Vec::with_capacity(spec.tools().len());
        for given in spec.tools() {
            let known = self
                .tool(given.name())
                .filter(|known| known.provider() == given.provider());
            match known {
                None => {
                    return Err(PersistError::UnknownTool {
                        agent: spec.name().to_owned(),
                        tool: given.qualified_name(),
                    });
                }
                Some(known) if known.descriptor_hash() != given.descriptor_hash() => {
                    return Err(PersistError::DescriptorMismatch {
                        agent: spec.name().to_owned(),
                        tool: given.qualified_name(),
                        registered: known.descriptor_hash().to_owned(),
                        given: given.descriptor_hash().to_owned(),
                    });
                }
                Some(known) => tools.push(known.clone()),
            }
        }
        Ok(spec.with_tools(tools))
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

/// The origin recorded for agents stored with [`Registry::persist_spec`].
pub const RUNTIME_ORIGIN: &str = "<runtime>";
