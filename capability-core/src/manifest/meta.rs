//! A manifest's required scopes and descriptor hash as they travel in an MCP tool's `_meta`.
//!
//! The value lives here, beside the manifest, because two writers need it: the MCP export
//! (`capability_mcp::export::to_mcp_tool`) and the `meta` that `#[tool_capabilities]` gives each
//! rmcp `#[tool(...)]`, so a router's published tools carry it too.

use serde_json::{Map, Value};

use super::CapabilityManifest;

/// The `_meta` key under which an exported tool carries its manifest's required scopes and
/// descriptor hash: `{"scopes": [..], "descriptorHash": ".."}`.
pub const MANIFEST_META_KEY: &str = "dev.capability/manifest";

/// The value written under [`MANIFEST_META_KEY`]: `{"scopes": [..], "descriptorHash": ".."}`
/// (`descriptorHash` only when the manifest has one).
///
/// ```
/// use capability::CapabilityManifest;
/// use capability::mcp::export::manifest_meta;
///
/// let m = CapabilityManifest::builder("restart_pod").scope("k8s:write").build()?;
/// assert_eq!(manifest_meta(&m)["scopes"], serde_json::json!(["k8s:write"]));
/// # Ok::<(), capability::ManifestError>(())
/// ```
pub fn manifest_meta(manifest: &CapabilityManifest) -> Value {
    let mut meta = Map::new();
    let scopes = manifest
        .required_scopes()
        .iter()
        .map(|scope| Value::String(scope.clone()))
        .collect();
    meta.insert("scopes".to_owned(), Value::Array(scopes));
    if !manifest.descriptor_hash().is_empty() {
        meta.insert(
            "descriptorHash".to_owned(),
            Value::String(manifest.descriptor_hash().to_owned()),
        );
    }
    Value::Object(meta)
}
