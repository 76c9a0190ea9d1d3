//! The capability manifest of a tool and the traits that attach it to a type.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A tool: a type that carries a frozen [`CapabilityManifest`].
///
/// Implement it with `#[derive(Capability)]`, which also registers the tool and, for a read-only
/// tool, implements [`ReadOnlyTool`]. A hand-written implementation is possible (for a tool whose
/// manifest is built some other way) but it is not registered, and its `READ_ONLY` must agree
/// with its manifest: the registry checks.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no capability manifest, so no agent can bind it",
    label = "`{Self}` is not a tool",
    note = "add `#[derive(Capability)]` to `{Self}`, with `#[capability(read_only)]` if it never mutates anything"
)]
pub trait Capability {
    /// Whether the tool is read-only, known at compile time.
    ///
    /// The advisor gate of `#[advisor_agent]` checks this constant through a trait bound, so an
    /// advisor binding a tool whose `READ_ONLY` is `false` does not compile. The default is
    /// `false`: a tool that says nothing is mutating.
    const READ_ONLY: bool = false;

    /// The tool's manifest, built once and shared by every call (and, for a generic tool, by
    /// every instantiation).
    fn manifest() -> &'static CapabilityManifest;
}

/// A tool declared read-only: `#[capability(read_only)]`.
///
/// `#[derive(Capability)]` implements it for read-only tools only. Use it as a bound where code
/// must accept nothing that can mutate:
///
/// ```
/// use capability::{Capability, ReadOnlyTool};
///
/// fn give_to_advisor<T: ReadOnlyTool>() -> &'static str {
///     T::manifest().name()
/// }
///
/// /// List pods.
/// #[derive(Capability)]
/// #[capability(read_only)]
/// struct ListPods;
///
/// assert_eq!(give_to_advisor::<ListPods>(), "list_pods");
/// ```
///
/// A mutating tool does not satisfy the bound:
///
/// ```compile_fail
/// use capability::{Capability, ReadOnlyTool};
///
/// fn give_to_advisor<T: ReadOnlyTool>() {}
///
/// #[derive(Capability)]
/// #[capability(destructive)]
/// struct RestartPod;
///
/// give_to_advisor::<RestartPod>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a read-only tool",
    label = "`{Self}` may mutate state",
    note = "only tools declared `#[capability(read_only)]` are read-only tools"
)]
pub trait ReadOnlyTool: Capability {}

/// The frozen description of what a tool does and needs.
///
/// The four hints mean what the MCP tool annotations `readOnlyHint`, `destructiveHint`,
/// `idempotentHint` and `openWorldHint` mean, with the same defaults. A manifest cannot be changed
/// once built: it has getters only. It serializes with serde and deserializes only when every
/// manifest rule holds, so a round trip is exact and a tampered file is refused.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "ManifestData", into = "ManifestData")]
pub struct CapabilityManifest {
    pub(crate) data: ManifestData,
}

/// The serialized form of a manifest; also its storage.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ManifestData {
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) provider: Option<String>,
    pub(crate) read_only: bool,
    pub(crate) destructive: bool,
    pub(crate) idempotent: bool,
    pub(crate) open_world: bool,
    pub(crate) required_scopes: Vec<String>,
    pub(crate) input_schema_id: String,
    pub(crate) output_schema_id: Option<String>,
    pub(crate) schema_version: String,
    pub(crate) descriptor_hash: String,
}

impl CapabilityManifest {
    /// The tool name (MCP: 1 to 128 characters of `A-Z a-z 0-9 _ - .`).
    pub fn name(&self) -> &str {
        &self.data.name
    }

    /// A human-readable title, if one was given.
    pub fn title(&self) -> Option<&str> {
        self.data.title.as_deref()
    }

    /// The description: the `description` key, else the type's doc comment.
    pub fn description(&self) -> Option<&str> {
        self.data.description.as_deref()
    }

    /// The provider (the system the tool talks to, such as `k8s`), if one was given.
    pub fn provider(&self) -> Option<&str> {
        self.data.provider.as_deref()
    }

    /// The tool does not modify its environment.
    pub fn read_only(&self) -> bool {
        self.data.read_only
    }

    /// A write may destroy rather than add. Always `false` for a read-only tool.
    pub fn destructive(&self) -> bool {
        self.data.destructive
    }

    /// Calling it again with the same arguments has no further effect.
    pub fn idempotent(&self) -> bool {
        self.data.idempotent
    }

    /// The tool reaches an open world of external entities.
    pub fn open_world(&self) -> bool {
        self.data.open_world
    }

    /// The scopes a caller must hold, sorted and de-duplicated.
    pub fn required_scopes(&self) -> &[String] {
        &self.data.required_scopes
    }

    /// Identifies the tool's input type: its module path and name, such as `fleet::k8s::RestartPod`.
    pub fn input_schema_id(&self) -> &str {
        &self.data.input_schema_id
    }

    /// Identifies the output type given by `output = Type`, as written there; `None` without it.
    pub fn output_schema_id(&self) -> Option<&str> {
        self.data.output_schema_id.as_deref()
    }

    /// The `version` key when given, else the first 12 hex digits of the descriptor hash.
    pub fn schema_version(&self) -> &str {
        &self.data.schema_version
    }

    /// SHA-256 of the canonical descriptor, as 64 lowercase hex digits.
    ///
    /// The descriptor covers the name, title, description, provider, the four hints, the scopes,
    /// the generic parameters, the field names and types as written, the output type and the
    /// version. Changing any of them changes the hash; white space, comments, the order of the
    /// scopes or of the keys in the attribute do not.
    pub fn descriptor_hash(&self) -> &str {
        &self.data.descriptor_hash
    }
}

impl fmt::Display for CapabilityManifest {
    /// One line: the name, the hints that are set and the scopes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(provider) = self.provider() {
            write!(f, "{provider}/")?;
        }
        f.write_str(self.name())?;
        f.write_str(if self.read_only() {
            " [read-only"
        } else if self.destructive() {
            " [destructive"
        } else {
            " [writes"
        })?;
        if self.idempotent() {
            f.write_str(", idempotent")?;
        }
        f.write_str(if self.open_world() {
            ", open world]"
        } else {
            ", closed world]"
        })?;
        if !self.required_scopes().is_empty() {
            write!(f, " scopes: {}", self.required_scopes().join(" "))?;
        }
        Ok(())
    }
}

/// Why a serialized manifest was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidManifest {
    name: String,
    problems: Vec<String>,
}

impl fmt::Display for InvalidManifest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid capability manifest `{}`: ", self.name)?;
        f.write_str(&self.problems.join("; "))
    }
}

impl std::error::Error for InvalidManifest {}

impl TryFrom<ManifestData> for CapabilityManifest {
    type Error = InvalidManifest;

    fn try_from(data: ManifestData) -> Result<Self, InvalidManifest> {
        let draft = capability_rules::Draft {
            name: &data.name,
            provider: data.provider.as_deref(),
            version: None,
            read_only: Some(data.read_only),
            destructive: Some(data.destructive),
            idempotent: Some(data.idempotent),
            open_world: Some(data.open_world),
            scopes: data.required_scopes.iter().map(String::as_str).collect(),
        };
        let mut problems: Vec<String> = match capability_rules::validate(&draft) {
            Ok(valid) if valid.scopes != data.required_scopes => {
                vec!["`required_scopes` must be sorted and free of repeats".to_owned()]
            }
            Ok(_) => Vec::new(),
            Err(found) => found.iter().map(|p| p.violation.to_string()).collect(),
        };
        if !is_hex_digest(&data.descriptor_hash) {
            problems.push("`descriptor_hash` must be 64 lowercase hex digits".to_owned());
        }
        if data.schema_version.is_empty() {
            problems.push("`schema_version` cannot be empty".to_owned());
        }
        if data.input_schema_id.is_empty() {
            problems.push("`input_schema_id` cannot be empty".to_owned());
        }
        if problems.is_empty() {
            Ok(CapabilityManifest { data })
        } else {
            Err(InvalidManifest {
                name: data.name,
                problems,
            })
        }
    }
}

impl From<CapabilityManifest> for ManifestData {
    fn from(manifest: CapabilityManifest) -> Self {
        manifest.data
    }
}

fn is_hex_digest(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
