//! One live tool against its pin: unchanged, re-pinned, reworded, or changed in a way that
//! introduces something, and with which manifest (claims believed only when approved).

use capability_core::manifest::{CapabilityManifest, HintKind, ManifestError};
use serde_json::Value;

use super::drift::Drift;
use super::locked::LockedTool;
use super::parts::PartHashes;
use super::repin::RepinCheck;
use super::review::DriftStatus;
use crate::import::from_mcp_tool;
use crate::server::{Server, Trust};

/// What a pinned tool's review found.
pub(super) struct Judged {
    pub(super) status: DriftStatus,
    /// The manifest with its claims believed, when the tool is approved.
    pub(super) approved: Option<CapabilityManifest>,
    /// How it differs from the descriptor reviewed last, when the lockfile keeps that one.
    pub(super) drift: Option<Drift>,
}

/// Judges a live tool (whose manifest, read with the server's trust, is `manifest`) against
/// its pin. `accept_wording`: whether the policy accepts a change of wording only.
pub(super) fn judge(
    pin: &LockedTool,
    tool: &Value,
    manifest: &CapabilityManifest,
    server: &Server,
    accept_wording: bool,
) -> Result<Judged, ManifestError> {
    let hash = manifest.descriptor_hash();
    let believed = |flag: &dyn Fn(HintKind) -> bool| -> Result<_, ManifestError> {
        // A human approved exactly this descriptor: its claims count, as pinned claims, when
        // the recorded flags are what they resolve to.
        let pinned = from_mcp_tool(tool, &server.with_trust(Trust::Pinned))?;
        let edited: Vec<HintKind> = HintKind::ALL
            .into_iter()
            .filter(|kind| flag(*kind) != pinned.hint(*kind).effective())
            .collect();
        Ok(if edited.is_empty() {
            Ok(pinned)
        } else {
            Err(DriftStatus::FlagsEdited { flags: edited })
        })
    };
    let judged = |status, approved, drift| Judged {
        status,
        approved,
        drift,
    };
    if pin.hash == hash {
        return Ok(match believed(&|k| pin.flag(k))? {
            Ok(pinned) => judged(DriftStatus::Unchanged, Some(pinned), None),
            Err(edited) => judged(edited, None, None),
        });
    }
    let parts = pin.parts.differing(&PartHashes::of(tool));
    let pinned = pin.descriptor();
    if let Some(repin) = &pin.repin {
        let approver = repin.approver.clone();
        let reviewed = serde_json::from_str::<Value>(&repin.descriptor).ok();
        let drift = reviewed.as_ref().map(|d| Drift::between(d, tool));
        if repin.hash != hash {
            let parts = repin.parts.differing(&PartHashes::of(tool));
            let status = DriftStatus::ChangedAfterReview { approver, parts };
            return Ok(judged(status, None, drift));
        }
        let drift = pinned.as_ref().map(|d| Drift::between(d, tool));
        if repin.check != RepinCheck::Verified {
            let why = repin.check.to_string();
            return Ok(judged(
                DriftStatus::RepinRefused { approver, why },
                None,
                drift,
            ));
        }
        return Ok(match believed(&|k| repin.flag(k))? {
            Ok(pinned) => judged(DriftStatus::Repinned { approver }, Some(pinned), drift),
            Err(edited) => judged(edited, None, drift),
        });
    }
    let Some(pinned) = pinned else {
        return Ok(judged(DriftStatus::Changed { parts }, None, None));
    };
    let drift = Drift::between(&pinned, tool);
    if !drift.is_wording_only() {
        let what = drift.introduces();
        return Ok(judged(
            DriftStatus::Introduces { parts, what },
            None,
            Some(drift),
        ));
    }
    let status = DriftStatus::Reworded {
        parts,
        accepted: accept_wording,
    };
    if !accept_wording {
        return Ok(judged(status, None, Some(drift)));
    }
    // The hints did not change (that would not be wording), so the pinned flags still hold.
    Ok(match believed(&|k| pin.flag(k))? {
        Ok(pinned) => judged(status, Some(pinned), Some(drift)),
        Err(edited) => judged(edited, None, Some(drift)),
    })
}
