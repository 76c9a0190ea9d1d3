//! The decision: may this role (or this agent's session) call this tool? One function answers it
//! for listing and for dispatch.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::pattern::Pattern;
use crate::manifest::{Assertion, CapabilityManifest};

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

/// The rules one decider applies: a side-effect ceiling, `allow` and `deny` patterns, the
/// scopes it holds, and whether it is for closed-world tools only. A role of a policy, a
/// [`ToolContext`](super::ToolContext) and each grant of an authority grant's chain are such
/// rules, and [`Rules::decide`] is the one decision all of them go through.
///
/// ```
/// use capability::CapabilityManifest;
/// use capability::authz::{Assertions, Ceiling, DenyReason, Pattern, Rules};
///
/// let rules = Rules::new(Ceiling::ReadOnly)
///     .allow(Pattern::new("k8s/*".to_owned())?)
///     .deny(Pattern::new("k8s/get_secret".to_owned())?)
///     .scopes(["k8s:read"]);
/// let list = CapabilityManifest::builder("list_pods").provider("k8s").read_only(true)
///     .scope("k8s:read").build().map_err(|e| e.to_string())?;
/// assert!(rules.decide(&Assertions::none(), &list).is_allowed());
///
/// let secret = CapabilityManifest::builder("Get_Secret").provider("k8s").read_only(true)
///     .build().map_err(|e| e.to_string())?;
/// assert_eq!(
///     rules.decide(&Assertions::none(), &secret).reasons(),
///     [DenyReason::DeniedByPattern { pattern: "k8s/get_secret".into() }],
/// );
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    pub(crate) ceiling: Ceiling,
    pub(crate) closed_world_only: bool,
    /// Sorted and de-duplicated.
    pub(crate) scopes: Vec<String>,
    pub(crate) allow: Vec<Pattern>,
    pub(crate) deny: Vec<Pattern>,
}

impl Rules {
    /// Rules with this ceiling that allow nothing yet: add [`allow`](Self::allow) patterns.
    pub fn new(ceiling: Ceiling) -> Rules {
        Rules {
            ceiling,
            closed_world_only: false,
            scopes: Vec::new(),
            allow: Vec::new(),
            deny: Vec::new(),
        }
    }

    /// Also allows the tools this pattern matches (exactly: see [`Pattern::matches`]).
    pub fn allow(mut self, pattern: Pattern) -> Rules {
        self.allow.push(pattern);
        self
    }

    /// Denies the tools this pattern catches (loosely: see [`Pattern::denies`]). Deny beats
    /// allow.
    pub fn deny(mut self, pattern: Pattern) -> Rules {
        self.deny.push(pattern);
        self
    }

    /// Also holds these scopes.
    pub fn scopes<I, S>(mut self, scopes: I) -> Rules
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.add_scopes(scopes);
        self
    }

    /// Adds scopes in place, keeping them sorted and de-duplicated.
    pub(crate) fn add_scopes<I, S>(&mut self, scopes: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes.extend(scopes.into_iter().map(Into::into));
        self.scopes.sort();
        self.scopes.dedup();
    }

    /// Allows closed-world tools only (`open_world` false), or lifts that.
    pub fn closed_world_only(mut self, yes: bool) -> Rules {
        self.closed_world_only = yes;
        self
    }

    /// The side-effect ceiling.
    pub fn ceiling(&self) -> Ceiling {
        self.ceiling
    }

    /// The scopes held, sorted.
    pub fn held_scopes(&self) -> &[String] {
        &self.scopes
    }

    /// The one decision: may a caller under these rules call `tool`? Patterns first (deny
    /// beats allow; nothing allowed means deny), then the ceiling against the tool's effect and
    /// the closed world, both with the operator's assertion about the tool applied, then the
    /// scopes. Every reason that applies is given.
    pub fn decide(&self, assertions: &Assertions, tool: &CapabilityManifest) -> Decision {
        let mut reasons = Vec::new();
        reasons.extend(self.pattern_reason(tool.provider(), tool.name()));
        // An operator's assertion about this tool wins over what its code or server said.
        let flags = assertions.flags(tool);
        let effect = Effect::of(flags.read_only, flags.destructive);
        if !self.ceiling.permits(effect) {
            reasons.push(DenyReason::CeilingExceeded {
                ceiling: self.ceiling,
                effect,
            });
        }
        if self.closed_world_only && flags.open_world {
            reasons.push(DenyReason::OpenWorld);
        }
        if !is_subset(tool.required_scopes(), &self.scopes) {
            let missing = tool
                .required_scopes()
                .iter()
                .filter(|s| self.scopes.binary_search(s).is_err())
                .cloned()
                .collect();
            reasons.push(DenyReason::MissingScopes { scopes: missing });
        }
        Decision { reasons }
    }

    /// What the patterns say about `provider/name`: `None` when some `allow` pattern matches
    /// and no `deny` pattern catches it. The decision and the compiled
    /// [`PolicyIndex`](super::PolicyIndex) both ask this, so they cannot read patterns
    /// differently.
    pub(crate) fn pattern_reason(&self, provider: Option<&str>, name: &str) -> Option<DenyReason> {
        if let Some(pattern) = self.deny.iter().find(|p| p.denies(provider, name)) {
            Some(DenyReason::DeniedByPattern {
                pattern: pattern.as_str().to_owned(),
            })
        } else if !self.allow.iter().any(|p| p.matches(provider, name)) {
            Some(DenyReason::NotAllowed)
        } else {
            None
        }
    }
}

/// What one role of a policy may do: its name and its rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RoleRules {
    pub(crate) name: String,
    pub(crate) rules: Rules,
}

/// Whether every element of `needed` is in `granted` (both sorted), without allocating.
fn is_subset(needed: &[String], granted: &[String]) -> bool {
    let mut granted = granted.iter();
    needed
        .iter()
        .all(|scope| granted.by_ref().any(|g| g == scope))
}

/// Operator assertions: what an operator says specific tools really do, whatever their code or
/// server claims (`[assertions."provider/tool"]` in a policy file). Every decision applies
/// them to the tool's hints before comparing its effect with a ceiling: a policy's roles and
/// its [`ToolContext`](super::ToolContext)s, and authority grants given the policy's
/// [`assertions`](super::Policy::assertions), so all of them answer alike for the same tool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assertions {
    by_provider: HashMap<String, HashMap<String, Assertion>>,
}

impl Assertions {
    /// A tool's effective hints, with the assertion about it (if any) applied.
    pub(crate) fn flags(&self, tool: &CapabilityManifest) -> capability_rules::Flags {
        tool.flags_with(self.get(tool.provider(), tool.name()))
    }

    /// No assertions: every tool's hints count as they are.
    pub fn none() -> Assertions {
        Assertions::default()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_provider.values().all(HashMap::is_empty)
    }

    /// The operator's assertion about the tool `provider/name`, if there is one.
    pub fn get(&self, provider: Option<&str>, name: &str) -> Option<&Assertion> {
        if self.by_provider.is_empty() {
            return None;
        }
        self.by_provider.get(provider.unwrap_or(""))?.get(name)
    }

    /// Records the operator's assertion about `provider/name` (`""` for no provider).
    pub(crate) fn insert(&mut self, provider: &str, name: &str, assertion: Assertion) {
        self.by_provider
            .entry(provider.to_owned())
            .or_default()
            .insert(name.to_owned(), assertion);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn subset_of_sorted_lists() {
        assert!(is_subset(&strings(&[]), &strings(&[])));
        assert!(is_subset(&strings(&["b"]), &strings(&["a", "b", "c"])));
        assert!(is_subset(&strings(&["a", "c"]), &strings(&["a", "b", "c"])));
        assert!(!is_subset(
            &strings(&["a", "d"]),
            &strings(&["a", "b", "c"])
        ));
        assert!(!is_subset(&strings(&["a"]), &strings(&[])));
    }

    #[test]
    fn ceilings_order_effects() {
        use Effect::*;
        assert!(Ceiling::ReadOnly.permits(Read));
        assert!(!Ceiling::ReadOnly.permits(Write));
        assert!(Ceiling::NonDestructive.permits(Write));
        assert!(!Ceiling::NonDestructive.permits(DestructiveWrite));
        assert!(Ceiling::Unrestricted.permits(DestructiveWrite));
        assert_eq!(Effect::of(true, true), Read);
        assert_eq!(Effect::of(false, false), Write);
    }
}
