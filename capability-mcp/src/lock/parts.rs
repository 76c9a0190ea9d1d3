//! What a lockfile records of one tool: its hash, a short hash of each part, its flags, the
//! descriptor a human reviewed (so a later change can be compared with it field by field), and
//! a signed re-pin when an approver took a changed descriptor.

use std::fmt;

use capability_core::manifest::HintKind;
use serde::Deserialize;
use serde_json::Value;

use super::repin::Repin;

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

/// One approved tool.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedTool {
    pub(super) hash: String,
    pub(super) parts: PartHashes,
    pub(super) read_only: bool,
    pub(super) destructive: bool,
    pub(super) idempotent: bool,
    pub(super) open_world: bool,
    /// The pinned descriptor itself (its canonical JSON), absent from lockfiles written before
    /// drift was judged by what it introduces: without it, every change hides the tool.
    #[serde(default)]
    pub(super) descriptor: Option<String>,
    /// A signed re-pin of a changed descriptor, if an approver made one.
    #[serde(default)]
    pub(super) repin: Option<Repin>,
}

impl LockedTool {
    /// The descriptor that was pinned (the fields [`mcp_descriptor_hash`](crate::mcp_descriptor_hash)
    /// covers), when the lockfile keeps it.
    pub fn descriptor(&self) -> Option<Value> {
        self.descriptor
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
    }

    /// The signed re-pin of a changed descriptor, if there is one.
    pub fn repin(&self) -> Option<&Repin> {
        self.repin.as_ref()
    }

    /// The descriptor hash that was approved.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The recorded value of one effective flag.
    pub fn flag(&self, kind: HintKind) -> bool {
        match kind {
            HintKind::ReadOnly => self.read_only,
            HintKind::Destructive => self.destructive,
            HintKind::Idempotent => self.idempotent,
            HintKind::OpenWorld => self.open_world,
        }
    }

    /// The effective flags that were approved: `(read_only, destructive, idempotent,
    /// open_world)`.
    pub fn flags(&self) -> (bool, bool, bool, bool) {
        (
            self.read_only,
            self.destructive,
            self.idempotent,
            self.open_world,
        )
    }
}
