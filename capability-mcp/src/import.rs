//! Manifests of tools from MCP servers: a server's claims, believed only as far as it is trusted.

use capability_core::manifest::{CapabilityManifest, HintKind, ManifestError};
use serde_json::{Map, Value};

use crate::hash::mcp_descriptor_hash;
use crate::server::Server;

/// The manifest of one tool of an MCP server's `tools/list`.
///
/// Accepts Tool objects of the MCP schema versions 2025-11-25 and 2026-07-28: `name` and
/// `inputSchema` (an object schema) are required; `title`, `description`, `outputSchema`
/// and `annotations` are read; anything else (`_meta`, `icons`, `execution`, fields of later
/// versions) is ignored and never affects a decision. The annotations' hints count only when
/// the server is trusted; otherwise the fail-closed defaults apply and the claims stay
/// visible through [`CapabilityManifest::hint`]. For a tool whose effective `read_only` is true,
/// `destructive` is false whatever `destructiveHint` says. The provider is the server's
/// name. A malformed tool gives an error naming the tool and every bad field.
///
/// ```
/// use capability::mcp::McpManifest;
/// use capability::{CapabilityManifest, Server};
/// use capability::manifest::{HintKind, HintSource};
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
pub fn from_mcp_tool(tool: &Value, server: &Server) -> Result<CapabilityManifest, ManifestError> {
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
    let mut claims = Vec::new();
    let mut annotation_title = None;
    match object.get("annotations") {
        None | Some(Value::Null) => {}
        Some(Value::Object(annotations)) => {
            for kind_ in HintKind::ALL {
                let key = kind_.mcp_name();
                match annotations.get(key) {
                    None | Some(Value::Null) => {}
                    Some(Value::Bool(value)) => claims.push((kind_, *value)),
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
    let server_name = server.name();
    let mut builder = CapabilityManifest::builder(name)
        .stated_by(server.trust().claim_source())
        .provider(server_name)
        .descriptor_hash(mcp_descriptor_hash(tool))
        .input_schema_id(format!("mcp:{server_name}/{name}#input"));
    if let Some(title) = title.or(annotation_title) {
        builder = builder.title(title);
    }
    if let Some(description) = description {
        builder = builder.description(description);
    }
    for (kind, value) in claims {
        builder = builder.hint(kind, value);
    }
    if output_schema {
        builder = builder.output_schema_id(format!("mcp:{server_name}/{name}#output"));
    }
    builder.build()
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
