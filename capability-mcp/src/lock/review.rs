//! How a live tool list compares with a lockfile.

use std::fmt;
use std::sync::Arc;

use capability_core::manifest::{CapabilityManifest, HintKind};

use super::drift::Drift;
use super::parts::Part;
use crate::scan::{Finding, ToolScan};

/// How a live tool compares with the lockfile.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DriftStatus {
    /// Same descriptor as approved.
    Unchanged,
    /// Same name, another descriptor: these parts changed. The lockfile keeps no descriptor
    /// to compare with (a version 1 lockfile), so the change is not judged: hidden.
    Changed {
        /// The parts that differ (empty only when the name's case or encoding changed).
        parts: Vec<Part>,
    },
    /// Same name, another descriptor, and the change introduces something: another hint or
    /// schema, a new finding of the scan, a new reference to a tool. Hidden.
    Introduces {
        /// The parts that differ.
        parts: Vec<Part>,
        /// What it introduces, one phrase each ([`Drift::introduces`](super::Drift::introduces)).
        what: Vec<String>,
    },
    /// Same name, the description or a title reworded, nothing else: no new finding, no new
    /// reference to a tool. Approved when the policy accepts wording drift for the server
    /// (`accept_wording_drift`), else hidden.
    Reworded {
        /// The parts that differ (title, description).
        parts: Vec<Part>,
        /// Whether the policy accepts it.
        accepted: bool,
    },
    /// Another descriptor than pinned, which an approver re-pinned, signed, and the server
    /// serves exactly: approved.
    Repinned {
        /// The approver who signed the re-pin.
        approver: String,
    },
    /// The server serves the descriptor of a re-pin whose signature does not check: hidden.
    RepinRefused {
        /// The approver the re-pin names.
        approver: String,
        /// Why it is refused.
        why: String,
    },
    /// A re-pin was signed, but the server changed the tool again after the review: it serves
    /// neither the pinned nor the re-pinned descriptor. Hidden.
    ChangedAfterReview {
        /// The approver who signed the re-pin.
        approver: String,
        /// The parts that differ from the re-pinned descriptor.
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

impl DriftStatus {
    /// The parts that differ from the pin (from the re-pin, after a review), when the status
    /// says; empty otherwise.
    pub fn parts(&self) -> &[Part] {
        match self {
            DriftStatus::Changed { parts }
            | DriftStatus::Introduces { parts, .. }
            | DriftStatus::Reworded { parts, .. }
            | DriftStatus::ChangedAfterReview { parts, .. } => parts,
            _ => &[],
        }
    }

    /// Whether a pinned tool is served with another descriptor than pinned, whatever the
    /// verdict (changed, reworded, re-pinned or not).
    pub fn is_change(&self) -> bool {
        !matches!(
            self,
            DriftStatus::Unchanged
                | DriftStatus::Added
                | DriftStatus::Renamed { .. }
                | DriftStatus::FlagsEdited { .. }
        )
    }

    /// Whether the tool may be shown: unchanged, reworded with the policy's consent, or
    /// re-pinned by an approver.
    pub fn is_approved(&self) -> bool {
        matches!(
            self,
            DriftStatus::Unchanged
                | DriftStatus::Reworded { accepted: true, .. }
                | DriftStatus::Repinned { .. }
        )
    }
}

impl DriftStatus {
    /// Why a tool with this status is withheld, for
    /// [`WithheldReason::Drift`](crate::WithheldReason::Drift).
    pub(crate) fn why_hidden(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriftStatus::Changed { parts } => {
                let parts: Vec<&str> = parts.iter().map(|p| p.as_str()).collect();
                write!(
                    f,
                    "its descriptor changed since it was pinned ({}); pin it again to approve it",
                    parts.join(", ")
                )
            }
            DriftStatus::Added => f.write_str("it is not in the lockfile; pin it to approve it"),
            DriftStatus::Renamed { from } => write!(
                f,
                "it is the pinned tool `{from}` under a new name; pin it again to approve it"
            ),
            DriftStatus::FlagsEdited { flags } => {
                let flags: Vec<&str> = flags.iter().map(|k| k.key()).collect();
                write!(
                    f,
                    "the lockfile records other flags for it ({}) than its pinned descriptor \
                     says; the lockfile was edited: pin it again to approve it",
                    flags.join(", ")
                )
            }
            DriftStatus::Introduces { parts, what } => write!(
                f,
                "its descriptor changed since it was pinned ({}), and the change introduces \
                 what a pin must approve: {}; review it (`capability pin --review`), then pin \
                 it again",
                names(parts),
                what.join("; ")
            ),
            DriftStatus::Reworded { accepted: true, .. } => write!(f, "{self}"),
            DriftStatus::Reworded { parts, .. } => write!(
                f,
                "its {} was reworded since it was pinned (nothing else changed), and the policy \
                 does not accept wording drift for its server (`accept_wording_drift`); review \
                 it, then pin it again",
                names(parts)
            ),
            DriftStatus::ChangedAfterReview { approver, parts } => write!(
                f,
                "it changed again ({}) after `{approver}` reviewed and re-pinned it: the server \
                 no longer serves the descriptor reviewed; review it again",
                names(parts)
            ),
            DriftStatus::RepinRefused { approver, why } => write!(
                f,
                "the server serves the descriptor re-pinned by `{approver}`, but the re-pin is \
                 refused: {why}"
            ),
            DriftStatus::Unchanged | DriftStatus::Repinned { .. } => write!(f, "{self}"),
        }
    }
}

fn names(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for DriftStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriftStatus::Unchanged => f.write_str("unchanged"),
            DriftStatus::Changed { parts } => write!(f, "changed ({})", names(parts)),
            DriftStatus::Introduces { parts, what } => {
                write!(f, "changed ({}): {}", names(parts), what.join("; "))
            }
            DriftStatus::Reworded {
                parts,
                accepted: true,
            } => write!(f, "reworded ({}), accepted by the policy", names(parts)),
            DriftStatus::Reworded { parts, .. } => write!(
                f,
                "changed ({}): wording only, which the policy does not accept \
                 (`accept_wording_drift`)",
                names(parts)
            ),
            DriftStatus::Repinned { approver } => write!(f, "re-pinned by `{approver}`"),
            DriftStatus::RepinRefused { approver, why } => {
                write!(f, "re-pinned by `{approver}`, refused: {why}")
            }
            DriftStatus::ChangedAfterReview { approver, parts } => write!(
                f,
                "changed ({}) again after `{approver}` reviewed and re-pinned it",
                names(parts)
            ),
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
    pub(super) drift: Option<Drift>,
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

    /// How it differs from the descriptor reviewed last (the pin's, or a re-pin's when the
    /// server changed after it), field by field, when the lockfile keeps that descriptor.
    pub fn drift(&self) -> Option<&Drift> {
        self.drift.as_ref()
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

    /// The tools that may be shown to a role at all: those whose descriptor matches its pin,
    /// is an accepted rewording of it, or matches a checked re-pin
    /// ([`DriftStatus::is_approved`]).
    pub fn approved(&self) -> impl Iterator<Item = &CapabilityManifest> {
        self.tools
            .iter()
            .filter(|t| t.status.is_approved())
            .map(|t| &t.manifest)
    }

    /// The tools shown although their descriptor is not the one pinned: accepted rewordings
    /// and re-pins. Each is to be recorded (the gateway writes a notice to its trail).
    pub fn accepted_drift(&self) -> impl Iterator<Item = &ReviewedTool> {
        self.tools
            .iter()
            .filter(|t| t.status.is_approved() && t.status != DriftStatus::Unchanged)
    }

    /// Whether drift hides a tool, or a pinned tool is gone (`capability pin --review` exits 1).
    pub fn hides(&self) -> bool {
        self.hidden_by_drift().next().is_some() || !self.removed.is_empty()
    }

    /// The tools that drift hides.
    pub fn hidden_by_drift(&self) -> impl Iterator<Item = &ReviewedTool> {
        self.tools.iter().filter(|t| !t.status.is_approved())
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
