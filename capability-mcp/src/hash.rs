//! The descriptor hash of an MCP tool: what a lockfile pins.

use serde_json::{Map, Value};

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
/// assert_eq!(capability::mcp::mcp_descriptor_hash(&a), capability::mcp::mcp_descriptor_hash(&b));
/// ```
pub fn mcp_descriptor_hash(tool: &Value) -> String {
    match tool.as_object() {
        Some(object) => descriptor_hash_of(object),
        None => {
            capability_rules::sha256_hex(capability_core::json::to_canonical_json(tool).as_bytes())
        }
    }
}

fn descriptor_hash_of(object: &Map<String, Value>) -> String {
    // Borrow the fields instead of copying them into a new object (schemas can be large).
    let present = MCP_DESCRIPTOR_FIELDS
        .iter()
        .filter_map(|key| object.get(*key).map(|value| (*key, value)));
    let canonical = capability_core::json::to_canonical_json_object(present);
    capability_rules::sha256_hex(canonical.as_bytes())
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
        let expected = capability_rules::sha256_hex(
            capability_core::json::to_canonical_json(&covered).as_bytes(),
        );
        assert_eq!(mcp_descriptor_hash(&tool), expected);
    }
}
