//! The parts of a tool descriptor that drift is reported on, and a short hash of each.

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

/// The parts of a tool descriptor that drift is reported on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// `title` and `annotations.title`.
    Title,
    /// `description`: the usual vector of tool poisoning.
    Description,
    /// `inputSchema` and `outputSchema`.
    Schema,
    /// `annotations` (the hints).
    Annotations,
}

impl Part {
    /// All parts, in report order.
    pub const ALL: [Part; 4] = [
        Part::Title,
        Part::Description,
        Part::Schema,
        Part::Annotations,
    ];

    /// The part's name in reports and lockfiles.
    pub const fn as_str(self) -> &'static str {
        match self {
            Part::Title => "title",
            Part::Description => "description",
            Part::Schema => "schema",
            Part::Annotations => "annotations",
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Short hashes (16 hex digits) of each part of a tool descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartHashes {
    pub(super) title: String,
    pub(super) description: String,
    pub(super) schema: String,
    pub(super) annotations: String,
}

impl PartHashes {
    /// The part hashes of an MCP tool object.
    pub fn of(tool: &Value) -> PartHashes {
        let field = |key: &str| tool.get(key).cloned().unwrap_or(Value::Null);
        let annotations = field("annotations");
        let title = serde_json::json!([field("title"), annotations.get("title")]);
        let schema = serde_json::json!([field("inputSchema"), field("outputSchema")]);
        let short = |value: &Value| {
            let canonical = capability_core::json::to_canonical_json(value);
            let mut hash = capability_rules::sha256_hex(canonical.as_bytes());
            hash.truncate(16);
            hash
        };
        PartHashes {
            title: short(&title),
            description: short(&field("description")),
            schema: short(&schema),
            annotations: short(&annotations),
        }
    }

    pub(super) fn get(&self, part: Part) -> &str {
        match part {
            Part::Title => &self.title,
            Part::Description => &self.description,
            Part::Schema => &self.schema,
            Part::Annotations => &self.annotations,
        }
    }

    /// The parts that differ.
    pub fn differing(&self, other: &PartHashes) -> Vec<Part> {
        Part::ALL
            .into_iter()
            .filter(|p| self.get(*p) != other.get(*p))
            .collect()
    }
}
