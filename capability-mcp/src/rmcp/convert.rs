//! Conversions between manifests and rmcp's `Tool`, under this crate's rules.

use std::borrow::Cow;
use std::sync::Arc;

use ::rmcp::model::{MetaObject, Tool, ToolAnnotations};
use serde_json::Value;

use capability_core::manifest::{CapabilityManifest, HintKind, ManifestError};

use crate::export::{MANIFEST_META_KEY, manifest_meta};
use crate::import::from_mcp_tool;
use crate::server::Server;

/// The manifest of a tool an rmcp client received, read exactly like
/// [`from_mcp_tool`](crate::import::from_mcp_tool) reads the tool's JSON: annotations count only when
/// `server` is trusted, a read-only tool is never destructive, and the provider is the server's
/// name. A tool that breaks the MCP rules (a bad name, an input schema whose root is not an
/// object schema, ...) gives an error naming the tool and every bad field.
pub fn manifest_from_rmcp(
    tool: &Tool,
    server: &Server,
) -> Result<CapabilityManifest, ManifestError> {
    from_mcp_tool(&tool_json(tool)?, server)
}

/// The tool as rmcp serializes it: the JSON its descriptor hash and manifest are computed from.
pub fn tool_json(tool: &Tool) -> Result<Value, ManifestError> {
    serde_json::to_value(tool).map_err(|error| {
        let mut problem = ManifestError::new(tool.name.as_ref());
        problem.push("(tool)", format!("cannot be written as JSON: {error}"));
        problem
    })
}

/// This tool as an rmcp `Tool`, for a server's `tools/list`: the same object as
/// [`to_mcp_tool`](crate::export::to_mcp_tool) (name, title, description, the input schema
/// `{"type": "object"}`, [`to_rmcp_annotations`], and the scopes and descriptor hash in `_meta`
/// under [`MANIFEST_META_KEY`]). It is built with rmcp's own constructors,
/// so it cannot fail.
pub fn to_rmcp_tool(manifest: &CapabilityManifest) -> Tool {
    let mut input_schema = serde_json::Map::new();
    input_schema.insert("type".to_owned(), Value::String("object".to_owned()));
    let description = manifest
        .description()
        .map(|text| Cow::Owned(text.to_owned()));
    let mut tool = Tool::new_with_raw(
        manifest.name().to_owned(),
        description,
        Arc::new(input_schema),
    );
    if let Some(title) = manifest.title() {
        tool = tool.with_title(title);
    }
    let mut meta = serde_json::Map::new();
    meta.insert(MANIFEST_META_KEY.to_owned(), manifest_meta(manifest));
    tool.with_meta(MetaObject(meta))
        .with_annotations(to_rmcp_annotations(manifest))
}

/// The manifest's effective hints as rmcp annotations, all four set explicitly (so no client
/// falls back to its own defaults: a read-only tool says `destructiveHint: false`), with the
/// title when there is one.
pub fn to_rmcp_annotations(manifest: &CapabilityManifest) -> ToolAnnotations {
    let annotations = match manifest.title() {
        Some(title) => ToolAnnotations::with_title(title),
        None => ToolAnnotations::new(),
    };
    let hint = |kind: HintKind| manifest.hint(kind).effective();
    annotations
        .read_only(hint(HintKind::ReadOnly))
        .destructive(hint(HintKind::Destructive))
        .idempotent(hint(HintKind::Idempotent))
        .open_world(hint(HintKind::OpenWorld))
}
