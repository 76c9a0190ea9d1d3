//! The serialized form of a manifest: written in full, read back as claims.
//!
//! Writing gives every field, the hints with their provenance. Reading goes through
//! [`ManifestBuilder`](super::ManifestBuilder), under its rules, with every stated hint as an untrusted claim: what a
//! file says about provenance and effective values is checked for form and then ignored, so an
//! edited file cannot make a tool believed.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::data::Names;
use super::hints::{Hint, HintSet, HintSource};
use super::{CapabilityManifest, ManifestError};

/// What a manifest serializes as. The keys are the getters' names.
#[derive(Serialize)]
struct Written<'a> {
    name: &'a str,
    title: Option<&'a str>,
    description: Option<&'a str>,
    provider: Option<&'a str>,
    read_only: Hint,
    destructive: Hint,
    idempotent: Hint,
    open_world: Hint,
    required_scopes: &'a Names,
    input_schema_id: &'a str,
    output_schema_id: Option<&'a str>,
    schema_version: &'a str,
    descriptor_hash: &'a str,
    #[serde(skip_serializing_if = "is_empty")]
    sensitive_fields: &'a Names,
}

fn is_empty(names: &&Names) -> bool {
    names.len() == 0
}

impl Serialize for CapabilityManifest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let d = &self.data().described;
        let h = self.data().hints;
        Written {
            name: &d.name,
            title: d.title.as_deref(),
            description: d.description.as_deref(),
            provider: d.provider.as_deref(),
            read_only: h.read_only,
            destructive: h.destructive,
            idempotent: h.idempotent,
            open_world: h.open_world,
            required_scopes: &d.required_scopes,
            input_schema_id: &d.input_schema_id,
            output_schema_id: d.output_schema_id.as_deref(),
            schema_version: &d.schema_version,
            descriptor_hash: &d.descriptor_hash,
            sensitive_fields: &d.sensitive_fields,
        }
        .serialize(serializer)
    }
}

/// What a manifest deserializes from: the written form.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Read {
    name: String,
    title: Option<String>,
    description: Option<String>,
    provider: Option<String>,
    read_only: ReadHint,
    destructive: ReadHint,
    idempotent: ReadHint,
    open_world: ReadHint,
    required_scopes: Vec<String>,
    input_schema_id: String,
    output_schema_id: Option<String>,
    schema_version: String,
    descriptor_hash: String,
    #[serde(default)]
    sensitive_fields: Vec<String>,
}

/// One hint as written. Only `stated` counts; the other two are checked for form and ignored.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadHint {
    #[serde(rename = "effective")]
    _effective: Option<bool>,
    #[serde(rename = "source")]
    _source: Option<HintSource>,
    stated: Option<bool>,
}

impl<'de> Deserialize<'de> for CapabilityManifest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = Read::deserialize(deserializer)?;
        CapabilityManifest::try_from(read).map_err(D::Error::custom)
    }
}

impl TryFrom<Read> for CapabilityManifest {
    type Error = ManifestError;

    fn try_from(read: Read) -> Result<Self, ManifestError> {
        // The builder sorts scopes; a file whose scopes are not sorted was not written by us.
        let mut order = ManifestError::new(read.name.as_str());
        if !read.required_scopes.windows(2).all(|w| w[0] < w[1]) {
            order.push("required_scopes", "must be sorted and free of repeats");
        }
        let mut builder = CapabilityManifest::builder(read.name)
            .stated_by(HintSource::UntrustedClaim)
            .hints(HintSet {
                read_only: read.read_only.stated,
                destructive: read.destructive.stated,
                idempotent: read.idempotent.stated,
                open_world: read.open_world.stated,
            })
            .scopes(read.required_scopes)
            .input_schema_id(read.input_schema_id)
            .version(read.schema_version)
            .descriptor_hash(read.descriptor_hash);
        if let Some(title) = read.title {
            builder = builder.title(title);
        }
        if let Some(description) = read.description {
            builder = builder.description(description);
        }
        if let Some(provider) = read.provider {
            builder = builder.provider(provider);
        }
        if let Some(output) = read.output_schema_id {
            builder = builder.output_schema_id(output);
        }
        for field in read.sensitive_fields {
            builder = builder.sensitive(field);
        }
        match builder.build() {
            Ok(manifest) => order.into_result().map(|()| manifest),
            Err(mut error) => {
                error.absorb(order);
                Err(error)
            }
        }
    }
}
