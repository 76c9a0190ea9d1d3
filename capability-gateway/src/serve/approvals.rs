//! Calls held back for a human's approval (a role's `approve` patterns, the policy's
//! `[approvals]` table).
//!
//! A held call without an approval is not forwarded: it is refused on record with a proposal
//! (server, tool, canonical arguments and their digest, descriptor hash, audience, proposer,
//! expiry, the agent's rationale from `_meta["capability/rationale"]`), which the client gets in
//! the error's data and which is written to the proposals directory for approvers
//! (`<id>.json`). The proposal's id is a digest of what it binds (audience, server, tool,
//! descriptor, arguments, proposer), so the same call proposed again is the same proposal, and
//! a retry finds its approval by it.
//!
//! The retried call carries the approval in `_meta["capability/approval"]` (the approval
//! file's JSON, or the approval's id: an approval file of the directory), or the gateway finds
//! `<id>.approval.json` in the directory. The gate checks
//! signature, approver, audience, tool, server (the signed tool type is `mcp:<server>/<tool>`),
//! descriptor hash, the arguments' digest and expiry, then uses the approval up in the shared
//! ledger: once across every gateway process on the same store. What is forwarded is the
//! canonical JSON whose digest the approver signed, parsed again; the approval's id and
//! approver go into the call's records.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ::rmcp::ErrorData;
use serde_json::{Map, Value, json};

use capability::Policy;
use capability::gate::{
    Approval, Clock, PROPOSAL_VERSION, PlanGrant, ProposalFile, PublicKey, RevocationStore,
    SystemClock, WriteGate,
};
use capability_store::{TargetKind, redact_url, target_kind};

/// The `_meta` key of an approval a retried call carries.
pub const APPROVAL_META: &str = "capability/approval";
/// The `_meta` key of the agent's rationale for a held call.
pub const RATIONALE_META: &str = "capability/rationale";
/// The longest rationale kept, in characters.
const MAX_RATIONALE_CHARS: usize = 2_000;

/// What the gateway needs to hold calls back and let approved ones run once.
pub(crate) struct Approvals {
    pub(crate) gate: WriteGate,
    pub(crate) audience: String,
    /// The proposals directory, where approvals are kept for the retried calls.
    pub(crate) dir: Option<PathBuf>,
    grants: Option<PathBuf>,
    pub(crate) revocations: Arc<dyn RevocationStore>,
    /// The store of the ledger, which keeps the proposals too (`capability proposals`).
    pub(crate) store: Option<Arc<dyn capability_store::Store>>,
    proposal_secs: u64,
}

impl Approvals {
    /// From the policy's `[approvals]` table (`None` without one). Paths are relative to the
    /// policy file's directory `base`; the ledger is the table's, or else the `--audit` store
    /// (`audit`), and a gateway without a shared ledger is refused: an approval must not run
    /// twice across processes.
    pub(crate) fn open(
        policy: &Policy,
        base: &Path,
        audit: Option<&str>,
    ) -> Result<Option<Arc<Approvals>>, String> {
        let Some(settings) = policy.approvals() else {
            return Ok(None);
        };
        let relative = |text: &str| {
            let path = Path::new(text);
            if path.is_absolute() {
                path.to_owned()
            } else {
                base.join(path)
            }
        };
        let ledger_target = match (settings.ledger(), audit) {
            (Some(ledger), _) if target_kind(ledger) == TargetKind::Sqlite => {
                relative(ledger).display().to_string()
            }
            (Some(ledger), _) => ledger.to_owned(),
            (None, Some(audit)) if target_kind(audit) != TargetKind::Jsonl => audit.to_owned(),
            (None, _) => {
                return Err(
                    "`[approvals]` needs a ledger every gateway process shares, so that an \
                     approval runs once: set `ledger` to a SQLite file or a PostgreSQL URL, or \
                     give `--audit` a database"
                        .to_owned(),
                );
            }
        };
        let shown = redact_url(&ledger_target);
        if target_kind(&ledger_target) == TargetKind::Jsonl {
            return Err(format!(
                "`[approvals] ledger` {shown} is a JSON Lines file, not a database"
            ));
        }
        let store = shared_store(&ledger_target, &shown)?;
        let mut gate = WriteGate::new(settings.audience(), store.ledger());
        for (name, key) in settings.approvers() {
            let key = PublicKey::from_text(key)
                .map_err(|e| format!("`[approvals]` approver `{name}`: {e}"))?;
            gate = gate.approver(name, key);
        }
        if let Some(max) = settings.max_validity_secs() {
            gate = gate.max_validity(max);
        }
        let dir = settings.proposals().map(relative);
        let grants = settings.grants().map(relative);
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir).map_err(|e| {
                format!(
                    "cannot make the proposals directory `{}`: {e}",
                    dir.display()
                )
            })?;
        }
        Ok(Some(Arc::new(Approvals {
            gate,
            audience: settings.audience().to_owned(),
            dir,
            grants,
            revocations: store.revocations(),
            store: Some(store),
            proposal_secs: settings.proposal_secs(),
        })))
    }

    /// Approvals checked against a ledger in this process's memory (tests of the held path).
    #[cfg(test)]
    fn in_memory(audience: &str, approver: (&str, PublicKey)) -> Approvals {
        Approvals {
            gate: WriteGate::new(audience, capability::gate::MemoryLedger::new())
                .approver(approver.0, approver.1),
            audience: audience.to_owned(),
            dir: None,
            grants: None,
            revocations: Arc::new(capability::gate::MemoryRevocations::default()),
            store: None,
            proposal_secs: 60,
        }
    }

    /// The signed plan grants of the grants directory (`*.grant.json`), each read now, so a
    /// grant added or removed counts at the next call. A file that cannot be read is said and
    /// passed over: it grants nothing.
    pub(crate) fn plan_grants(&self) -> Vec<PlanGrant> {
        files_ending(self.grants.as_deref(), ".grant.json")
            .into_iter()
            .filter_map(|path| {
                let read = std::fs::read_to_string(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|text| PlanGrant::from_json(&text).map_err(|e| e.to_string()));
                read.map_err(|why| {
                    crate::note(format_args!(
                        "the grant file `{}` grants nothing: {why}",
                        path.display()
                    ));
                })
                .ok()
            })
            .collect()
    }

    /// The approval whose id is `approval_id`, among the proposals directory's approval files
    /// (`*.approval.json`), and its file: for a retry that names its approval by id.
    pub(crate) fn approval_by_id(&self, approval_id: &str) -> Option<(Approval, PathBuf)> {
        files_ending(self.dir.as_deref(), ".approval.json")
            .into_iter()
            .find_map(|path| {
                let approval = read_approval(&path).ok()?;
                (approval.id == approval_id).then_some((approval, path))
            })
    }

    /// Forgets a used proposal: its file, its row, and its approval's file when that holds the
    /// approval just used (however the retry brought it), so the next identical call is a new
    /// proposal and not this approval's replay.
    pub(crate) fn used(&self, id: &str, approval_id: &str) {
        if let Some(path) = self.proposal_path(id) {
            let _ = std::fs::remove_file(path);
        }
        if let Some(path) = self.approval_path(id)
            && read_approval(&path).is_ok_and(|kept| kept.id == approval_id)
        {
            let _ = std::fs::remove_file(path);
        }
        if let Some(store) = &self.store
            && let Err(e) = store.drop_proposal(id)
        {
            crate::note(format_args!(
                "the used proposal {id} stays in the store: {e}"
            ));
        }
    }

    pub(crate) fn proposal_path(&self, id: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|dir| dir.join(format!("{id}.json")))
    }

    pub(crate) fn approval_path(&self, id: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|dir| dir.join(format!("{id}.approval.json")))
    }
}

/// An approval file, or why it cannot be read.
pub(crate) fn read_approval(path: &Path) -> Result<Approval, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    Approval::from_json(&text).map_err(|e| e.to_string())
}

/// The files of `dir` whose names end with `suffix`, in name order (none without a directory,
/// or when it cannot be read).
fn files_ending(dir: Option<&Path>, suffix: &str) -> Vec<PathBuf> {
    let Some(entries) = dir.and_then(|dir| std::fs::read_dir(dir).ok()) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    paths.sort();
    paths
}

/// The store at `target`, opened (and migrated) once per process and kept for its life: a
/// reload that names the same ledger shares its connections instead of opening and migrating
/// again.
fn shared_store(target: &str, shown: &str) -> Result<Arc<dyn capability_store::Store>, String> {
    static STORES: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<String, Arc<dyn capability_store::Store>>>,
    > = std::sync::OnceLock::new();
    let mut stores = STORES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(store) = stores.get(target) {
        return Ok(Arc::clone(store));
    }
    let store: Arc<dyn capability_store::Store> = Arc::from(
        capability_store::open(target)
            .map_err(|e| format!("cannot open the approval ledger {shown}: {e}"))?,
    );
    store
        .migrate()
        .map_err(|e| format!("cannot prepare the approval ledger {shown}: {e}"))?;
    stores.insert(target.to_owned(), Arc::clone(&store));
    Ok(store)
}

/// The held call, as a proposal would bind it.
pub(crate) struct Held<'a> {
    pub(crate) server: &'a str,
    pub(crate) tool: &'a str,
    pub(crate) tool_type: String,
    pub(crate) descriptor_hash: &'a str,
    pub(crate) canonical: String,
    pub(crate) args_digest: String,
    pub(crate) proposer: String,
}

impl Held<'_> {
    /// The proposal's id: what it binds, digested (32 hex digits).
    pub(crate) fn id(&self, audience: &str) -> String {
        let bound = json!({
            "audience": audience,
            "server": self.server,
            "tool": self.tool,
            "descriptor_hash": self.descriptor_hash,
            "args_digest": self.args_digest,
            "proposer": self.proposer,
        });
        capability::gate::args_digest(&bound)[..32].to_owned()
    }
}

/// Drops `capability/...` keys from a `_meta` (the server needs none of them).
pub(crate) fn strip_meta(meta: &mut Map<String, Value>) {
    meta.retain(|key, _| !key.starts_with("capability/"));
}

/// The proposal for a held call, written to the proposals directory unless it is there and
/// still waiting (the same call proposed again keeps its first proposal).
pub(crate) fn propose(
    approvals: &Approvals,
    held: &Held<'_>,
    id: &str,
    meta: Option<&Map<String, Value>>,
) -> Result<(ProposalFile, Option<PathBuf>), ErrorData> {
    let now = SystemClock.now();
    let path = approvals.proposal_path(id);
    if let Some(kept) = path
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| ProposalFile::from_json(&text).ok())
        .filter(|kept| kept.expires_at.is_some_and(|at| at > now))
    {
        return Ok((kept, path));
    }
    let rationale: String = meta
        .and_then(|m| m.get(RATIONALE_META))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .take(MAX_RATIONALE_CHARS)
        .collect();
    let args: Value = serde_json::from_str(&held.canonical)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let file = ProposalFile {
        version: PROPOSAL_VERSION,
        tool: held.tool.to_owned(),
        tool_type: held.tool_type.clone(),
        audience: Some(approvals.audience.clone()),
        provider: Some(held.server.to_owned()),
        descriptor_hash: held.descriptor_hash.to_owned(),
        args_digest: held.args_digest.clone(),
        args,
        proposer: held.proposer.clone(),
        rationale,
        created_at: now,
        id: Some(id.to_owned()),
        expires_at: Some(now.saturating_add(approvals.proposal_secs)),
    };
    let text = serde_json::to_string_pretty(&file).unwrap_or_default() + "\n";
    if let Some(store) = &approvals.store {
        let kept = capability_store::KeptProposal {
            id: id.to_owned(),
            audience: approvals.audience.clone(),
            server: held.server.to_owned(),
            tool: held.tool.to_owned(),
            proposer: held.proposer.clone(),
            created_at: now,
            expires_at: file.expires_at.unwrap_or(now),
            body: text.clone(),
        };
        store.keep_proposal(&kept).map_err(|e| {
            ErrorData::internal_error(format!("the proposal could not be kept: {e}"), None)
        })?;
    }
    if let Some(path) = &path {
        // Written whole under another name, then renamed: an approver never reads half a file.
        let partial = path.with_extension("json.partial");
        // Never through a symbolic link someone left at the partial name.
        crate::files::write(&partial, text.as_bytes(), true)
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|e| {
                ErrorData::internal_error(
                    format!(
                        "the proposal could not be written to `{}`: {e}",
                        path.display()
                    ),
                    None,
                )
            })?;
    }
    Ok((file, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use capability::gate::CallTarget;
    use capability::gate::SecretKey;

    fn held(args: &Value) -> Held<'static> {
        let canonical = capability::json::to_canonical_json(args);
        Held {
            server: "git",
            tool: "git_reset",
            tool_type: "mcp:git/git_reset".to_owned(),
            descriptor_hash: "d",
            args_digest: capability::gate::args_digest(args),
            canonical,
            proposer: "role:operator".to_owned(),
        }
    }

    #[test]
    fn a_proposal_id_binds_arguments_proposer_and_audience_not_key_order() {
        let a = held(&json!({"repo_path": "/r", "mode": "hard"}));
        let b = held(&json!({"mode": "hard", "repo_path": "/r"}));
        assert_eq!(a.id("gw"), b.id("gw"));
        assert_ne!(a.id("gw"), a.id("other"));
        assert_ne!(
            a.id("gw"),
            held(&json!({"repo_path": "/s", "mode": "hard"})).id("gw")
        );
        let mut c = held(&json!({"repo_path": "/r", "mode": "hard"}));
        c.proposer = "role:intern".to_owned();
        assert_ne!(a.id("gw"), c.id("gw"));
    }

    #[test]
    fn a_signed_proposal_runs_once_and_binds_the_server() {
        let key = SecretKey::generate().expect("key");
        let approvals = Approvals::in_memory("gw", ("alice", key.public_key()));
        let call = held(&json!({"repo_path": "/r"}));
        let (file, _) = propose(&approvals, &call, &call.id("gw"), None).expect("proposal");
        let now = SystemClock.now();
        let approval = Approval::sign(&file, "alice", "gw", &key, now, now + 60).expect("sign");
        let other_server = CallTarget {
            tool: "git_reset",
            tool_type: "mcp:git2/git_reset",
            descriptor_hash: "d",
            args_digest: &call.args_digest,
            proposer: "role:operator",
        };
        assert!(
            approvals
                .gate
                .approve_call(&other_server, &approval)
                .is_err()
        );
        let target = CallTarget {
            tool_type: "mcp:git/git_reset",
            ..other_server
        };
        // Another caller presenting the operator's approval runs nothing, and uses nothing up.
        let stranger = CallTarget {
            proposer: "role:intern",
            ..target
        };
        assert!(matches!(
            approvals.gate.approve_call(&stranger, &approval),
            Err(capability::gate::GateError::OtherProposer { .. })
        ));
        assert!(approvals.gate.approve_call(&target, &approval).is_ok());
        assert!(approvals.gate.approve_call(&target, &approval).is_err());
    }
}
