//! Redaction of what the trail must not store.

use serde_json::Value;

use capability_core::manifest::CapabilityManifest;

use crate::*;

/// The default redaction: each sensitive top-level field of an object input is replaced by its
/// keyed digest, `"hmac-sha256:<HMAC-SHA-256 of its canonical JSON under key>"`
/// ([`DigestKey::digest_json`]). Without the key, the digest confirms no guess of the value.
pub fn redact_sensitive(tool: &CapabilityManifest, key: &DigestKey, input: &mut Value) {
    let Some(object) = input.as_object_mut() else {
        return;
    };
    for field in tool.sensitive_fields() {
        if let Some(value) = object.get_mut(field.as_str()) {
            *value = Value::String(key.digest_json(value));
        }
    }
}
