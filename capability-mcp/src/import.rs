//! Manifests of tools from MCP servers: a server's claims, believed only as far as it is trusted.
//!
//! ## Scopes and the descriptor hash in `_meta`
//!
//! A tool may carry `_meta["dev.capability/manifest"] = {"scopes": [..], "descriptorHash": ".."}`
//! ([`MANIFEST_META_KEY`], written by [`to_mcp_tool`](crate::export::to_mcp_tool)). Both are
//! claims of the server, and read by this rule:
//!
//! - **Scopes are a restriction, so they are taken from any server, trusted or not.** A scope
//!   the server says its tool requires can only make a caller's decision stricter (a caller
//!   lacking it is denied), so believing more required scopes is fail-closed. Believing *fewer*
//!   is not, and is never needed: a server can always drop `_meta`, so the scopes it states are
//!   a floor it asks for, never a ceiling on what the operator requires. Scopes an operator
//!   must enforce whatever the server says belong in the policy, not in the server's `_meta`.
//!   `_meta` is outside the descriptor hash, so a lockfile pin does not freeze them either.
//! - **The descriptor hash there is a claim, never a pin.** The manifest's descriptor hash is
//!   always computed from the tool as listed ([`mcp_descriptor_hash`]); the claimed one is only
//!   readable through [`claimed_descriptor_hash`], e.g. to show it to a reviewer. A lockfile's
//!   hash stays what pins a tool.

use capability_core::manifest::{CapabilityManifest, HintKind, ManifestError};
use serde_json::{Map, Value};

use crate::export::MANIFEST_META_KEY;
use crate::hash::mcp_descriptor_hash;
use crate::server::Server;

/// The descriptor hash a tool claims in `_meta` under [`MANIFEST_META_KEY`], if it claims one.
/// A claim only: the hash that pins a tool is computed from the tool itself
/// ([`mcp_descriptor_hash`]) and compared with the lockfile's.
///
/// ```
/// use capability::mcp::import::claimed_descriptor_hash;
/// use serde_json::json;
///
/// let tool = json!({"name": "t", "inputSchema": {"type": "object"},
///                   "_meta": {"dev.capability/manifest": {"descriptorHash": "abc"}}});
/// assert_eq!(claimed_descriptor_hash(&tool), Some("abc"));
/// ```
pub fn claimed_descriptor_hash(tool: &Value) -> Option<&str> {
    tool.get("_meta")?
        .get(MANIFEST_META_KEY)?
        .get("descriptorHash")?
        .as_str()
}

/// The manifest of one tool of an MCP server's `tools/list`.
///
/// Accepts Tool objects of the MCP schema versions 2025-11-25 and 2026-07-28: `name` and
/// `inputSchema` (an object schema) are required; `title`, `description`, `outputSchema`
/// and `annotations` are read, and the required scopes from `_meta` under
/// [`MANIFEST_META_KEY`] (taken whatever the trust: more required scopes only ever deny more;
/// see the [module documentation](self)); anything else (other `_meta` keys, `icons`,
/// `execution`, fields of later versions) is ignored and never affects a decision. The annotations' hints count only when
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
    let scopes = meta_scopes(object, &mut error);
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
    builder = builder.scopes(scopes);
    if output_schema {
        builder = builder.output_schema_id(format!("mcp:{server_name}/{name}#output"));
    }
    builder.build()
}

/// The required scopes under `_meta[MANIFEST_META_KEY].scopes`; a malformed entry is an error
/// (scopes decide calls), a missing one means none.
fn meta_scopes(object: &Map<String, Value>, error: &mut ManifestError) -> Vec<String> {
    let Some(entry) = object
        .get("_meta")
        .and_then(Value::as_object)
        .and_then(|meta| meta.get(MANIFEST_META_KEY))
    else {
        return Vec::new();
    };
    let field = format!("_meta.{MANIFEST_META_KEY}");
    let Some(entry) = entry.as_object() else {
        error.push(field, format!("expected an object, found {}", kind(entry)));
        return Vec::new();
    };
    if let Some(hash) = entry.get("descriptorHash")
        && !hash.is_string()
    {
        error.push(
            format!("{field}.descriptorHash"),
            format!("expected a string, found {}", kind(hash)),
        );
    }
    match entry.get("scopes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let mut scopes = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(scope) => scopes.push(scope.clone()),
                    other => error.push(
                        format!("{field}.scopes[{i}]"),
                        format!("expected a string, found {}", kind(other)),
                    ),
                }
            }
            scopes
        }
        Some(other) => {
            error.push(
                format!("{field}.scopes"),
                format!("expected an array of strings, found {}", kind(other)),
            );
            Vec::new()
        }
    }
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
