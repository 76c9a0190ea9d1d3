//! Manifests for tools built at run time, under exactly the derive's rules.

use capability_rules::{Descriptor, Draft, Shape};

use super::data::{Described, ManifestData, Names};
use super::hints::{HintKind, HintSet, HintSource};
use super::{CapabilityManifest, ManifestError};

/// Builds a [`CapabilityManifest`] at run time: for a plugin, a `dyn` tool, or anything else the
/// derive cannot see. [`build`](Self::build) applies the rules `#[derive(Capability)]` applies
/// (they live in one crate, `capability-rules`, that both call).
///
/// ```
/// use capability::CapabilityManifest;
/// use capability::manifest::{HintKind, HintSource};
///
/// let m = CapabilityManifest::builder("list_pods")
///     .provider("k8s")
///     .read_only(true)
///     .idempotent(true)
///     .open_world(false)
///     .scope("k8s:read")
///     .build()?;
/// assert!(m.read_only() && !m.destructive());
/// assert_eq!(m.hint(HintKind::ReadOnly).source(), HintSource::Declared);
/// assert_eq!(m.hint(HintKind::Destructive).source(), HintSource::Defaulted);
///
/// let error = CapabilityManifest::builder("restart pod")
///     .read_only(true)
///     .scope("k8s:write")
///     .build()
///     .unwrap_err();
/// assert_eq!(error.problems().len(), 2);
/// # Ok::<(), capability::ManifestError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct ManifestBuilder {
    name: String,
    title: Option<String>,
    description: Option<String>,
    provider: Option<String>,
    version: Option<String>,
    hints: HintSet<Option<bool>>,
    scopes: Vec<String>,
    input_schema_id: Option<String>,
    output_schema_id: Option<String>,
    sensitive: Vec<String>,
    stated_by: HintSource,
    descriptor_hash: Option<String>,
}

impl CapabilityManifest {
    /// Starts a manifest for a tool built at run time.
    pub fn builder(name: impl Into<String>) -> ManifestBuilder {
        ManifestBuilder {
            name: name.into(),
            title: None,
            description: None,
            provider: None,
            version: None,
            hints: HintSet::default(),
            scopes: Vec::new(),
            input_schema_id: None,
            output_schema_id: None,
            sensitive: Vec::new(),
            stated_by: HintSource::Declared,
            descriptor_hash: None,
        }
    }
}

impl ManifestBuilder {
    /// States one hint (see [`stated_by`](Self::stated_by) for who states it).
    pub fn hint(mut self, kind: HintKind, value: bool) -> Self {
        self.hints.set(kind, Some(value));
        self
    }

    /// States all four hints at once, replacing any stated before; `None` leaves a hint unsaid.
    pub fn hints(mut self, hints: HintSet<Option<bool>>) -> Self {
        self.hints = hints;
        self
    }

    /// Declares `readOnlyHint`.
    pub fn read_only(self, value: bool) -> Self {
        self.hint(HintKind::ReadOnly, value)
    }

    /// Declares `destructiveHint`.
    pub fn destructive(self, value: bool) -> Self {
        self.hint(HintKind::Destructive, value)
    }

    /// Declares `idempotentHint`.
    pub fn idempotent(self, value: bool) -> Self {
        self.hint(HintKind::Idempotent, value)
    }

    /// Declares `openWorldHint`.
    pub fn open_world(self, value: bool) -> Self {
        self.hint(HintKind::OpenWorld, value)
    }

    /// Adds a required scope (order and repeats do not matter).
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scopes.push(scope.into());
        self
    }

    /// Adds required scopes.
    pub fn scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes.extend(scopes.into_iter().map(Into::into));
        self
    }

    /// Sets the provider.
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// Sets the title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets the schema version (default: the first 12 hex digits of the descriptor hash).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Sets the input schema id (default: `runtime:<provider>/<name>`).
    pub fn input_schema_id(mut self, id: impl Into<String>) -> Self {
        self.input_schema_id = Some(id.into());
        self
    }

    /// Sets the output schema id (default: none).
    pub fn output_schema_id(mut self, id: impl Into<String>) -> Self {
        self.output_schema_id = Some(id.into());
        self
    }

    /// Marks an input field sensitive: the audit trail stores its value only as a digest.
    pub fn sensitive(mut self, field: impl Into<String>) -> Self {
        self.sensitive.push(field.into());
        self
    }

    /// Who stated the hints given to this builder (default: [`HintSource::Declared`], the code
    /// itself). For a tool described by someone else, such as an MCP server, pass the claim's
    /// source: a claim's hints are resolved by the same rule as everything else (an untrusted
    /// claim is recorded and not believed), and a claim that contradicts itself (read-only and
    /// destructive) is not an error, since only believed values count. [`HintSource::Defaulted`]
    /// is not a source of a statement, and [`build`](Self::build) refuses it.
    pub fn stated_by(mut self, source: HintSource) -> Self {
        self.stated_by = source;
        self
    }

    /// Sets the descriptor hash of a tool described outside Rust (an MCP Tool object): 64
    /// lowercase hex digits, computed by whoever read that description. Without it, the hash
    /// is computed from what the builder was given, as for a derived tool.
    pub fn descriptor_hash(mut self, hash: impl Into<String>) -> Self {
        self.descriptor_hash = Some(hash.into());
        self
    }

    /// Applies the manifest rules and builds the manifest, or reports every broken rule.
    pub fn build(self) -> Result<CapabilityManifest, ManifestError> {
        // The rules about hints (read-only and destructive together) bind what the code
        // declares; a claim is only a claim, resolved below like any other statement.
        let declared = self.stated_by == HintSource::Declared;
        let rules = self.hints.map(|_, value| value.filter(|_| declared));
        let draft = Draft {
            name: &self.name,
            provider: self.provider.as_deref(),
            version: self.version.as_deref(),
            read_only: rules.read_only,
            destructive: rules.destructive,
            idempotent: rules.idempotent,
            open_world: rules.open_world,
            scopes: self.scopes.iter().map(String::as_str).collect(),
        };
        let mut error = ManifestError::new(&self.name);
        if self.stated_by == HintSource::Defaulted {
            error.push("stated_by", "`defaulted` is not a source of a statement");
        }
        if let Some(hash) = &self.descriptor_hash
            && !super::is_hex_digest(hash)
        {
            error.push("descriptor_hash", "must be 64 lowercase hex digits");
        }
        if self.input_schema_id.as_ref().is_some_and(String::is_empty) {
            error.push("input_schema_id", "cannot be empty");
        }
        let valid = capability_rules::validate(&draft)
            .map_err(|problems| error.push_rules(problems))
            .ok();
        for (i, field) in self.sensitive.iter().enumerate() {
            if field.is_empty() || field.chars().any(char::is_whitespace) {
                error.push(
                    format!("sensitive[{i}]"),
                    format!("{field:?} is not a field name"),
                );
            }
        }
        error.into_result()?;
        let Some(valid) = valid else {
            return Err(ManifestError::new(&self.name));
        };
        let sensitive =
            capability_rules::normalize_scopes(self.sensitive.iter().map(String::as_str));
        let computed = || {
            Descriptor {
                name: &self.name,
                title: self.title.as_deref(),
                description: self.description.as_deref(),
                provider: self.provider.as_deref(),
                flags: valid.flags,
                scopes: &valid.scopes,
                generics: "",
                input: &Shape::Dynamic,
                output: self.output_schema_id.as_deref(),
                version: self.version.as_deref(),
                sensitive: &sensitive,
            }
            .hash_hex()
        };
        let descriptor_hash = self.descriptor_hash.unwrap_or_else(computed);
        let input_schema_id = self
            .input_schema_id
            .unwrap_or_else(|| match &self.provider {
                Some(provider) => format!("runtime:{provider}/{}", self.name),
                None => format!("runtime:{}", self.name),
            });
        let schema_version = self
            .version
            .unwrap_or_else(|| descriptor_hash[..12].to_owned());
        let described = Described {
            name: self.name.into(),
            title: self.title.map(Into::into),
            description: self.description.map(Into::into),
            provider: self.provider.map(Into::into),
            required_scopes: Names::Owned(valid.scopes),
            input_schema_id: input_schema_id.into(),
            output_schema_id: self.output_schema_id.map(Into::into),
            schema_version: schema_version.into(),
            descriptor_hash: descriptor_hash.into(),
            sensitive_fields: Names::Owned(sensitive),
        };
        let stated = self.hints.stated_by(self.stated_by);
        Ok(CapabilityManifest::from_data(ManifestData::assemble(
            described, stated,
        )))
    }
}
