//! The write gate: the only way from a proposal to a mutation.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use capability_core::{Capability, CapabilityManifest};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::clock::{CLOCK_TOLERANCE_SECS, Clock, SystemClock};
use crate::error::GateError;
use crate::key::PublicKey;
use crate::ledger::{ApprovalLedger, Consumed};
use crate::proposal::{Approval, Proposal, ProposalFile, digest};

/// A proposal the gate approved: the only thing [`Execute::execute`](crate::Execute::execute) accepts.
///
/// It has no public constructor and is not `Clone`, `Default` or `Deserialize`, whatever `T`
/// is: the one way to get one is [`WriteGate::approve`], and it is used up by executing it.
///
/// ```compile_fail,E0451
/// # use capability::{Approved, Capability};
/// #[derive(Capability)]
/// #[capability(destructive)]
/// struct RestartPod;
/// let forged = Approved::<RestartPod> { args: RestartPod };
/// ```
pub struct Approved<T: Capability> {
    /// Deserialized from the signed canonical JSON, and never lent out: nothing can reach it
    /// (through a `RefCell`, a `Cell`, a `Mutex` field) between the gate's check and
    /// [`into_args`](Self::into_args).
    args: T,
    signed: Value,
    approval_id: String,
    approver: String,
}

impl<T: Capability> Approved<T> {
    /// The approved arguments as they were signed (canonical JSON, read back), for logs and
    /// messages. The typed value is only [`into_args`](Self::into_args)'s: a reference to it
    /// would let interior mutability change what executes after the gate checked it.
    pub fn signed_args(&self) -> &Value {
        &self.signed
    }

    /// The approval's unique id.
    pub fn approval_id(&self) -> &str {
        &self.approval_id
    }

    /// Who approved.
    pub fn approver(&self) -> &str {
        &self.approver
    }

    /// Uses the approval up, for the tool's [`Execute::execute`](crate::Execute::execute).
    pub fn into_args(self) -> T {
        self.args
    }
}

impl<T: Capability> fmt::Debug for Approved<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Approved")
            .field("tool", &T::manifest().name())
            .field("approval_id", &self.approval_id)
            .field("approver", &self.approver)
            .finish_non_exhaustive()
    }
}

/// A check on a proposal's arguments before approval (validation, or a preflight such as a
/// limit check or a dry run).
pub trait Check: Send + Sync {
    /// The check's name, for errors.
    fn name(&self) -> &str;
    /// `Ok` to pass; `Err(reason)` to refuse.
    fn check(&self, tool: &CapabilityManifest, args: &Value) -> Result<(), String>;
}

/// Turns proposals into [`Approved`] ones when a known approver signed them for this gate's
/// audience and every check passes.
///
/// It holds only the approvers' public keys: an agent process cannot forge an approval. A gate
/// is made for one audience (an environment, `prod-eu`): approvals signed for another are
/// refused.
pub struct WriteGate {
    audience: String,
    approvers: HashMap<String, PublicKey>,
    validators: Vec<Box<dyn Check>>,
    preflights: Vec<Box<dyn Check>>,
    clock: Box<dyn Clock>,
    max_validity: u64,
    ledger: Arc<dyn ApprovalLedger>,
    latest: Mutex<u64>,
}

impl fmt::Debug for WriteGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut approvers: Vec<&String> = self.approvers.keys().collect();
        approvers.sort();
        f.debug_struct("WriteGate")
            .field("audience", &self.audience)
            .field("approvers", &approvers)
            .field("validators", &self.validators.len())
            .field("preflights", &self.preflights.len())
            .field("max_validity", &self.max_validity)
            .field("ledger", &self.ledger)
            .finish_non_exhaustive()
    }
}

/// The longest an approval may be valid, by default: 24 hours (`capability approve
/// --expires-in` refuses more; a gate can lower or raise its own maximum).
pub const MAX_VALIDITY_SECS: u64 = 24 * 60 * 60;

impl WriteGate {
    /// A gate for one audience (the environment it guards, e.g. `prod-eu`; `capability approve
    /// --audience` names it) that records used approvals in `ledger`, with no approvers (it
    /// approves nothing until one is added), the system clock and a maximum validity of
    /// [`MAX_VALIDITY_SECS`].
    ///
    /// The ledger is what makes an approval run once: every gate of one audience, in every
    /// process, must share it (a SQLite or PostgreSQL ledger from `capability_store`). A
    /// [`MemoryLedger`](crate::MemoryLedger) holds within this process only, and is named for
    /// it, so a gate without a shared ledger is never built by accident.
    pub fn new(audience: impl Into<String>, ledger: impl ApprovalLedger + 'static) -> Self {
        WriteGate {
            audience: audience.into(),
            approvers: HashMap::new(),
            validators: Vec::new(),
            preflights: Vec::new(),
            clock: Box::new(SystemClock),
            max_validity: MAX_VALIDITY_SECS,
            ledger: Arc::new(ledger),
            latest: Mutex::new(0),
        }
    }

    /// The key of the approver `name`, if the gate trusts them.
    pub(crate) fn approver_key(&self, name: &str) -> Option<&PublicKey> {
        self.approvers.get(name)
    }

    /// The ledger of used approvals (and plan grants' uses).
    pub(crate) fn ledger(&self) -> &dyn ApprovalLedger {
        &*self.ledger
    }

    /// The audience this gate accepts approvals for.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// Trusts this approver's public key.
    pub fn approver(mut self, name: impl Into<String>, key: PublicKey) -> Self {
        self.approvers.insert(name.into(), key);
        self
    }

    /// Adds a validation check. It runs only on proposals whose approval is genuine.
    pub fn validator(mut self, check: impl Check + 'static) -> Self {
        self.validators.push(Box::new(check));
        self
    }

    /// Adds a preflight check (a dry run). It runs only on proposals whose approval is
    /// genuine, after the validators.
    pub fn preflight(mut self, check: impl Check + 'static) -> Self {
        self.preflights.push(Box::new(check));
        self
    }

    /// Refuses approvals valid for longer than this many seconds (from issue to expiry).
    pub fn max_validity(mut self, seconds: u64) -> Self {
        self.max_validity = seconds;
        self
    }

    /// Uses another clock (tests).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// Approves a proposal, or refuses it and gives it back with the reason.
    ///
    /// Checks, in order: the clock did not step back; an approval is present, from a known
    /// approver, strictly signed, for this gate's audience, this tool's name and full type,
    /// the arguments' digest (recomputed here) and the tool's descriptor; it was not issued in
    /// the future, is not valid longer than the gate's maximum, and has not expired (against
    /// the latest time the gate has seen, so setting the clock back never revives it); the
    /// signed arguments deserialize into `T`. Only then do the validators and preflights run,
    /// and the approval is used up. The [`Approved`] holds `T` deserialized from exactly the
    /// signed canonical JSON.
    pub fn approve<T>(
        &self,
        proposal: Proposal<T>,
        approval: Option<&Approval>,
    ) -> Result<Approved<T>, Rejected<T>>
    where
        T: Capability + DeserializeOwned,
    {
        match self.check(&proposal, approval) {
            Ok((args, approval)) => Ok(Approved {
                args,
                signed: proposal.file.args.clone(),
                approval_id: approval.id.clone(),
                approver: approval.approver.clone(),
            }),
            Err(error) => Err(Rejected {
                proposal: Box::new(proposal),
                error,
            }),
        }
    }

    fn check<'a, T: Capability + DeserializeOwned>(
        &self,
        proposal: &Proposal<T>,
        approval: Option<&'a Approval>,
    ) -> Result<(T, &'a Approval), GateError> {
        let (now, latest) = self.now()?;
        let manifest = T::manifest();
        let file = &proposal.file;
        let args_digest = digest(&file.args);
        let bound = CallTarget {
            tool: manifest.name(),
            tool_type: std::any::type_name::<T>(),
            descriptor_hash: manifest.descriptor_hash(),
            args_digest: &args_digest,
            proposer: &file.proposer,
        };
        let approval = self.genuine(&bound, Some(file), approval)?;
        self.in_time(approval, now, latest)?;
        let args: T =
            crate::args::from_canonical(&file.args).map_err(|e| GateError::Malformed {
                what: "the approved arguments".to_owned(),
                why: e.to_string(),
            })?;
        for (kind, checks) in [
            ("validation", &self.validators),
            ("preflight", &self.preflights),
        ] {
            for check in checks {
                if let Err(reason) = check.check(manifest, &file.args) {
                    return Err(GateError::CheckFailed {
                        kind,
                        check: check.name().to_owned(),
                        reason,
                    });
                }
            }
        }
        self.consume(approval)?;
        Ok((args, approval))
    }

    /// Approves one call that is not a typed tool of this program (an MCP server's tool behind
    /// a gateway): the approval must be a known approver's, strictly signed, for this gate's
    /// audience, exactly `target`'s tool name, type (a gateway writes `mcp:<server>/<tool>`, so
    /// the server is bound too), descriptor hash, arguments' digest and proposer (the caller:
    /// an approval of someone else's proposal is refused), in time; then it is used up in the
    /// ledger. What the caller then runs must be the arguments whose canonical
    /// JSON has `target.args_digest`.
    ///
    /// The gate's validators and preflights take a typed tool's manifest, so they cannot run
    /// here: a gate that has any refuses every call rather than skip them.
    ///
    /// ```
    /// use capability::gate::{Approval, CallTarget, GateError, MemoryLedger, ProposalFile,
    ///     SecretKey, WriteGate, args_digest, PROPOSAL_VERSION};
    /// use serde_json::json;
    ///
    /// let key = SecretKey::generate()?;
    /// let gate = WriteGate::new("gw", MemoryLedger::new()).approver("alice", key.public_key());
    /// let args = json!({"repo_path": "/srv/repo", "mode": "hard"});
    /// let digest = args_digest(&args);
    /// let proposal = ProposalFile {
    ///     version: PROPOSAL_VERSION, tool: "git_reset".into(), tool_type: "mcp:git/git_reset".into(),
    ///     audience: Some("gw".into()), provider: Some("git".into()), descriptor_hash: "d".repeat(64),
    ///     args_digest: digest.clone(), args, proposer: "agent".into(), rationale: String::new(),
    ///     created_at: 0, id: None, expires_at: None,
    /// };
    /// let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    /// let approval = Approval::sign(&proposal, "alice", "gw", &key, now, now + 600)?;
    /// let target = CallTarget { tool: "git_reset", tool_type: "mcp:git/git_reset",
    ///     descriptor_hash: &proposal.descriptor_hash, args_digest: &digest, proposer: "agent" };
    /// // Another caller that learnt the approval cannot run it.
    /// let stranger = CallTarget { proposer: "intern", ..target };
    /// assert!(matches!(gate.approve_call(&stranger, &approval), Err(GateError::OtherProposer { .. })));
    /// gate.check_call(&target, &approval)?; // would be accepted; not used up
    /// assert_eq!(gate.approve_call(&target, &approval)?.approver, "alice");
    /// assert!(matches!(gate.approve_call(&target, &approval), Err(GateError::Replay(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn approve_call(
        &self,
        target: &CallTarget<'_>,
        approval: &Approval,
    ) -> Result<ApprovedCall, GateError> {
        self.check_call(target, approval)?;
        self.consume(approval)?;
        Ok(ApprovedCall {
            approval_id: approval.id.clone(),
            approver: approval.approver.clone(),
        })
    }

    /// The checks of [`approve_call`](WriteGate::approve_call), without using the approval up.
    pub fn check_call(
        &self,
        target: &CallTarget<'_>,
        approval: &Approval,
    ) -> Result<(), GateError> {
        if let Some(check) = self.validators.iter().chain(&self.preflights).next() {
            return Err(GateError::CheckFailed {
                kind: "validation",
                check: check.name().to_owned(),
                reason: "a check of typed arguments cannot run on an untyped call, so the gate \
                         approves no such call"
                    .to_owned(),
            });
        }
        let (now, latest) = self.now()?;
        let approval = self.genuine(target, None, Some(approval))?;
        self.in_time(approval, now, latest)
    }

    /// The clock now, and the latest time the gate has seen (refused when the clock stepped
    /// back further than the tolerance).
    pub(crate) fn now(&self) -> Result<(u64, u64), GateError> {
        let now = self.clock.now();
        let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        if now + CLOCK_TOLERANCE_SECS < *latest {
            return Err(GateError::ClockWentBack {
                now,
                latest: *latest,
            });
        }
        *latest = (*latest).max(now);
        Ok((now, *latest))
    }

    /// Uses the approval up. Last: an approval refused for any other reason is not used up.
    fn consume(&self, approval: &Approval) -> Result<(), GateError> {
        match self.ledger.consume(&approval.id, approval.expires_at) {
            Ok(Consumed::First) => Ok(()),
            Ok(Consumed::Again) => Err(GateError::Replay(approval.id.clone())),
            Err(error) => Err(GateError::LedgerUnavailable(error)),
        }
    }

    /// The approval, if it is a known approver's, strictly signed, and for exactly this gate,
    /// tool and arguments (and, when the proposal is given, what it says too).
    fn genuine<'a>(
        &self,
        bound: &CallTarget<'_>,
        file: Option<&ProposalFile>,
        approval: Option<&'a Approval>,
    ) -> Result<&'a Approval, GateError> {
        let Some(approval) = approval else {
            return Err(GateError::Unsigned);
        };
        // Before the signature: an approval signed before approvals bound their proposer
        // fails it too, and its holder is told why rather than that it is forged.
        if approval.proposer.is_empty() {
            return Err(GateError::NoProposer(approval.id.clone()));
        }
        let Some(key) = self.approvers.get(&approval.approver) else {
            return Err(GateError::UnknownApprover(approval.approver.clone()));
        };
        if !approval.verify(key) {
            return Err(GateError::BadSignature(approval.approver.clone()));
        }
        let file_audience = file.and_then(|f| f.audience.as_ref());
        for audience in [Some(&approval.audience), file_audience]
            .into_iter()
            .flatten()
        {
            if *audience != self.audience {
                return Err(GateError::OtherAudience {
                    audience: audience.clone(),
                    gate: self.audience.clone(),
                });
            }
        }
        if approval.tool != bound.tool {
            return Err(GateError::OtherTool {
                approved: approval.tool.clone(),
                proposed: bound.tool.to_owned(),
            });
        }
        let file_type = file.map(|f| &f.tool_type);
        for approved in [Some(&approval.tool_type), file_type].into_iter().flatten() {
            if approved != bound.tool_type {
                return Err(GateError::OtherType {
                    approved: approved.clone(),
                    proposed: bound.tool_type.to_owned(),
                });
            }
        }
        let file_digest = file.map(|f| &f.args_digest);
        if [Some(&approval.args_digest), file_digest]
            .into_iter()
            .flatten()
            .any(|digest| digest != bound.args_digest)
        {
            return Err(GateError::ArgumentsChanged);
        }
        if approval.descriptor_hash != bound.descriptor_hash {
            return Err(GateError::DescriptorChanged);
        }
        if approval.proposer != bound.proposer {
            return Err(GateError::OtherProposer {
                approved: approval.proposer.clone(),
                caller: bound.proposer.to_owned(),
            });
        }
        Ok(approval)
    }

    /// Whether the approval is valid now: not issued in the future, not valid for longer than
    /// the gate allows, and not expired, neither now nor at the latest time seen.
    fn in_time(&self, approval: &Approval, now: u64, latest: u64) -> Result<(), GateError> {
        self.valid_between(approval.issued_at, approval.expires_at, now, latest)
    }

    /// Whether something signed at `issued_at` and valid until `expires_at` (an approval, a
    /// plan grant) holds now: not issued in the future, not valid longer than the gate
    /// allows, and not expired, neither now nor at the latest time seen.
    pub(crate) fn valid_between(
        &self,
        issued_at: u64,
        expires_at: u64,
        now: u64,
        latest: u64,
    ) -> Result<(), GateError> {
        if issued_at > now.saturating_add(CLOCK_TOLERANCE_SECS) {
            return Err(GateError::IssuedInFuture { issued_at, now });
        }
        let validity = expires_at.saturating_sub(issued_at);
        if validity > self.max_validity {
            return Err(GateError::TooLong {
                validity,
                max: self.max_validity,
            });
        }
        if now.max(latest) >= expires_at {
            return Err(GateError::Expired {
                expired_at: expires_at,
                now,
            });
        }
        Ok(())
    }
}

/// What an approval of a call that is not a typed tool must be bound to
/// ([`WriteGate::approve_call`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallTarget<'a> {
    /// The tool's name, as the approval names it.
    pub tool: &'a str,
    /// What the tool is, beyond its name: a gateway writes `mcp:<server>/<tool>`.
    pub tool_type: &'a str,
    /// The tool's descriptor hash now.
    pub descriptor_hash: &'a str,
    /// SHA-256 of the canonical JSON of the arguments that will run ([`args_digest`](crate::args_digest)).
    pub args_digest: &'a str,
    /// Who makes the call, named as proposals name their proposer (a gateway: `token:<hash>`
    /// over HTTP, `role:<role>` over stdio): an approval given to another proposer is refused.
    pub proposer: &'a str,
}

/// An approval [`WriteGate::approve_call`] accepted, and used up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovedCall {
    /// The approval's id.
    pub approval_id: String,
    /// Who approved.
    pub approver: String,
}

/// A refused proposal, given back with the reason.
pub struct Rejected<T: Capability> {
    /// The proposal, unchanged (boxed: it can be large).
    pub proposal: Box<Proposal<T>>,
    /// Why.
    pub error: GateError,
}

impl<T: Capability> fmt::Debug for Rejected<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}
