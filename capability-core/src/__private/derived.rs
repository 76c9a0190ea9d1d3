//! What `#[derive(Capability)]`, `#[advisor_agent]` and `#[agent]` expand to call.
//!
//! Not a public API: reached only through `capability::__private`, whose contents may change in
//! any release. The macros have already validated everything they put in these types.

use std::borrow::Cow;
use std::sync::OnceLock;

use crate::agent::{AdvisorTool, AgentSpec, OperatorTool, Target};
use crate::manifest::CapabilityManifest;
use crate::manifest::data::{Described, ManifestData, Names};
use crate::manifest::hints::{HintSet, HintSource};

/// The compile-time data of one derived tool, validated by the derive.
#[derive(Debug)]
pub struct ToolData {
    /// The tool name.
    pub name: &'static str,
    /// The title.
    pub title: Option<&'static str>,
    /// The description.
    pub description: Option<&'static str>,
    /// The provider.
    pub provider: Option<&'static str>,
    /// The hints as declared.
    pub hints: HintSet<Option<bool>>,
    /// Scopes, already sorted and de-duplicated.
    pub scopes: &'static [&'static str],
    /// The module path and name of the type.
    pub input_schema_id: &'static str,
    /// The output type as written.
    pub output_schema_id: Option<&'static str>,
    /// The schema version.
    pub schema_version: &'static str,
    /// The descriptor hash.
    pub descriptor_hash: &'static str,
    /// Sensitive input fields, sorted.
    pub sensitive: &'static [&'static str],
}

impl ToolData {
    /// The manifest's data, assembled (and its hints resolved) at compile time: the derive puts
    /// this in a `static`, so the manifest borrows everything from the binary.
    pub const fn assemble(self) -> ManifestData {
        const fn text(value: Option<&'static str>) -> Option<Cow<'static, str>> {
            match value {
                Some(value) => Some(Cow::Borrowed(value)),
                None => None,
            }
        }
        let described = Described {
            name: Cow::Borrowed(self.name),
            title: text(self.title),
            description: text(self.description),
            provider: text(self.provider),
            required_scopes: Names::borrowed(self.scopes),
            input_schema_id: Cow::Borrowed(self.input_schema_id),
            output_schema_id: text(self.output_schema_id),
            schema_version: Cow::Borrowed(self.schema_version),
            descriptor_hash: Cow::Borrowed(self.descriptor_hash),
            sensitive_fields: Names::borrowed(self.sensitive),
        };
        ManifestData::assemble(described, self.hints.stated_by(HintSource::Declared))
    }
}

/// A derived tool: its manifest, pointing at the tool's static data, and where it is defined.
#[derive(Debug)]
pub struct StaticTool {
    manifest: CapabilityManifest,
    module_path: &'static str,
}

impl StaticTool {
    /// Wraps the tool's static data (from [`ToolData::assemble`]); usable in a `static`.
    pub const fn new(data: &'static ManifestData, module_path: &'static str) -> Self {
        StaticTool {
            manifest: CapabilityManifest::from_static(data),
            module_path,
        }
    }

    /// The manifest. Nothing is built: it points at data assembled at compile time.
    pub fn manifest(&'static self) -> &'static CapabilityManifest {
        &self.manifest
    }

    /// Where the tool's type is defined.
    pub fn module_path(&self) -> &'static str {
        self.module_path
    }
}

/// A derived agent: its data and, once asked for, its spec.
#[derive(Debug)]
pub struct StaticAgent {
    name: &'static str,
    target: Target,
    module_path: &'static str,
    tools: Tools,
    spec: OnceLock<AgentSpec>,
}

/// An agent's tool list: an advisor's is made of tools proven read-only.
#[derive(Debug)]
enum Tools {
    Advisor(&'static [AdvisorTool]),
    Operator(&'static [OperatorTool]),
}

impl StaticAgent {
    /// An advisor (or, with `Target::Operator`, an operator that binds read-only tools only):
    /// its tool list is made of [`AdvisorTool`]s, which only `bind_advisor_tool` creates.
    /// Usable in a `static`.
    pub const fn advisor(
        name: &'static str,
        target: Target,
        module_path: &'static str,
        tools: &'static [AdvisorTool],
    ) -> Self {
        StaticAgent {
            name,
            target,
            module_path,
            tools: Tools::Advisor(tools),
            spec: OnceLock::new(),
        }
    }

    /// An operator, which may bind any tool. Usable in a `static`.
    pub const fn operator(
        name: &'static str,
        module_path: &'static str,
        tools: &'static [OperatorTool],
    ) -> Self {
        StaticAgent {
            name,
            target: Target::Operator,
            module_path,
            tools: Tools::Operator(tools),
            spec: OnceLock::new(),
        }
    }

    /// The spec, built on first use, from the manifests the tools report at run time. For an
    /// advisor it holds exactly what the tools report, even a manifest that contradicts the
    /// tool's `READ_ONLY` (a hand-written `impl Capability`): the registry and
    /// `AdvisorSession::new` check the advisor rule on it and refuse.
    pub fn spec(&'static self) -> &'static AgentSpec {
        self.spec.get_or_init(|| {
            let tools = match self.tools {
                Tools::Advisor(tools) => tools.iter().map(|t| t.manifest().clone()).collect(),
                Tools::Operator(tools) => tools.iter().map(|t| t.manifest().clone()).collect(),
            };
            AgentSpec::new(Cow::Borrowed(self.name), self.target, tools)
        })
    }

    /// Where the agent's type is defined.
    pub fn module_path(&self) -> &'static str {
        self.module_path
    }
}

/// A derived tool in the registry.
#[derive(Debug)]
pub struct ToolEntry(pub &'static StaticTool);

/// A derived agent in the registry.
#[derive(Debug)]
pub struct AgentEntry(pub &'static StaticAgent);

inventory::collect!(ToolEntry);
inventory::collect!(AgentEntry);
