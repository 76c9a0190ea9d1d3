//! The capability manifest of a tool and the traits that attach it to a type.
//!
#![doc = include_str!("../../../docs/manifests.md")]

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use capability_rules::Flags;
use serde::{Deserialize, Serialize};

mod builder;
pub(crate) mod data;
mod error;
mod form;
pub(crate) mod hints;
mod meta;

pub use builder::ManifestBuilder;
pub use error::{FieldProblem, ManifestError};
pub use hints::{Hint, HintKind, HintSet, HintSource};
pub use meta::{MANIFEST_META_KEY, manifest_meta};

use data::ManifestData;
use hints::Stated;

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
///
/// Only `#[derive(Capability)]` implements it: its constant is a [`ReadOnlyProof`], which only
/// the library creates, and only for a type whose `READ_ONLY` is `true`. A hand-written
/// `impl ReadOnlyTool for RestartPod {}` does not compile (the proof is missing), and a proof
/// made for a mutating tool fails const evaluation wherever the library relies on it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a read-only tool",
    label = "`{Self}` may mutate state",
    note = "only tools declared `#[capability(read_only)]` are read-only tools"
)]
pub trait ReadOnlyTool: Capability {
    /// The proof that `READ_ONLY` is `true`, made by `#[derive(Capability)]`.
    #[doc(hidden)]
    const READ_ONLY_PROOF: ReadOnlyProof<Self>;
}

/// Proof that tool `T`'s `READ_ONLY` is `true`: the constant of [`ReadOnlyTool`]. It has no
/// public constructor; `#[derive(Capability)]` makes it through `capability::__private`.
pub struct ReadOnlyProof<T: ?Sized> {
    marker: std::marker::PhantomData<fn() -> *const T>,
}

impl<T: ?Sized + Capability> ReadOnlyProof<T> {
    /// The proof for `T`; fails const evaluation when `T::READ_ONLY` is `false`. Called by the
    /// code `#[derive(Capability)]` generates, not by hand.
    #[doc(hidden)]
    pub const fn new() -> Self {
        if !T::READ_ONLY {
            panic!(
                "`ReadOnlyTool` implemented for a tool whose `Capability::READ_ONLY` is `false`: \
                 only `#[derive(Capability)]` with `#[capability(read_only)]` makes a read-only tool"
            );
        }
        ReadOnlyProof {
            marker: std::marker::PhantomData,
        }
    }
}

impl<T: ?Sized> fmt::Debug for ReadOnlyProof<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReadOnlyProof<{}>", std::any::type_name::<T>())
    }
}

/// The frozen description of what a tool does and needs.
///
/// The four hints mean what the MCP tool annotations `readOnlyHint`, `destructiveHint`,
/// `idempotentHint` and `openWorldHint` mean, with the same defaults; each records where it came
/// from ([`hint`](Self::hint)), and the getters return the value decisions use. A manifest cannot
/// be changed once built: it has getters only. It comes from `#[derive(Capability)]`, from
/// [`CapabilityManifest::builder`], or from an MCP tool (`capability::mcp::McpManifest::from_mcp_tool`);
/// all of them end in one constructor, which resolves the hints by one rule.
///
/// # Serialized manifests are claims
///
/// A manifest serializes with serde, in full: each hint as its effective value, its source and
/// what was stated. It deserializes under the builder's rules (a bad name, provider, scope,
/// version or hash, unsorted scopes or an unknown field are refused), but **provenance is never
/// read back**: whoever wrote the file could have written anything. Every stated hint is loaded
/// as an [untrusted claim](HintSource::UntrustedClaim), recorded and not believed, and the
/// effective values are computed again, never taken from the file; `effective` and `source` are
/// read only to check the form. So a file edited to say a tool is read-only, with any source,
/// gives a tool that is not. To believe a tool again, take its manifest from a trusted source:
/// the code (the [`Registry`](crate::Registry), which
/// [`persist_spec`](crate::Registry::persist_spec) consults), a trusted or pinned MCP server, or
/// an operator's assertion in a policy.
///
/// ```
/// use capability::CapabilityManifest;
/// use capability::manifest::{HintKind, HintSource};
///
/// let m = CapabilityManifest::builder("list_pods").read_only(true).build()?;
/// let json = serde_json::to_string(&m)?;
/// let back: CapabilityManifest = serde_json::from_str(&json)?;
/// assert_eq!(back.name(), "list_pods");
/// assert_eq!(back.descriptor_hash(), m.descriptor_hash());
/// assert_eq!(back.hint(HintKind::ReadOnly).stated(), Some(true));
/// assert_eq!(back.hint(HintKind::ReadOnly).source(), HintSource::UntrustedClaim);
/// assert!(!back.read_only(), "a claim read from a file is not believed");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CapabilityManifest {
    data: Data,
}

/// Where a manifest's data lives: in the binary (a derived tool), or shared on the heap (an
/// agent spec holds its tools' manifests, and cloning one is a reference count).
#[derive(Clone)]
enum Data {
    Static(&'static ManifestData),
    Shared(Arc<ManifestData>),
}

impl CapabilityManifest {
    /// A derived tool's manifest, pointing at data assembled at compile time.
    pub(crate) const fn from_static(data: &'static ManifestData) -> Self {
        CapabilityManifest {
            data: Data::Static(data),
        }
    }

    /// A manifest built at run time.
    pub(crate) fn from_data(data: ManifestData) -> Self {
        CapabilityManifest {
            data: Data::Shared(Arc::new(data)),
        }
    }

    fn data(&self) -> &ManifestData {
        match &self.data {
            Data::Static(data) => data,
            Data::Shared(data) => data,
        }
    }
}

impl PartialEq for CapabilityManifest {
    fn eq(&self, other: &Self) -> bool {
        self.data() == other.data()
    }
}

impl Eq for CapabilityManifest {}

impl Hash for CapabilityManifest {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.data().hash(state);
    }
}

impl fmt::Debug for CapabilityManifest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CapabilityManifest")
            .field("data", self.data())
            .finish()
    }
}

impl CapabilityManifest {
    /// The tool name (MCP: 1 to 128 characters of `A-Z a-z 0-9 _ - .`).
    pub fn name(&self) -> &str {
        &self.data().described.name
    }

    /// A human-readable title, if one was given.
    pub fn title(&self) -> Option<&str> {
        self.data().described.title.as_deref()
    }

    /// The description: the `description` key, else the type's doc comment.
    pub fn description(&self) -> Option<&str> {
        self.data().described.description.as_deref()
    }

    /// The provider (the system the tool talks to, such as `k8s`; for an MCP tool, its server's
    /// name), if any.
    pub fn provider(&self) -> Option<&str> {
        self.data().described.provider.as_deref()
    }

    /// The tool does not modify its environment (effective value).
    pub fn read_only(&self) -> bool {
        self.data().hints.read_only.effective()
    }

    /// A write may destroy rather than add (effective value). Always `false` for a read-only
    /// tool.
    pub fn destructive(&self) -> bool {
        self.data().hints.destructive.effective()
    }

    /// Calling it again with the same arguments has no further effect (effective value).
    pub fn idempotent(&self) -> bool {
        self.data().hints.idempotent.effective()
    }

    /// The tool reaches an open world of external entities (effective value).
    pub fn open_world(&self) -> bool {
        self.data().hints.open_world.effective()
    }

    /// One hint with its provenance: the effective value, where it came from, what was stated.
    pub fn hint(&self, kind: HintKind) -> Hint {
        *self.data().hints.get(kind)
    }

    /// All four hints with their provenance.
    pub fn hints(&self) -> HintSet<Hint> {
        self.data().hints
    }

    /// The scopes a caller must hold, sorted and de-duplicated.
    pub fn required_scopes(&self) -> &[String] {
        self.data().described.required_scopes.strings()
    }

    /// Input fields whose values the audit trail stores only as their digest (the
    /// `sensitive = [..]` key), sorted.
    pub fn sensitive_fields(&self) -> &[String] {
        self.data().described.sensitive_fields.strings()
    }

    /// Identifies the tool's input type: for a derived tool its module path and name, such as
    /// `fleet::k8s::RestartPod`; for an MCP tool `mcp:<server>/<tool>#input`.
    pub fn input_schema_id(&self) -> &str {
        &self.data().described.input_schema_id
    }

    /// Identifies the output type (`output = Type`, as written there; an MCP tool's
    /// `outputSchema`); `None` without one.
    pub fn output_schema_id(&self) -> Option<&str> {
        self.data().described.output_schema_id.as_deref()
    }

    /// The `version` key when given, else the first 12 hex digits of the descriptor hash.
    pub fn schema_version(&self) -> &str {
        &self.data().described.schema_version
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
        &self.data().described.descriptor_hash
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
        let data = self.data();
        let stated = assertion.applied_to(data.hints.stated());
        CapabilityManifest::from_data(ManifestData::assemble(data.described.clone(), stated))
    }

    /// The effective hints with an operator's assertion (if any) applied, without building a
    /// manifest: what [`with_assertion`](Self::with_assertion) would give, for the hot path.
    pub(crate) fn flags_with(&self, assertion: Option<&Assertion>) -> Flags {
        let hints = self.data().hints;
        match assertion {
            Some(assertion) => assertion.applied_to(hints.stated()).resolve().flags(),
            None => hints.flags(),
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
    /// The asserted values, by hint.
    pub fn hints(&self) -> HintSet<Option<bool>> {
        HintSet {
            read_only: self.read_only,
            destructive: self.destructive,
            idempotent: self.idempotent,
            open_world: self.open_world,
        }
    }

    /// What was stated, with what the operator asserts in place of it.
    pub(crate) fn applied_to(&self, stated: HintSet<Stated>) -> HintSet<Stated> {
        let asserted = self.hints().stated_by(HintSource::Asserted);
        stated.map(|kind, stated| (*asserted.get(kind)).or(stated))
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
        let mut scopes = self.data().described.required_scopes.iter();
        if let Some(first) = scopes.next() {
            write!(f, " scopes: {first}")?;
            for scope in scopes {
                write!(f, " {scope}")?;
            }
        }
        Ok(())
    }
}

pub(crate) fn is_hex_digest(text: &str) -> bool {
    capability_rules::hex::is_lower_hex(text, 64)
}
