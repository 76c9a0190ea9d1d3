//! What a lockfile records of one tool: its hash, a short hash of each part, its flags, the
//! descriptor a human reviewed (so a later change can be compared with it field by field), and
//! a signed re-pin when an approver took a changed descriptor.

use capability_core::manifest::HintKind;
use serde::Deserialize;
use serde_json::Value;

use super::parts::PartHashes;
use super::repin::Repin;

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
