//! How a live tool list compares with a lockfile.

use std::fmt;
use std::sync::Arc;

use capability_core::manifest::{CapabilityManifest, HintKind};

use super::parts::Part;
use crate::scan::{Finding, ToolScan};

/// How a live tool compares with the lockfile.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DriftStatus {
    /// Same descriptor as approved.
    Unchanged,
    /// Same name, another descriptor: these parts changed.
    Changed {
        /// The parts that differ (empty only when the name's case or encoding changed).
        parts: Vec<Part>,
    },
    /// A tool the lockfile does not know.
    Added,
    /// The descriptor of a pinned tool, under a new name.
    Renamed {
        /// The pinned name.
        from: String,
    },
    /// Same descriptor as approved, but the lockfile records other effective flags than its
    /// claims resolve to: the lockfile was edited by hand. Its claims are not believed.
    FlagsEdited {
        /// The flags whose recorded value differs, in the order of [`HintKind::ALL`].
        flags: Vec<HintKind>,
    },
}

impl fmt::Display for DriftStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriftStatus::Unchanged => f.write_str("unchanged"),
            DriftStatus::Changed { parts } => {
                let parts: Vec<&str> = parts.iter().map(|p| p.as_str()).collect();
                write!(f, "changed ({})", parts.join(", "))
            }
            DriftStatus::Added => f.write_str("added"),
            DriftStatus::Renamed { from } => write!(f, "renamed from `{from}`"),
            DriftStatus::FlagsEdited { flags } => {
                let flags: Vec<&str> = flags.iter().map(|k| k.key()).collect();
                write!(f, "flags edited in the lockfile ({})", flags.join(", "))
            }
        }
    }
}

/// A live tool, read against the lockfile.
#[derive(Clone, Debug)]
pub struct ReviewedTool {
    pub(super) manifest: CapabilityManifest,
    pub(super) status: DriftStatus,
    pub(super) scan: Arc<ToolScan>,
}

impl ReviewedTool {
    /// Its manifest (claims believed only when unchanged).
    pub fn manifest(&self) -> &CapabilityManifest {
        &self.manifest
    }

    /// How it compares with its pin.
    pub fn status(&self) -> &DriftStatus {
        &self.status
    }

    /// What the [scan](mod@crate::scan) of its descriptor found (a pin does not silence it: a
    /// listing hides a tool with a hard finding, pinned or not).
    pub fn findings(&self) -> &[Finding] {
        self.scan.findings()
    }

    pub(crate) fn scan_shared(&self) -> Arc<ToolScan> {
        self.scan.clone()
    }
}

/// A server's live tool list, read against the lockfile.
#[derive(Clone, Debug)]
pub struct Review {
    pub(super) server: String,
    pub(super) pinned: bool,
    pub(super) tools: Vec<ReviewedTool>,
    pub(super) removed: Vec<String>,
}

impl Review {
    /// The server.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Whether the lockfile has an entry for this server at all.
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }

    /// Every live tool, in the server's order.
    pub fn tools(&self) -> &[ReviewedTool] {
        &self.tools
    }

    /// Pinned tools the server no longer lists (renamed ones excepted), in name order.
    pub fn removed(&self) -> &[String] {
        &self.removed
    }

    /// The tools that may be shown to a role at all: those whose descriptor matches its pin.
    pub fn approved(&self) -> impl Iterator<Item = &CapabilityManifest> {
        self.tools
            .iter()
            .filter(|t| t.status == DriftStatus::Unchanged)
            .map(|t| &t.manifest)
    }

    /// The approved manifests, owned, for a policy's `visible_tools`.
    pub fn approved_manifests(&self) -> Vec<CapabilityManifest> {
        self.approved().cloned().collect()
    }

    /// Whether nothing drifted: every tool unchanged, none removed.
    pub fn is_clean(&self) -> bool {
        self.removed.is_empty()
            && self
                .tools
                .iter()
                .all(|t| t.status == DriftStatus::Unchanged)
    }
}

impl fmt::Display for Review {
    /// The drift, one line per tool that is not unchanged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.pinned {
            return write!(
                f,
                "server `{}` is not in the lockfile: nothing is pinned",
                self.server
            );
        }
        if self.is_clean() {
            return write!(
                f,
                "server `{}`: {} tools, no drift",
                self.server,
                self.tools.len()
            );
        }
        write!(f, "server `{}` drifted from the lockfile:", self.server)?;
        for tool in &self.tools {
            if tool.status != DriftStatus::Unchanged {
                write!(f, "\n  {}: {}", tool.manifest.name(), tool.status)?;
            }
        }
        for name in &self.removed {
            write!(f, "\n  {name}: removed")?;
        }
        Ok(())
    }
}
