//! The words of a decision: the side-effect ceiling and a tool's effect, why a call is denied,
//! and the decision that carries every reason.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The most a grant lets a tool do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ceiling {
    /// Only tools whose effective `read_only` is true.
    ReadOnly,
    /// Also tools that write, but only where `destructive` is false (additive writes).
    NonDestructive,
    /// Any tool.
    Unrestricted,
}

impl Ceiling {
    /// Whether a tool with this effect is within the ceiling.
    pub const fn permits(self, effect: Effect) -> bool {
        match self {
            Ceiling::ReadOnly => matches!(effect, Effect::Read),
            Ceiling::NonDestructive => !matches!(effect, Effect::DestructiveWrite),
            Ceiling::Unrestricted => true,
        }
    }

    /// As written in policy files: `read-only`, `non-destructive`, `unrestricted`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Ceiling::ReadOnly => "read-only",
            Ceiling::NonDestructive => "non-destructive",
            Ceiling::Unrestricted => "unrestricted",
        }
    }
}

impl fmt::Display for Ceiling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a tool may do to its environment, from its effective hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// Read-only.
    Read,
    /// Writes, additively (`destructive` is false).
    Write,
    /// Writes that may destroy.
    DestructiveWrite,
}

impl Effect {
    /// The effect of a tool with these effective hints.
    pub const fn of(read_only: bool, destructive: bool) -> Effect {
        if read_only {
            Effect::Read
        } else if destructive {
            Effect::DestructiveWrite
        } else {
            Effect::Write
        }
    }
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::DestructiveWrite => "destructive write",
        })
    }
}

/// Why a call is denied. A decision carries every reason that applies.
///
/// Serialized with a `reason` tag (`{"reason": "ceiling_exceeded", "ceiling": "read-only",
/// "effect": "destructive-write"}`), so audit trails and other programs can read it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum DenyReason {
    /// The role is not in the policy. An unknown role is denied, never defaulted.
    UnknownRole {
        /// The role asked for.
        role: String,
    },
    /// No `allow` pattern of the role matches the tool: nothing matching means deny.
    NotAllowed,
    /// A `deny` pattern matches the tool. Deny beats allow.
    DeniedByPattern {
        /// The first matching pattern.
        pattern: String,
    },
    /// The tool's effect is above the grant's ceiling.
    CeilingExceeded {
        /// The grant's ceiling.
        ceiling: Ceiling,
        /// The tool's effect.
        effect: Effect,
    },
    /// The grant is for closed-world tools only and the tool reaches an open world.
    OpenWorld,
    /// The grant lacks scopes the tool requires.
    MissingScopes {
        /// The missing scopes, sorted.
        scopes: Vec<String>,
    },
    /// An authority grant, or one it was attenuated from, is revoked.
    Revoked {
        /// The revoked grant's id.
        grant: String,
    },
    /// The tool was not shown to this caller for a reason of the tool list itself, not of the
    /// rules: its descriptor drifted from its pin, its name is listed twice, or the server does
    /// not list it. A call of it is refused and recorded with this reason.
    Withheld {
        /// Why it was not shown.
        why: String,
    },
    /// Whether a grant of the chain is revoked cannot be known: the revocation store could not
    /// be reached, so no grant is believed.
    RevocationsUnavailable {
        /// What went wrong.
        error: String,
    },
    /// An authority grant, or one it was attenuated from, has expired.
    Expired {
        /// The expired grant's id.
        grant: String,
        /// Its expiry, in seconds since the Unix epoch.
        at: u64,
    },
    /// The caller has no role: no credential was presented, or one that gives no role. It is
    /// refused everything, before any rule is asked.
    NoRole,
    /// The role does not let this server send its client this request (sampling, elicitation,
    /// roots): a policy's `server_requests` does not name it.
    ServerRequestNotAllowed {
        /// The request's MCP method (`sampling/createMessage`, ...).
        method: String,
    },
    /// What is asked cannot be decided safely (a resource URI that is encoded twice or holds a
    /// control character, an input nested too deep): refused whatever the rules say.
    Undecidable {
        /// Why.
        why: String,
    },
    /// The edge refused the caller's credentials before any rule was asked: no token, an
    /// expired one, one for another audience or issuer, a bad signature, one that gives no role
    /// or several.
    Unauthenticated {
        /// Why.
        why: String,
    },
    /// The edge refused the request for its limits (a caller's rate, its sessions), before any
    /// rule was asked.
    Limited {
        /// Which limit, and when to try again.
        why: String,
    },
    /// The role may call the tool only with a human's approval of exactly this call (a
    /// policy's `approve` patterns), and none came: the call was not forwarded, and a proposal
    /// was made for an approver to sign.
    ApprovalRequired {
        /// The proposal's id (`capability approve` signs it; the retried call finds it).
        proposal: String,
    },
    /// The call came with an approval, and the approval does not hold for it: an unknown
    /// approver, a bad signature, another audience, tool or server, changed arguments, a
    /// changed descriptor, expired, or used before.
    ApprovalRefused {
        /// Why.
        why: String,
    },
    /// One grant of an authority grant's chain denies the call, for the reason `because` (one
    /// of the reasons above, from the same decision a role gets).
    Grant {
        /// The id of the grant that denies.
        grant: String,
        /// What its rules said.
        because: Box<DenyReason>,
    },
}

impl DenyReason {
    /// A reason given by the rules of the authority grant `grant`.
    pub fn in_grant(grant: &str, reason: DenyReason) -> DenyReason {
        DenyReason::Grant {
            grant: grant.to_owned(),
            because: Box::new(reason),
        }
    }

    /// The reason, worded for the kind of decider whose rules gave it.
    fn describe(&self, f: &mut fmt::Formatter<'_>, whose: Whose) -> fmt::Result {
        let grant = matches!(whose, Whose::Grant);
        match self {
            DenyReason::UnknownRole { role } => write!(f, "role `{role}` is not in the policy"),
            DenyReason::NotAllowed if grant => f.write_str("its pattern does not cover the tool"),
            DenyReason::NotAllowed => f.write_str("no `allow` pattern of the role matches it"),
            DenyReason::DeniedByPattern { pattern } => {
                write!(f, "it matches the `deny` pattern `{pattern}`")
            }
            DenyReason::CeilingExceeded { ceiling, effect } => {
                let whose = if grant { "the" } else { "the role's" };
                write!(
                    f,
                    "its side effect ({effect}) exceeds {whose} ceiling ({ceiling})"
                )
            }
            DenyReason::OpenWorld => {
                f.write_str("it reaches an open world and the grant is closed-world only")
            }
            DenyReason::MissingScopes { scopes } => {
                let scopes: Vec<String> = scopes.iter().map(|s| format!("`{s}`")).collect();
                write!(f, "missing scopes {}", scopes.join(", "))
            }
            DenyReason::Revoked { grant } => write!(f, "grant {grant} is revoked"),
            DenyReason::Withheld { why } => write!(f, "the tool was not shown: {why}"),
            DenyReason::RevocationsUnavailable { error } => write!(
                f,
                "revocations cannot be checked, so no grant is believed: {error}"
            ),
            DenyReason::Expired { grant, at } => write!(f, "grant {grant} expired at {at}"),
            DenyReason::NoRole => f.write_str(
                "the caller has no role (no credential, or one that gives no role), so it is \
                 refused everything",
            ),
            DenyReason::ServerRequestNotAllowed { method } => write!(
                f,
                "the role does not let the server send `{method}` to its client (the policy's \
                 `server_requests` does not name it)"
            ),
            DenyReason::Undecidable { why } => write!(f, "it cannot be decided safely: {why}"),
            DenyReason::Unauthenticated { why } => {
                write!(f, "the caller is not authenticated: {why}")
            }
            DenyReason::Limited { why } => write!(f, "refused by the edge's limits: {why}"),
            DenyReason::ApprovalRequired { proposal } => write!(
                f,
                "it needs a human's approval of exactly this call; proposal {proposal} awaits \
                 one (`capability approve`)"
            ),
            DenyReason::ApprovalRefused { why } => write!(f, "its approval does not hold: {why}"),
            DenyReason::Grant { grant, because } => {
                write!(f, "grant {grant}: ")?;
                because.describe(f, Whose::Grant)
            }
        }
    }
}

/// Whose rules gave a reason: a role's (of a policy or a [`ToolContext`](super::ToolContext)),
/// or an authority grant's.
#[derive(Clone, Copy)]
enum Whose {
    Role,
    Grant,
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.describe(f, Whose::Role)
    }
}

/// The answer for one role and one tool: allowed, or denied with every reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Decision {
    reasons: Vec<DenyReason>,
}

impl Decision {
    /// Whether the call may go ahead.
    pub fn is_allowed(&self) -> bool {
        self.reasons.is_empty()
    }

    /// Why not (empty when allowed).
    pub fn reasons(&self) -> &[DenyReason] {
        &self.reasons
    }

    /// A denial for one reason.
    pub fn deny(reason: DenyReason) -> Decision {
        Decision {
            reasons: vec![reason],
        }
    }

    /// A decision with these reasons: allowed when there are none.
    pub fn from_reasons(reasons: Vec<DenyReason>) -> Decision {
        Decision { reasons }
    }

    /// The reasons, by value.
    pub fn into_reasons(self) -> Vec<DenyReason> {
        self.reasons
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_allowed() {
            return f.write_str("allowed");
        }
        f.write_str("denied: ")?;
        for (i, reason) in self.reasons.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            reason.fmt(f)?;
        }
        Ok(())
    }
}
