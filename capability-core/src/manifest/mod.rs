//! The capability manifest of a tool and the traits that attach it to a type.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

mod builder;
mod error;
pub(crate) mod hints;

pub use builder::ManifestBuilder;
pub use error::{FieldProblem, ManifestError};
pub use hints::{Hint, HintKind, HintSource};

use hints::Hints;

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
/// ```compile_fail,E0277
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
/// `idempotentHint` and `openWorldHint` mean, with the same defaults; each records where it came
/// from ([`hint`](Self::hint)), and the getters return the value decisions use. A manifest cannot
/// be changed once built: it has getters only. It comes from `#[derive(Capability)]`, from
/// [`CapabilityManifest::builder`], or from an MCP tool (`capability::mcp::McpManifest::from_mcp_tool`).
/// It serializes with serde and deserializes only when every manifest rule holds, so a round trip
/// is exact and a tampered file is refused.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "ManifestData", into = "ManifestData")]
pub struct CapabilityManifest {
    // Shared: an agent spec holds its tools' manifests, and cloning one is a reference count.
    pub(crate) data: Arc<ManifestData>,
}

/// Text of a manifest: borrowed from the binary for a derived tool, owned otherwise.
pub(crate) type Text = Cow<'static, str>;

/// The serialized form of a manifest; also its storage.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ManifestData {
    pub(crate) name: Text,
    pub(crate) title: Option<Text>,
    pub(crate) description: Option<Text>,
    pub(crate) provider: Option<Text>,
    pub(crate) read_only: Hint,
    pub(crate) destructive: Hint,
    pub(crate) idempotent: Hint,
    pub(crate) open_world: Hint,
    pub(crate) required_scopes: Vec<String>,
    pub(crate) input_schema_id: Text,
    pub(crate) output_schema_id: Option<Text>,
    pub(crate) schema_version: Text,
    pub(crate) descriptor_hash: Text,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) sensitive_fields: Vec<String>,
}

impl ManifestData {
    pub(crate) fn hints(&self) -> Hints {
        Hints {
            read_only: self.read_only,
            destructive: self.destructive,
            idempotent: self.idempotent,
            open_world: self.open_world,
        }
    }

    pub(crate) fn set_hints(&mut self, hints: Hints) {
        self.read_only = hints.read_only;
        self.destructive = hints.destructive;
        self.idempotent = hints.idempotent;
        self.open_world = hints.open_world;
    }
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

    /// The provider (the system the tool talks to, such as `k8s`; for an MCP tool, its server's
    /// name), if any.
    pub fn provider(&self) -> Option<&str> {
        self.data.provider.as_deref()
    }

    /// The tool does not modify its environment (effective value).
    pub fn read_only(&self) -> bool {
        self.data.read_only.effective()
    }

    /// A write may destroy rather than add (effective value). Always `false` for a read-only
    /// tool.
    pub fn destructive(&self) -> bool {
        self.data.destructive.effective()
    }

    /// Calling it again with the same arguments has no further effect (effective value).
    pub fn idempotent(&self) -> bool {
        self.data.idempotent.effective()
    }

    /// The tool reaches an open world of external entities (effective value).
    pub fn open_world(&self) -> bool {
        self.data.open_world.effective()
    }

    /// One hint with its provenance: the effective value, where it came from, what was stated.
    pub fn hint(&self, kind: HintKind) -> Hint {
        self.data.hints().get(kind)
    }

    /// The scopes a caller must hold, sorted and de-duplicated.
    pub fn required_scopes(&self) -> &[String] {
        &self.data.required_scopes
    }

    /// Input fields whose values the audit trail stores only as their digest (the
    /// `sensitive = [..]` key), sorted.
    pub fn sensitive_fields(&self) -> &[String] {
        &self.data.sensitive_fields
    }

    /// Identifies the tool's input type: for a derived tool its module path and name, such as
    /// `fleet::k8s::RestartPod`; for an MCP tool `mcp:<server>/<tool>#input`.
    pub fn input_schema_id(&self) -> &str {
        &self.data.input_schema_id
    }

    /// Identifies the output type (`output = Type`, as written there; an MCP tool's
    /// `outputSchema`); `None` without one.
    pub fn output_schema_id(&self) -> Option<&str> {
        self.data.output_schema_id.as_deref()
    }

    /// The `version` key when given, else the first 12 hex digits of the descriptor hash.
    pub fn schema_version(&self) -> &str {
        &self.data.schema_version
    }

    /// SHA-256 of the canonical descriptor, as 64 lowercase hex digits.
    ///
    /// For a derived tool the descriptor covers the name, title, description, provider, the four
    /// hints, the scopes, the generic parameters, the field names and types as written, the
    /// output type and the version. Changing any of them changes the hash; white space,
    /// comments, the order of the scopes or of the keys in the attribute do not. For an MCP tool
    /// it covers the tool's name, title, description, input and output schema and annotations,
    /// as RFC 8785 canonical JSON.
    pub fn descriptor_hash(&self) -> &str {
        &self.data.descriptor_hash
    }

    /// `provider/name`, or the name alone for a tool without a provider: the key that policy
    /// patterns and operator assertions match.
    pub fn qualified_name(&self) -> String {
        match self.provider() {
            Some(provider) => format!("{provider}/{}", self.name()),
            None => self.name().to_owned(),
        }
    }

    /// The same manifest with some hints asserted by an operator. An assertion wins over what
    /// was declared or claimed; the hints not asserted keep their source.
    pub fn with_assertion(&self, assertion: &Assertion) -> CapabilityManifest {
        let mut stated = self.data.hints().stated();
        assertion.apply(&mut stated);
        let mut data = ManifestData::clone(&self.data);
        data.set_hints(Hints::resolve(stated));
        CapabilityManifest {
            data: Arc::new(data),
        }
    }
}

/// An operator's statement about one tool's hints, from a policy file. Each `Some` wins over
/// whatever the tool's code or server said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assertion {
    /// `readOnlyHint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// `destructiveHint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// `idempotentHint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// `openWorldHint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl Assertion {
    /// Replaces what was stated with what the operator asserts.
    pub(crate) fn apply(&self, stated: &mut [hints::Stated; 4]) {
        let values = [
            self.read_only,
            self.destructive,
            self.idempotent,
            self.open_world,
        ];
        for (slot, value) in stated.iter_mut().zip(values) {
            if let Some(value) = value {
                *slot = Some((value, HintSource::Asserted));
            }
        }
    }
}

impl fmt::Display for CapabilityManifest {
    /// One line: the name, the effective hints and the scopes.
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

impl TryFrom<ManifestData> for CapabilityManifest {
    type Error = ManifestError;

    fn try_from(data: ManifestData) -> Result<Self, ManifestError> {
        let mut error = ManifestError::new(data.name.as_ref());
        let draft = capability_rules::Draft {
            name: &data.name,
            provider: data.provider.as_deref(),
            version: None,
            read_only: Some(data.read_only.effective()),
            destructive: None,
            idempotent: None,
            open_world: None,
            scopes: data.required_scopes.iter().map(String::as_str).collect(),
        };
        match capability_rules::validate(&draft) {
            Ok(valid) if valid.scopes != data.required_scopes => {
                error.push("required_scopes", "must be sorted and free of repeats");
            }
            Ok(_) => {}
            Err(problems) => error.push_rules(problems),
        }
        let hints = data.hints();
        if Hints::resolve(hints.stated()) != hints {
            error.push(
                "read_only",
                "the hints' effective values do not follow from their sources; \
                 a manifest's hints cannot be edited by hand",
            );
        }
        if !is_hex_digest(&data.descriptor_hash) {
            error.push("descriptor_hash", "must be 64 lowercase hex digits");
        }
        if data.schema_version.is_empty() {
            error.push("schema_version", "cannot be empty");
        }
        if data.input_schema_id.is_empty() {
            error.push("input_schema_id", "cannot be empty");
        }
        error.into_result()?;
        Ok(CapabilityManifest {
            data: Arc::new(data),
        })
    }
}

impl From<CapabilityManifest> for ManifestData {
    fn from(manifest: CapabilityManifest) -> Self {
        Arc::unwrap_or_clone(manifest.data)
    }
}

fn is_hex_digest(text: &str) -> bool {
    capability_rules::hex::is_lower_hex(text, 64)
}
