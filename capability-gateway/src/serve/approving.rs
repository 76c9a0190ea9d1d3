//! What the approvals page (`front/http/page/`) does to the calls held for approval
//! (`approvals.rs`): lists the proposals waiting for this gateway; takes an approval given to
//! the gateway, checked by the gate exactly as the call's retry will check it (not used up),
//! and keeps it where the retry finds it (`<id>.approval.json` in the proposals directory);
//! rejects a proposal: forgotten, and its retry told why, once.
//!
//! The gateway never signs anything here: an approval comes signed by its approver, whose
//! secret key the gateway never holds.

use std::path::PathBuf;

use capability::gate::{Approval, CallTarget, Clock, ProposalFile, SystemClock};
use capability_store::KeptProposal;
use serde_json::{Value, json};

use crate::serve::approvals::{Approvals, read_approval};
use crate::serve::gateway::Gateway;

/// The longest rejection reason kept, in characters.
const MAX_REASON_CHARS: usize = 2_000;

/// Why a request of the page is not done.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Undone {
    /// No such proposal waits here (used, rejected, expired, never made, another gateway's).
    NotWaiting(String),
    /// The gate refuses the approval: why.
    Refused(String),
    /// An approval of this proposal is kept already.
    Kept(String),
    /// The store or the proposals directory failed.
    Failed(String),
}

/// A proposal waiting for an approval, as the page shows it.
pub(crate) struct Waiting {
    /// As the store keeps it.
    pub(crate) kept: KeptProposal,
    /// Its file, read (its arguments' digest checked).
    pub(crate) file: ProposalFile,
    /// The approval kept for it, once one was given and until the retry uses it.
    pub(crate) approval: Option<Approval>,
}

impl Approvals {
    /// The proposals waiting for an approval of this gateway (its audience), oldest first. A
    /// kept proposal whose file does not read (edited) is passed over: nobody could sign it.
    pub(crate) fn waiting(&self) -> Result<Vec<Waiting>, String> {
        let Some(store) = &self.store else {
            return Ok(Vec::new());
        };
        let kept = store
            .proposals(SystemClock.now())
            .map_err(|e| format!("the proposals cannot be read: {e}"))?;
        Ok(kept
            .into_iter()
            .filter(|kept| kept.audience == self.audience)
            .filter_map(|kept| {
                let file = ProposalFile::from_json(&kept.body).ok()?;
                let approval = self
                    .approval_path(&kept.id)
                    .and_then(|path| read_approval(&path).ok());
                Some(Waiting {
                    kept,
                    file,
                    approval,
                })
            })
            .collect())
    }

    /// How many proposals wait for this gateway, or `None` when the store cannot say.
    pub(crate) fn pending(&self) -> Option<u64> {
        let kept = self.store.as_ref()?.proposals(SystemClock.now()).ok()?;
        let waiting = kept.iter().filter(|p| p.audience == self.audience).count();
        u64::try_from(waiting).ok()
    }

    fn find(&self, id: &str) -> Result<Waiting, Undone> {
        self.waiting()
            .map_err(Undone::Failed)?
            .into_iter()
            .find(|waiting| waiting.kept.id == id)
            .ok_or_else(|| {
                Undone::NotWaiting(format!(
                    "no proposal `{}` waits here (used, rejected, expired, or never made)",
                    id.escape_debug()
                ))
            })
    }

    /// Takes `approval` of the waiting proposal `id`: the gate checks it as the call's retry
    /// will (signature of a known approver, audience, tool, server, descriptor, arguments,
    /// proposer, time), without using it up, and it is kept as `<id>.approval.json`, where the
    /// retry finds it. Its proposal, for the record.
    pub(crate) fn take(&self, id: &str, approval: &Approval) -> Result<Waiting, Undone> {
        let waiting = self.find(id)?;
        let file = &waiting.file;
        let target = CallTarget {
            tool: &file.tool,
            tool_type: &file.tool_type,
            descriptor_hash: &file.descriptor_hash,
            args_digest: &file.args_digest,
            proposer: &file.proposer,
        };
        self.gate
            .check_call(&target, approval)
            .map_err(|e| Undone::Refused(e.to_string()))?;
        let path = self.approval_path(id).ok_or_else(|| {
            Undone::Failed("the gateway has no proposals directory to keep approvals".to_owned())
        })?;
        keep_new(&path, &(approval.to_json() + "\n"))?;
        Ok(waiting)
    }

    /// Rejects the waiting proposal `id` for `by` (the page's caller), saying `reason`: it is
    /// forgotten (its file, its row, an approval given it), and the call's retry is told so,
    /// once (`<id>.rejection.json`). Its proposal, for the record.
    pub(crate) fn reject(&self, id: &str, by: &str, reason: &str) -> Result<Waiting, Undone> {
        let waiting = self.find(id)?;
        let reason: String = reason.chars().take(MAX_REASON_CHARS).collect();
        let rejection = json!({
            "proposal": id,
            "by": by,
            "reason": reason,
            "at": SystemClock.now(),
        });
        let path = self.rejection_path(id).ok_or_else(|| {
            Undone::Failed("the gateway has no proposals directory to keep rejections".to_owned())
        })?;
        crate::files::write(&path, (rejection.to_string() + "\n").as_bytes(), true)
            .map_err(|e| Undone::Failed(format!("the rejection could not be kept: {e}")))?;
        for path in [self.approval_path(id), self.proposal_path(id)]
            .into_iter()
            .flatten()
        {
            let _ = std::fs::remove_file(path);
        }
        if let Some(store) = &self.store {
            store
                .drop_proposal(id)
                .map_err(|e| Undone::Failed(format!("the proposal stays in the store: {e}")))?;
        }
        Ok(waiting)
    }

    /// Why proposal `id` was rejected, if it was and no retry of its call was told yet: told
    /// once, the rejection forgotten as it is read (the call made again is a new proposal).
    pub(crate) fn rejection(&self, id: &str) -> Option<String> {
        let path = self.rejection_path(id)?;
        let text = std::fs::read_to_string(&path).ok()?;
        let _ = std::fs::remove_file(&path);
        let rejection: Value = serde_json::from_str(&text).ok()?;
        let said = |key: &str| rejection[key].as_str().unwrap_or_default().to_owned();
        Some(format!(
            "proposal {id} was rejected by {} on the approvals page: {}",
            said("by"),
            said("reason")
        ))
    }

    fn rejection_path(&self, id: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|dir| dir.join(format!("{id}.rejection.json")))
    }
}

/// Writes `text` at `path` unless a file is there: written whole beside it, then linked in
/// place (which fails when one is there), so the retry never reads half an approval.
fn keep_new(path: &std::path::Path, text: &str) -> Result<(), Undone> {
    let partial = path.with_extension("json.partial");
    let failed = |e: &dyn std::fmt::Display| {
        Undone::Failed(format!(
            "the approval could not be kept at `{}`: {e}",
            path.display()
        ))
    };
    crate::files::write(&partial, text.as_bytes(), true).map_err(|e| failed(&e))?;
    let linked = std::fs::hard_link(&partial, path);
    let _ = std::fs::remove_file(&partial);
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Undone::Kept(
            "an approval of this proposal is kept already; the call's retry uses it".to_owned(),
        )),
        Err(e) => Err(failed(&e)),
    }
}

impl Gateway {
    /// How many proposals wait for this gateway's approvers (`None` without `[approvals]`, or
    /// when its store cannot say): the metrics' gauge.
    pub(crate) fn pending_proposals(&self) -> Option<u64> {
        self.current().approvals.as_ref()?.pending()
    }
}
