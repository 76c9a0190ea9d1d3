//! Duplicate keys, which `serde_json` takes silently (the last value wins): refused through the
//! one strict reader, `capability_core::json::no_duplicate_keys`.

use crate::*;

/// Why `text` is refused before its content is looked at: a duplicate key at any depth.
pub(super) fn refusal(text: &str) -> Option<ProblemKind> {
    match capability_core::json::no_duplicate_keys(text) {
        Err(error)
            if error
                .to_string()
                .starts_with(capability_core::json::DUPLICATE_KEY) =>
        {
            Some(ProblemKind::DuplicateKey(error.to_string()))
        }
        _ => None,
    }
}
