//! Manifests of tools from MCP servers, and the trust placed in those servers.

use std::fmt;

use serde_json::{Map, Value};

use crate::CapabilityManifest;
use crate::hints::{HintSource, Hints};
use crate::manifest::{ManifestData, ManifestError};

/// An MCP server: its name (the provider of its tools) and whether its annotations are believed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Server {
    name: String,
    trust: Trust,
}

/// Whether a server's tool annotations are believed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trust {
    /// Its annotations count as what they say.
    Trusted,
    /// Its annotations are recorded but count as absent (the MCP specification: clients must
    /// treat annotations from untrusted servers as untrusted).
    Untrusted,
}

impl Server {
    /// A server whose annotations are believed.
    pub fn trusted(name: impl Into<String>) -> Server {
        Server {
            name: name.into(),
            trust: Trust::Trusted,
        }
    }

    /// A server whose annotations are not believed: every tool it lists is treated as mutating,
    /// destructive and open-world until an operator asserts otherwise.
    pub fn untrusted(name: impl Into<String>) -> Server {
        Server {
            name: name.into(),
            trust: Trust::Untrusted,
        }
    }

    /// The server's name, which is the provider of its tools.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How far its annotations are believed.
    pub fn trust(&self) -> Trust {
        self.trust
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let trust = match self.trust {
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
        };
        write!(f, "{} ({trust})", self.name)
    }
}

impl CapabilityManifest {
    /// The manifest of one tool of an MCP server's `tools/list`.
    ///
    /// Accepts Tool objects of the MCP schema versions 2025-11-25 and 2026-07-28: `name` and
    /// `inputSchema` (an object schema) are required; `title`, `description`, `outputSchema`
    /// and `annotations` are read; anything else (`_meta`, `icons`, `execution`, fields of later
    /// versions) is ignored and never affects a decision. The annotations' hints count only when
    /// the server is trusted; otherwise the fail-closed defaults apply and the claims stay
    /// visible through [`hint`](Self::hint). For a tool whose effective `read_only` is true,
    /// `destructive` is false whatever `destructiveHint` says. The provider is the server's
    /// name. A malformed tool gives an error naming the tool and every bad field.
    ///
    /// ```
    /// use capability::{CapabilityManifest, HintKind, HintSource, Server};
    /// use serde_json::json;
    ///
    /// let tool = json!({
    ///     "name": "browser_take_screenshot",
    ///     "inputSchema": { "type": "object" },
    ///     "annotations": { "readOnlyHint": true }
    /// });
    /// let m = CapabilityManifest::from_mcp_tool(&tool, &Server::untrusted("playwright"))?;
    /// assert!(!m.read_only(), "an untrusted claim is not believed");
    /// assert_eq!(m.hint(HintKind::ReadOnly).stated(), Some(true));
    /// assert_eq!(m.hint(HintKind::ReadOnly).source(), HintSource::UntrustedClaim);
    /// assert_eq!(m.provider(), Some("playwright"));
    ///
    /// let m = CapabilityManifest::from_mcp_tool(&tool, &Server::trusted("playwright"))?;
    /// assert!(m.read_only() && !m.destructive());
    /// # Ok::<(), capability::ManifestError>(())
    /// ```
    pub fn from_mcp_tool(
        tool: &Value,
        server: &Server,
    ) -> Result<CapabilityManifest, ManifestError> {
        let Some(object) = tool.as_object() else {
            let mut error = ManifestError::new("<not an object>");
            error.push(
                "(tool)",
                format!("expected a JSON object, found {}", kind(tool)),
            );
            return Err(error);
        };
        let name = match object.get("name") {
            Some(Value::String(name)) => Some(name.as_str()),
            _ => None,
        };
        let mut error = ManifestError::new(name.unwrap_or("<tool without a name>"));
        match object.get("name") {
            Some(Value::String(name)) => {
                if let Err(violation) = capability_rules::check_tool_name(name) {
                    error.push("name", violation.to_string());
                }
            }
            Some(other) => error.push("name", format!("expected a string, found {}", kind(other))),
            None => error.push("name", "missing; every MCP tool has a name"),
        }
        let title = optional_string(object, "title", "title", &mut error);
        let description = optional_string(object, "description", "description", &mut error);
        match object.get("inputSchema") {
            Some(Value::Object(schema)) => match schema.get("type") {
                Some(Value::String(t)) if t == "object" => {}
                Some(other) => error.push(
                    "inputSchema.type",
                    format!("must be \"object\" (tool arguments are a JSON object), found {other}"),
                ),
                None => error.push(
                    "inputSchema.type",
                    "missing; MCP requires `\"type\": \"object\"` at the root",
                ),
            },
            Some(other) => error.push(
                "inputSchema",
                format!("expected a JSON Schema object, found {}", kind(other)),
            ),
            None => error.push("inputSchema", "missing; every MCP tool has an input schema"),
        }
        let output_schema = match object.get("outputSchema") {
            None => false,
            Some(Value::Object(_)) => true,
            Some(other) => {
                error.push(
                    "outputSchema",
                    format!("expected a JSON Schema object, found {}", kind(other)),
                );
                false
            }
        };
        let mut claims = [None; 4];
        let mut annotation_title = None;
        match object.get("annotations") {
            None | Some(Value::Null) => {}
            Some(Value::Object(annotations)) => {
                let source = match server.trust() {
                    crate::Trust::Trusted => HintSource::TrustedClaim,
                    crate::Trust::Untrusted => HintSource::UntrustedClaim,
                };
                for (slot, kind_) in claims.iter_mut().zip(crate::HintKind::ALL) {
                    let key = kind_.mcp_name();
                    match annotations.get(key) {
                        None | Some(Value::Null) => {}
                        Some(Value::Bool(value)) => *slot = Some((*value, source)),
                        Some(other) => error.push(
                            format!("annotations.{key}"),
                            format!("expected a boolean, found {}", kind(other)),
                        ),
                    }
                }
                annotation_title =
                    optional_string(annotations, "title", "annotations.title", &mut error);
            }
            Some(other) => error.push(
                "annotations",
                format!("expected an object, found {}", kind(other)),
            ),
        }
        if let Err(violation) = capability_rules::check_provider(server.name()) {
            error.push("(server)", violation.to_string());
        }
        error.into_result()?;
        let name = name.unwrap_or_default();
        let hints = Hints::resolve(claims);

        let descriptor_hash = descriptor_hash_of(object);
        let server_name = server.name();
        Ok(CapabilityManifest {
            data: std::sync::Arc::new(ManifestData {
                name: name.to_owned().into(),
                title: title.or(annotation_title).map(Into::into),
                description: description.map(Into::into),
                provider: Some(server_name.to_owned().into()),
                read_only: hints.read_only,
                destructive: hints.destructive,
                idempotent: hints.idempotent,
                open_world: hints.open_world,
                required_scopes: Vec::new(),
                input_schema_id: format!("mcp:{server_name}/{name}#input").into(),
                output_schema_id: output_schema
                    .then(|| format!("mcp:{server_name}/{name}#output").into()),
                schema_version: descriptor_hash[..12].to_owned().into(),
                descriptor_hash: descriptor_hash.into(),
                sensitive_fields: Vec::new(),
            }),
        })
    }
}

impl CapabilityManifest {
    /// This tool as an MCP `Tool` object, for a server's `tools/list`: name, title,
    /// description, the minimal input schema `{"type": "object"}`, and the effective hints as
    /// `annotations` with the MCP spellings (all four, always, so that no client falls back to
    /// its own defaults). With the `schemars` feature, `capability::mcp_tool::<T>()` gives the
    /// type's real input schema instead.
    ///
    /// ```
    /// use capability::CapabilityManifest;
    ///
    /// let m = CapabilityManifest::builder("list_pods").read_only(true).build()?;
    /// let tool = m.to_mcp_tool();
    /// assert_eq!(tool["annotations"]["readOnlyHint"], true);
    /// assert_eq!(tool["annotations"]["destructiveHint"], false);
    /// assert_eq!(tool["inputSchema"]["type"], "object");
    /// # Ok::<(), capability::ManifestError>(())
    /// ```
    pub fn to_mcp_tool(&self) -> Value {
        self.to_mcp_tool_with_schema(serde_json::json!({ "type": "object" }))
    }

    /// This tool as an MCP `Tool` object with the given input schema. A schema whose root is
    /// not an object schema is replaced by `{"type": "object"}` (MCP requires one); a root with
    /// no `type` gets `"type": "object"`.
    pub fn to_mcp_tool_with_schema(&self, input_schema: Value) -> Value {
        let input_schema = match input_schema {
            Value::Object(mut schema) => match schema.get("type") {
                Some(Value::String(t)) if t == "object" => Value::Object(schema),
                None => {
                    schema.insert("type".to_owned(), Value::String("object".to_owned()));
                    Value::Object(schema)
                }
                Some(_) => serde_json::json!({ "type": "object" }),
            },
            _ => serde_json::json!({ "type": "object" }),
        };
        let mut tool = Map::new();
        tool.insert("name".to_owned(), Value::String(self.name().to_owned()));
        if let Some(title) = self.title() {
            tool.insert("title".to_owned(), Value::String(title.to_owned()));
        }
        if let Some(description) = self.description() {
            tool.insert(
                "description".to_owned(),
                Value::String(description.to_owned()),
            );
        }
        tool.insert("inputSchema".to_owned(), input_schema);
        let mut annotations = Map::new();
        if let Some(title) = self.title() {
            annotations.insert("title".to_owned(), Value::String(title.to_owned()));
        }
        for kind in crate::HintKind::ALL {
            let value = self.hint(kind).effective();
            annotations.insert(kind.mcp_name().to_owned(), Value::Bool(value));
        }
        tool.insert("annotations".to_owned(), Value::Object(annotations));
        Value::Object(tool)
    }
}

/// A derived tool as an MCP `Tool` object with its type's real JSON schema (schemars) as the
/// input schema. See [`CapabilityManifest::to_mcp_tool_with_schema`].
#[cfg(feature = "schemars")]
pub fn mcp_tool<T: crate::Capability + schemars::JsonSchema>() -> Value {
    let schema = schemars::schema_for!(T);
    let schema = serde_json::to_value(&schema).unwrap_or(Value::Null);
    T::manifest().to_mcp_tool_with_schema(schema)
}

/// The fields of an MCP tool that its descriptor hash covers: what the model is shown and what
/// the server claims about the tool. Listed in canonical (byte) order.
pub const MCP_DESCRIPTOR_FIELDS: [&str; 6] = [
    "annotations",
    "description",
    "inputSchema",
    "name",
    "outputSchema",
    "title",
];

/// The descriptor hash of an MCP tool: SHA-256 over the RFC 8785 canonical JSON of an object
/// holding the tool's [`MCP_DESCRIPTOR_FIELDS`] that are present, as 64 lowercase hex digits.
/// Key order and white space do not change it; any change to a description, a schema or an
/// annotation does. Other fields (`_meta`, `icons`, `execution`) are not covered. A value that
/// is not an object hashes as the canonical JSON of the value itself.
///
/// ```
/// use serde_json::json;
///
/// let a = json!({"name": "echo", "inputSchema": {"type": "object"}, "_meta": {"x": 1}});
/// let b = json!({"inputSchema": {"type": "object"}, "name": "echo"});
/// assert_eq!(capability::mcp_descriptor_hash(&a), capability::mcp_descriptor_hash(&b));
/// ```
pub fn mcp_descriptor_hash(tool: &Value) -> String {
    match tool.as_object() {
        Some(object) => descriptor_hash_of(object),
        None => capability_rules::sha256_hex(crate::to_canonical_json(tool).as_bytes()),
    }
}

fn descriptor_hash_of(object: &Map<String, Value>) -> String {
    // Borrow the fields instead of copying them into a new object (schemas can be large), and
    // write them in the order of `MCP_DESCRIPTOR_FIELDS`, which is already the canonical one.
    let mut canonical = String::with_capacity(4096);
    canonical.push('{');
    let present = MCP_DESCRIPTOR_FIELDS
        .iter()
        .filter_map(|key| object.get(*key).map(|value| (*key, value)));
    for (i, (key, value)) in present.enumerate() {
        if i > 0 {
            canonical.push(',');
        }
        crate::canonical::write_entry(&mut canonical, key, value);
    }
    canonical.push('}');
    capability_rules::sha256_hex(canonical.as_bytes())
}

fn optional_string(
    object: &Map<String, Value>,
    key: &str,
    field: &str,
    error: &mut ManifestError,
) -> Option<String> {
    match object.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(other) => {
            error.push(field, format!("expected a string, found {}", kind(other)));
            None
        }
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_fields_are_listed_in_canonical_order() {
        let mut sorted = MCP_DESCRIPTOR_FIELDS;
        sorted.sort_unstable();
        assert_eq!(sorted, MCP_DESCRIPTOR_FIELDS);
    }

    #[test]
    fn descriptor_hash_is_the_hash_of_the_canonical_covered_fields() {
        let tool = serde_json::json!({
            "name": "t", "title": "T", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}, "_meta": {"ignored": true}
        });
        let covered = serde_json::json!({
            "name": "t", "title": "T", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}
        });
        let expected = capability_rules::sha256_hex(crate::to_canonical_json(&covered).as_bytes());
        assert_eq!(mcp_descriptor_hash(&tool), expected);
    }
}
