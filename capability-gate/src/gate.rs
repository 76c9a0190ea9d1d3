//! The write gate: the only way from a proposal to a mutation.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Mutex, PoisonError};

use capability_core::{Capability, CapabilityManifest};
use serde_json::Value;

use crate::clock::{CLOCK_TOLERANCE_SECS, Clock, SystemClock};
use crate::error::GateError;
use crate::key::PublicKey;
use crate::proposal::{Approval, Proposal};

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
    args: T,
    approval_id: String,
    approver: String,
}

impl<T: Capability> Approved<T> {
    /// The approved arguments.
    pub fn args(&self) -> &T {
        &self.args
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

/// Turns proposals into [`Approved`] ones when every check passes and a known approver signed.
///
/// It holds only the approvers' public keys: an agent process cannot forge an approval.
pub struct WriteGate {
    approvers: HashMap<String, PublicKey>,
    validators: Vec<Box<dyn Check>>,
    preflights: Vec<Box<dyn Check>>,
    clock: Box<dyn Clock>,
    used: Mutex<HashSet<String>>,
    latest: Mutex<u64>,
}

impl fmt::Debug for WriteGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut approvers: Vec<&String> = self.approvers.keys().collect();
        approvers.sort();
        f.debug_struct("WriteGate")
            .field("approvers", &approvers)
            .field("validators", &self.validators.len())
            .field("preflights", &self.preflights.len())
            .finish_non_exhaustive()
    }
}

impl Default for WriteGate {
    fn default() -> Self {
        WriteGate::new()
    }
}

impl WriteGate {
    /// A gate with no approvers (it approves nothing until one is added) and the system clock.
    pub fn new() -> Self {
        WriteGate {
            approvers: HashMap::new(),
            validators: Vec::new(),
            preflights: Vec::new(),
            clock: Box::new(SystemClock),
            used: Mutex::new(HashSet::new()),
            latest: Mutex::new(0),
        }
    }

    /// Trusts this approver's public key.
    pub fn approver(mut self, name: impl Into<String>, key: PublicKey) -> Self {
        self.approvers.insert(name.into(), key);
        self
    }

    /// Adds a validation check.
    pub fn validator(mut self, check: impl Check + 'static) -> Self {
        self.validators.push(Box::new(check));
        self
    }

    /// Adds a preflight check.
    pub fn preflight(mut self, check: impl Check + 'static) -> Self {
        self.preflights.push(Box::new(check));
        self
    }

    /// Uses another clock (tests).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// Approves a proposal, or refuses it and gives it back with the reason. Checks, in
    /// order: the clock did not step back; every validator and preflight passes; an approval is
    /// present, from a known approver, correctly signed, for this tool, these exact arguments
    /// and this descriptor, not expired, and not used before. The approval is then used up.
    pub fn approve<T: Capability>(
        &self,
        proposal: Proposal<T>,
        approval: Option<&Approval>,
    ) -> Result<Approved<T>, Rejected<T>> {
        match self.check(&proposal, approval) {
            Ok(approval) => Ok(Approved {
                args: proposal.args,
                approval_id: approval.id.clone(),
                approver: approval.approver.clone(),
            }),
            Err(error) => Err(Rejected {
                proposal: Box::new(proposal),
                error,
            }),
        }
    }

    fn check<'a, T: Capability>(
        &self,
        proposal: &Proposal<T>,
        approval: Option<&'a Approval>,
    ) -> Result<&'a Approval, GateError> {
        let now = self.clock.now();
        {
            let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
            if now + CLOCK_TOLERANCE_SECS < *latest {
                return Err(GateError::ClockWentBack {
                    now,
                    latest: *latest,
                });
            }
            *latest = (*latest).max(now);
        }
        let manifest = T::manifest();
        let file = &proposal.file;
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
        let Some(approval) = approval else {
            return Err(GateError::Unsigned);
        };
        let Some(key) = self.approvers.get(&approval.approver) else {
            return Err(GateError::UnknownApprover(approval.approver.clone()));
        };
        if !approval.verify(key) {
            return Err(GateError::BadSignature(approval.approver.clone()));
        }
        if approval.tool != manifest.name() {
            return Err(GateError::OtherTool {
                approved: approval.tool.clone(),
                proposed: manifest.name().to_owned(),
            });
        }
        if approval.args_digest != file.args_digest {
            return Err(GateError::ArgumentsChanged);
        }
        if approval.descriptor_hash != manifest.descriptor_hash() {
            return Err(GateError::DescriptorChanged);
        }
        if now >= approval.expires_at {
            return Err(GateError::Expired {
                expired_at: approval.expires_at,
                now,
            });
        }
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        if !used.insert(approval.id.clone()) {
            return Err(GateError::Replay(approval.id.clone()));
        }
        Ok(approval)
    }
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
