//! How an authority grant decides: revocations first, then, for each grant of its chain, the
//! expiry and the one decision of `capability_core::authz` (its pattern, ceiling and scopes,
//! with the operator's assertions applied). [`GrantContext`] makes a grant a decider
//! ([`Authorize`]) for the audited dispatch; [`PolicyDecision`] is a decision as a value.

use std::fmt;

use capability_core::authz::{Assertions, Authorize, Decision, DenyReason, Policy};
use capability_core::manifest::CapabilityManifest;
use serde::{Deserialize, Serialize};

use super::{AuthorityGrant, RevocationStore};
use crate::clock::Clock;

impl AuthorityGrant {
    /// The decision for one tool at time `now` (seconds since the Unix epoch), as a value for
    /// the audit trail. See [`decision`](Self::decision).
    pub fn decide(
        &self,
        tool: &CapabilityManifest,
        now: u64,
        revocations: &dyn RevocationStore,
        assertions: &Assertions,
    ) -> PolicyDecision {
        let decision = self.decision(tool, now, revocations, assertions);
        PolicyDecision {
            allowed: decision.is_allowed(),
            reasons: decision.into_reasons(),
            tool: tool.qualified_name(),
            descriptor_hash: tool.descriptor_hash().to_owned(),
            role: None,
            grant: Some(self.id().to_owned()),
            policy_version: None,
            decided_at: now,
        }
    }

    /// The decision for one tool at time `now`: no grant of the chain may be revoked (asked
    /// first: [`DenyReason::Revoked`]) or expired ([`DenyReason::Expired`]), and each must
    /// allow the tool by the same decision a policy's role gets
    /// ([`Rules::decide`](capability_core::authz::Rules::decide), with `assertions` applied:
    /// pass the policy's, [`Policy::assertions`], so a grant and a role answer alike). A grant's
    /// own reasons name it ([`DenyReason::Grant`]).
    pub fn decision(
        &self,
        tool: &CapabilityManifest,
        now: u64,
        revocations: &dyn RevocationStore,
        assertions: &Assertions,
    ) -> Decision {
        let ids: Vec<&str> = self.chain.iter().map(|c| c.id.as_str()).collect();
        let mut reasons: Vec<DenyReason> = match revocations.revoked_among(&ids) {
            Ok(revoked) => revoked
                .into_iter()
                .map(|grant| DenyReason::Revoked { grant })
                .collect(),
            // Fail-closed: a grant whose revocation cannot be checked is not believed.
            Err(error) => vec![DenyReason::RevocationsUnavailable {
                error: error.to_string(),
            }],
        };
        for c in &self.chain {
            if now >= c.expires_at {
                reasons.push(DenyReason::Expired {
                    grant: c.id.clone(),
                    at: c.expires_at,
                });
            }
            let decided = c.rules.decide(assertions, tool);
            reasons.extend(
                decided
                    .into_reasons()
                    .into_iter()
                    .map(|reason| DenyReason::in_grant(&c.id, reason)),
            );
        }
        Decision::from_reasons(reasons)
    }

    /// This grant as a decider for one session, to pass to an audited dispatch (or anything
    /// that takes an [`Authorize`]): each decision reads the clock, and consults `revocations`
    /// first. Give it the operator assertions of the policy in force
    /// ([`Policy::assertions`]), or [`Assertions::none`].
    ///
    /// ```
    /// use capability::audit::{AuditedDispatch, Caller, MemorySink, Outcome, Verdict};
    /// use capability::authz::{Assertions, Ceiling};
    /// use capability::gate::{AuthorityGrant, MemoryRevocations, SystemClock};
    /// use capability::CapabilityManifest;
    /// use serde_json::json;
    /// use std::sync::Arc;
    ///
    /// let grant = AuthorityGrant::issue("ops-lead", Ceiling::ReadOnly, ["k8s:read"], "k8s/*", u64::MAX)?;
    /// let revocations = MemoryRevocations::new();
    /// let none = Assertions::none();
    /// let ctx = grant.context("session-1", &revocations, &SystemClock, &none);
    /// assert_eq!(ctx.principal(), format!("grant:{}", grant.id()));
    ///
    /// let sink = Arc::new(MemorySink::new());
    /// let dispatch = AuditedDispatch::new(sink.clone());
    /// let list = CapabilityManifest::builder("list_pods").provider("k8s").read_only(true)
    ///     .scope("k8s:read").build()?;
    /// let caller = Caller::new("triage-bot");
    /// let out: Outcome<u32, String> = dispatch.call(&ctx, caller, &list, &json!({}), || Ok(3));
    /// assert!(matches!(out, Outcome::Done(3)));
    /// assert_eq!(sink.records()[0].role, format!("grant:{}", grant.id()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn context<'a>(
        &'a self,
        session: impl Into<String>,
        revocations: &'a dyn RevocationStore,
        clock: &'a dyn Clock,
        assertions: &'a Assertions,
    ) -> GrantContext<'a> {
        GrantContext {
            grant: self,
            principal: format!("grant:{}", self.id()),
            session: session.into(),
            revocations,
            clock,
            assertions,
        }
    }
}

/// An authority grant as a decider ([`Authorize`]) for one session: the grant, the revocation
/// set, a clock and the operator assertions. Made by [`AuthorityGrant::context`].
///
/// Its principal, which the audit trail records as the caller's role, is `grant:<id>` (the
/// grant's id): a record then names the exact grant that authorized or refused the call, and
/// the grant's chain (issuers, ancestors) can be looked up from that id. The agent that made
/// the call is recorded beside it, from the dispatch's caller.
///
/// Its decisions depend on the clock: a grant that expires between listing and calling is
/// denied at the call. Every decision asks the revocation store, so a grant revoked while the
/// context is in use (by this process or, with a shared store, by another) is denied at its
/// next call.
pub struct GrantContext<'a> {
    grant: &'a AuthorityGrant,
    principal: String,
    session: String,
    revocations: &'a dyn RevocationStore,
    clock: &'a dyn Clock,
    assertions: &'a Assertions,
}

impl GrantContext<'_> {
    /// The grant.
    pub fn grant(&self) -> &AuthorityGrant {
        self.grant
    }

    /// `grant:<id>`: who is asking, for the audit trail.
    pub fn principal(&self) -> &str {
        &self.principal
    }
}

impl fmt::Debug for GrantContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrantContext")
            .field("grant", &self.grant.id())
            .field("session", &self.session)
            .field("revocations", &self.revocations)
            .field("assertions", &self.assertions)
            .finish_non_exhaustive()
    }
}

impl Authorize for GrantContext<'_> {
    fn decide(&self, tool: &CapabilityManifest) -> Decision {
        self.grant
            .decision(tool, self.clock.now(), self.revocations, self.assertions)
    }

    fn principal(&self) -> &str {
        &self.principal
    }

    fn session(&self) -> &str {
        &self.session
    }
}

/// A decision as a value, for the audit trail: allow or deny, every reason (typed, as
/// [`DenyReason`]s), and what produced it (a role of a policy and its version, or a grant).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyDecision {
    /// Allowed or not.
    pub allowed: bool,
    /// Every reason to deny (empty when allowed).
    pub reasons: Vec<DenyReason>,
    /// The tool, as `provider/name`.
    pub tool: String,
    /// The tool's descriptor hash.
    pub descriptor_hash: String,
    /// The role, when a policy decided.
    pub role: Option<String>,
    /// The grant, when a grant decided.
    pub grant: Option<String>,
    /// The policy's version, when it has one.
    pub policy_version: Option<String>,
    /// When, in seconds since the Unix epoch.
    pub decided_at: u64,
}

impl PolicyDecision {
    /// A policy's decision for a role, as a value.
    pub fn of_policy(policy: &Policy, role: &str, tool: &CapabilityManifest, now: u64) -> Self {
        let decision = policy.decide(role, tool);
        PolicyDecision {
            allowed: decision.is_allowed(),
            reasons: decision.into_reasons(),
            tool: tool.qualified_name(),
            descriptor_hash: tool.descriptor_hash().to_owned(),
            role: Some(role.to_owned()),
            grant: None,
            policy_version: policy.version().map(str::to_owned),
            decided_at: now,
        }
    }
}
