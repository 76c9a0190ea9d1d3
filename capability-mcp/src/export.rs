//! Manifests as MCP `Tool` objects, for a server's `tools/list`.
//!
//! Every exported tool carries its required scopes and its descriptor hash in `_meta`, under
//! one reverse-DNS key, [`MANIFEST_META_KEY`]:
//!
//! ```json
//! "_meta": { "dev.capability/manifest": { "scopes": ["k8s:write"], "descriptorHash": "9f2c…" } }
//! ```
//!
//! `scopes` is always there (sorted, possibly empty); `descriptorHash` when the manifest has
//! one. Reading them back is [`from_mcp_tool`](crate::import::from_mcp_tool)'s business, and
//! both are claims there: see [`crate::import`].

use capability_core::manifest::{CapabilityManifest, HintKind};
use serde_json::{Map, Value};

pub use capability_core::manifest::{MANIFEST_META_KEY, manifest_meta};

/// This tool as an MCP `Tool` object, for a server's `tools/list`: name, title,
/// description, the minimal input schema `{"type": "object"}`, and the effective hints as
/// `annotations` with the MCP spellings (all four, always, so that no client falls back to
/// its own defaults), and the required scopes and descriptor hash in `_meta` under
/// [`MANIFEST_META_KEY`]. With the `schemars` feature, `capability::mcp::mcp_tool::<T>()` gives the
/// type's real input schema instead.
///
/// ```
/// use capability::mcp::McpManifest;
/// use capability::CapabilityManifest;
///
/// let m = CapabilityManifest::builder("list_pods").read_only(true).build()?;
/// let tool = m.to_mcp_tool();
/// assert_eq!(tool["annotations"]["readOnlyHint"], true);
/// assert_eq!(tool["annotations"]["destructiveHint"], false);
/// assert_eq!(tool["inputSchema"]["type"], "object");
/// # Ok::<(), capability::ManifestError>(())
/// ```
pub fn to_mcp_tool(manifest: &CapabilityManifest) -> Value {
    to_mcp_tool_with_schema(manifest, serde_json::json!({ "type": "object" }))
}

/// This tool as an MCP `Tool` object with the given input schema. A schema whose root is
/// not an object schema is replaced by `{"type": "object"}` (MCP requires one); a root with
/// no `type` gets `"type": "object"`.
pub fn to_mcp_tool_with_schema(manifest: &CapabilityManifest, input_schema: Value) -> Value {
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
    tool.insert("name".to_owned(), Value::String(manifest.name().to_owned()));
    if let Some(title) = manifest.title() {
        tool.insert("title".to_owned(), Value::String(title.to_owned()));
    }
    if let Some(description) = manifest.description() {
        tool.insert(
            "description".to_owned(),
            Value::String(description.to_owned()),
        );
    }
    tool.insert("inputSchema".to_owned(), input_schema);
    let mut annotations = Map::new();
    if let Some(title) = manifest.title() {
        annotations.insert("title".to_owned(), Value::String(title.to_owned()));
    }
    for kind in HintKind::ALL {
        let value = manifest.hint(kind).effective();
        annotations.insert(kind.mcp_name().to_owned(), Value::Bool(value));
    }
    tool.insert("annotations".to_owned(), Value::Object(annotations));
    let mut meta = Map::new();
    meta.insert(MANIFEST_META_KEY.to_owned(), manifest_meta(manifest));
    tool.insert("_meta".to_owned(), Value::Object(meta));
    Value::Object(tool)
}

/// A derived tool as an MCP `Tool` object with its type's real JSON schema (schemars) as the
/// input schema. See [`to_mcp_tool_with_schema`].
#[cfg(feature = "schemars")]
pub fn mcp_tool<T: capability_core::manifest::Capability + schemars::JsonSchema>() -> Value {
    let schema = schemars::schema_for!(T);
    let schema = serde_json::to_value(&schema).unwrap_or(Value::Null);
    to_mcp_tool_with_schema(T::manifest(), schema)
}
