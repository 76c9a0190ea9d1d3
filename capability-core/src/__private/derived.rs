//! What `#[derive(Capability)]`, `#[advisor_agent]` and `#[agent]` expand to call.
//!
//! Not a public API: reached only through `capability::__private`, whose contents may change in
//! any release. The macros have already validated everything they put in these types.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use crate::agent::{AgentSpec, Target};
use crate::manifest::hints::{HintSource, Hints};
use crate::manifest::{CapabilityManifest, ManifestData};

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
    /// `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint` as declared.
    pub hints: [Option<bool>; 4],
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
    /// Where the type is defined.
    pub module_path: &'static str,
    /// Sensitive input fields, sorted.
    pub sensitive: &'static [&'static str],
}

/// A derived tool: its data and, once asked for, its manifest.
#[derive(Debug)]
pub struct StaticTool {
    data: ToolData,
    manifest: OnceLock<CapabilityManifest>,
}

impl StaticTool {
    /// Wraps the data; usable in a `static`.
    pub const fn new(data: ToolData) -> Self {
        StaticTool {
            data,
            manifest: OnceLock::new(),
        }
    }

    /// The manifest, built on first use.
    pub fn manifest(&'static self) -> &'static CapabilityManifest {
        self.manifest.get_or_init(|| {
            let d = &self.data;
            let hints = Hints::resolve(d.hints.map(|v| v.map(|v| (v, HintSource::Declared))));
            CapabilityManifest {
                data: Arc::new(ManifestData {
                    name: Cow::Borrowed(d.name),
                    title: d.title.map(Cow::Borrowed),
                    description: d.description.map(Cow::Borrowed),
                    provider: d.provider.map(Cow::Borrowed),
                    read_only: hints.read_only,
                    destructive: hints.destructive,
                    idempotent: hints.idempotent,
                    open_world: hints.open_world,
                    required_scopes: d.scopes.iter().map(|s| (*s).to_owned()).collect(),
                    input_schema_id: Cow::Borrowed(d.input_schema_id),
                    output_schema_id: d.output_schema_id.map(Cow::Borrowed),
                    schema_version: Cow::Borrowed(d.schema_version),
                    descriptor_hash: Cow::Borrowed(d.descriptor_hash),
                    sensitive_fields: d.sensitive.iter().map(|s| (*s).to_owned()).collect(),
                }),
            }
        })
    }

    /// Where the tool's type is defined.
    pub fn module_path(&self) -> &'static str {
        self.data.module_path
    }
}

/// A derived agent: its data and, once asked for, its spec.
#[derive(Debug)]
pub struct StaticAgent {
    name: &'static str,
    target: Target,
    module_path: &'static str,
    tools: &'static [fn() -> &'static CapabilityManifest],
    spec: OnceLock<AgentSpec>,
}

impl StaticAgent {
    /// Wraps the data; usable in a `static`.
    pub const fn new(
        name: &'static str,
        target: Target,
        module_path: &'static str,
        tools: &'static [fn() -> &'static CapabilityManifest],
    ) -> Self {
        StaticAgent {
            name,
            target,
            module_path,
            tools,
            spec: OnceLock::new(),
        }
    }

    /// The spec, built on first use.
    pub fn spec(&'static self) -> &'static AgentSpec {
        self.spec.get_or_init(|| {
            let tools = self.tools.iter().map(|tool| tool().clone()).collect();
            AgentSpec::new(self.name.to_owned(), self.target, tools)
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
