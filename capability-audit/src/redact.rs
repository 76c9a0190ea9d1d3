//! Redaction of what the trail must not store.

use serde_json::Value;

use capability_core::manifest::CapabilityManifest;

/// The default redaction: each sensitive top-level field of an object input is replaced by
/// `"sha256:<digest of its canonical JSON>"`.
pub fn redact_sensitive(tool: &CapabilityManifest, input: &mut Value) {
    let Some(object) = input.as_object_mut() else {
        return;
    };
    for field in tool.sensitive_fields() {
        if let Some(value) = object.get_mut(field.as_str()) {
            let digest = capability_rules::sha256_hex(
                capability_core::json::to_canonical_json(value).as_bytes(),
            );
            *value = Value::String(format!("sha256:{digest}"));
        }
    }
}
