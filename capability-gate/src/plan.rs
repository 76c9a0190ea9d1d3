//! Plan-level grants: a human signs, once, that one principal may make a number of calls of the
//! tools a pattern names (within a ceiling and scopes, until an expiry), so that each of those
//! calls needs no approval of its own (ADR 020: plan-level governance against consent fatigue).
//!
//! Each use is counted in the shared ledger: the `k`-th use consumes the ledger id
//! `plan-grant:<id>#<k>`, so of any number of processes exactly `calls` uses succeed, with no
//! table of its own. A revocation (`capability grant revoke`) is read from the shared
//! revocation store at every use.

use capability_core::authz::{Ceiling, Effect, Pattern};
use serde::{Deserialize, Serialize};

use crate::error::GateError;
use crate::gate::WriteGate;
use crate::grant::RevocationStore;
use crate::key::{PublicKey, SecretKey};
use crate::ledger::Consumed;

/// The most calls one plan grant may allow (a use asks the ledger once per use before it, so
/// the last of 1,000 asks 1,000 times: a plan, not a standing permission).
pub const MAX_GRANT_CALLS: u32 = 1_000;

/// A human's signed grant of a number of calls to one principal (`capability grant`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanGrant {
    /// Unique (random).
    pub id: String,
    /// The gate it is for (a gateway's `[approvals] audience`).
    pub audience: String,
    /// Whose calls it covers: a principal's key (`issuer#subject`, `token:...`) or, over
    /// stdio, `role:<role>`.
    pub principal: String,
    /// The `provider/tool` glob of the tools it covers (matched exactly, as `allow` patterns).
    pub tools: String,
    /// The most the covered tools may do.
    pub ceiling: Ceiling,
    /// The scopes it holds: a tool requiring any other is not covered.
    pub scopes: Vec<String>,
    /// How many calls it allows, in all, across every process sharing the ledger.
    pub calls: u32,
    /// Who signed it, as the gate knows them.
    pub issuer: String,
    /// Signed at, in seconds since the Unix epoch.
    pub issued_at: u64,
    /// Valid until, in seconds since the Unix epoch.
    pub expires_at: u64,
    /// Ed25519 signature (hex) over [`PlanGrant::signed_bytes`].
    pub signature: String,
}

/// What a call asks of a plan grant: who calls, which tool, what it does, which scopes it needs.
#[derive(Clone, Copy, Debug)]
pub struct GrantedCall<'a> {
    /// The caller's principal (as [`PlanGrant::principal`] names it).
    pub principal: &'a str,
    /// The tool's server (provider).
    pub provider: &'a str,
    /// The tool's own name.
    pub tool: &'a str,
    /// Its effect, with the operator's assertions applied.
    pub effect: Effect,
    /// The scopes it requires.
    pub scopes: &'a [String],
}

/// One use of a plan grant, counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantUse {
    /// The grant's id.
    pub grant_id: String,
    /// Who signed it.
    pub issuer: String,
    /// Which use this is (from 1).
    pub use_number: u32,
    /// Of how many.
    pub calls: u32,
}

impl PlanGrant {
    /// Signs a grant: what `capability grant` does. Refused for zero calls or more than
    /// [`MAX_GRANT_CALLS`], and for a bad pattern.
    #[allow(clippy::too_many_arguments)] // each field of the grant, named; no builder for one call
    pub fn sign(
        audience: impl Into<String>,
        principal: impl Into<String>,
        tools: impl Into<String>,
        ceiling: Ceiling,
        scopes: Vec<String>,
        calls: u32,
        issuer: impl Into<String>,
        key: &SecretKey,
        issued_at: u64,
        expires_at: u64,
    ) -> Result<PlanGrant, GateError> {
        let malformed = |why: String| GateError::Malformed {
            what: "the grant".to_owned(),
            why,
        };
        if calls == 0 || calls > MAX_GRANT_CALLS {
            return Err(malformed(format!(
                "it must allow 1 to {MAX_GRANT_CALLS} calls, not {calls}"
            )));
        }
        let tools = tools.into();
        Pattern::new(tools.clone()).map_err(malformed)?;
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).map_err(|e| malformed(format!("no randomness available: {e}")))?;
        let mut grant = PlanGrant {
            id: capability_rules::hex::encode(&id),
            audience: audience.into(),
            principal: principal.into(),
            tools,
            ceiling,
            scopes,
            calls,
            issuer: issuer.into(),
            issued_at,
            expires_at,
            signature: String::new(),
        };
        grant.signature = key.sign_hex(&grant.signed_bytes());
        Ok(grant)
    }

    /// What the signature covers: a domain tag and the canonical JSON of every other field.
    pub fn signed_bytes(&self) -> Vec<u8> {
        let fields = serde_json::json!({
            "id": self.id,
            "audience": self.audience,
            "principal": self.principal,
            "tools": self.tools,
            "ceiling": self.ceiling,
            "scopes": self.scopes,
            "calls": self.calls,
            "issuer": self.issuer,
            "issued_at": self.issued_at,
            "expires_at": self.expires_at,
        });
        let mut bytes = b"capability plan grant v1\n".to_vec();
        bytes.extend_from_slice(capability_core::json::to_canonical_json(&fields).as_bytes());
        bytes
    }

    fn verify(&self, key: &PublicKey) -> bool {
        key.verify_hex(&self.signed_bytes(), &self.signature)
    }

    /// Reads a grant file. A key written twice in any object is refused, with its path.
    pub fn from_json(text: &str) -> Result<PlanGrant, GateError> {
        let malformed = |e: serde_json::Error| GateError::Malformed {
            what: "the grant file".to_owned(),
            why: e.to_string(),
        };
        capability_core::json::no_duplicate_keys(text).map_err(malformed)?;
        serde_json::from_str(text).map_err(malformed)
    }

    /// The grant as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Whether the grant is meant for `call` at all (principal, tool pattern, ceiling,
    /// scopes), before its signature and count are checked: how a gate picks the grant to use.
    pub fn covers(&self, call: &GrantedCall<'_>) -> bool {
        self.why_not(call).is_none()
    }

    fn why_not(&self, call: &GrantedCall<'_>) -> Option<String> {
        if self.principal != call.principal {
            return Some(format!(
                "it is for `{}`, not `{}`",
                self.principal, call.principal
            ));
        }
        let matches = Pattern::new(self.tools.clone())
            .is_ok_and(|p| p.matches(Some(call.provider), call.tool));
        if !matches {
            return Some(format!(
                "its pattern `{}` does not cover `{}/{}`",
                self.tools, call.provider, call.tool
            ));
        }
        if !self.ceiling.permits(call.effect) {
            return Some(format!(
                "the tool's effect ({}) exceeds its ceiling ({})",
                call.effect, self.ceiling
            ));
        }
        if let Some(missing) = call.scopes.iter().find(|s| !self.scopes.contains(s)) {
            return Some(format!("it lacks the scope `{missing}`"));
        }
        None
    }
}

impl WriteGate {
    /// Uses a plan grant for one call: it must be a known approver's, strictly signed, for
    /// this gate's audience, cover the call ([`PlanGrant::covers`]), be in time (not valid
    /// longer than the gate's maximum, as an approval) and not
    /// revoked (asked of `revocations` now); then one of its `calls` uses is consumed in the
    /// ledger. The last use consumed, the next call is refused.
    pub fn use_grant(
        &self,
        grant: &PlanGrant,
        call: &GrantedCall<'_>,
        revocations: &dyn RevocationStore,
    ) -> Result<GrantUse, GateError> {
        let refused = |why: String| GateError::CheckFailed {
            kind: "grant",
            check: grant.id.clone(),
            reason: why,
        };
        let Some(key) = self.approver_key(&grant.issuer) else {
            return Err(GateError::UnknownApprover(grant.issuer.clone()));
        };
        if !grant.verify(key) {
            return Err(GateError::BadSignature(grant.issuer.clone()));
        }
        if grant.audience != self.audience() {
            return Err(GateError::OtherAudience {
                audience: grant.audience.clone(),
                gate: self.audience().to_owned(),
            });
        }
        if let Some(why) = grant.why_not(call) {
            return Err(refused(why));
        }
        let (now, latest) = self.now()?;
        self.valid_between(grant.issued_at, grant.expires_at, now, latest)?;
        match revocations.revoked_among(&[grant.id.as_str()]) {
            Ok(revoked) if revoked.is_empty() => {}
            Ok(_) => return Err(refused("it is revoked".to_owned())),
            Err(error) => return Err(GateError::LedgerUnavailable(error)),
        }
        for use_number in 1..=grant.calls {
            let slot = format!("plan-grant:{}#{use_number}", grant.id);
            match self.ledger().consume(&slot, grant.expires_at) {
                Ok(Consumed::First) => {
                    return Ok(GrantUse {
                        grant_id: grant.id.clone(),
                        issuer: grant.issuer.clone(),
                        use_number,
                        calls: grant.calls,
                    });
                }
                Ok(Consumed::Again) => {}
                Err(error) => return Err(GateError::LedgerUnavailable(error)),
            }
        }
        Err(refused(format!(
            "all {} of its calls are used",
            grant.calls
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, SystemClock};
    use crate::grant::MemoryRevocations;
    use crate::ledger::MemoryLedger;

    fn signed(key: &SecretKey, calls: u32) -> PlanGrant {
        let now = SystemClock.now();
        PlanGrant::sign(
            "gw",
            "role:operator",
            "git/git_*",
            Ceiling::NonDestructive,
            vec!["git:write".to_owned()],
            calls,
            "alice",
            key,
            now,
            now + 60,
        )
        .expect("a grant")
    }

    fn call<'a>(principal: &'a str, effect: Effect, scopes: &'a [String]) -> GrantedCall<'a> {
        GrantedCall {
            principal,
            provider: "git",
            tool: "git_commit",
            effect,
            scopes,
        }
    }

    #[test]
    fn a_grant_covers_only_its_principal_tools_ceiling_and_scopes() {
        let key = SecretKey::generate().expect("key");
        let grant = signed(&key, 1);
        let write = ["git:write".to_owned()];
        assert!(grant.covers(&call("role:operator", Effect::Write, &write)));
        assert!(!grant.covers(&call("role:intern", Effect::Write, &write)));
        assert!(!grant.covers(&call("role:operator", Effect::DestructiveWrite, &write)));
        assert!(!grant.covers(&call(
            "role:operator",
            Effect::Write,
            &["git:admin".to_owned()]
        )));
        let other = GrantedCall {
            provider: "k8s",
            ..call("role:operator", Effect::Write, &write)
        };
        assert!(!grant.covers(&other));
    }

    #[test]
    fn a_grant_runs_its_calls_once_each_and_a_forged_or_edited_one_none() {
        let alice = SecretKey::generate().expect("key");
        let mallory = SecretKey::generate().expect("key");
        let gate = WriteGate::new("gw", MemoryLedger::new()).approver("alice", alice.public_key());
        let revocations = MemoryRevocations::new();
        let write = ["git:write".to_owned()];
        let call = call("role:operator", Effect::Write, &write);
        let grant = signed(&alice, 2);
        let uses: Vec<u32> = (0..3)
            .filter_map(|_| gate.use_grant(&grant, &call, &revocations).ok())
            .map(|u| u.use_number)
            .collect();
        assert_eq!(uses, [1, 2]);
        let forged = signed(&mallory, 2);
        assert!(matches!(
            gate.use_grant(&forged, &call, &revocations),
            Err(GateError::BadSignature(_))
        ));
        let mut edited = signed(&alice, 1);
        edited.calls = 1_000;
        assert!(matches!(
            gate.use_grant(&edited, &call, &revocations),
            Err(GateError::BadSignature(_))
        ));
        let now = SystemClock.now();
        let standing = PlanGrant::sign(
            "gw",
            "role:operator",
            "git/git_*",
            Ceiling::NonDestructive,
            vec!["git:write".to_owned()],
            5,
            "alice",
            &alice,
            now,
            now + 400 * 24 * 3600,
        )
        .expect("a grant");
        assert!(matches!(
            gate.use_grant(&standing, &call, &revocations),
            Err(GateError::TooLong { .. })
        ));
        let revoked = signed(&alice, 5);
        revocations.revoke(&revoked.id).expect("revoke");
        assert!(gate.use_grant(&revoked, &call, &revocations).is_err());
        assert!(
            PlanGrant::sign(
                "gw",
                "p",
                "git/*",
                Ceiling::ReadOnly,
                vec![],
                0,
                "a",
                &alice,
                0,
                1
            )
            .is_err()
        );
    }
}
