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
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DenyReason::UnknownRole { role } => write!(f, "role `{role}` is not in the policy"),
            DenyReason::NotAllowed => f.write_str("no `allow` pattern of the role matches it"),
            DenyReason::DeniedByPattern { pattern } => {
                write!(f, "it matches the `deny` pattern `{pattern}`")
            }
            DenyReason::CeilingExceeded { ceiling, effect } => write!(
                f,
                "its side effect ({effect}) exceeds the role's ceiling ({ceiling})"
            ),
            DenyReason::OpenWorld => {
                f.write_str("it reaches an open world and the grant is closed-world only")
            }
            DenyReason::MissingScopes { scopes } => {
                let scopes: Vec<String> = scopes.iter().map(|s| format!("`{s}`")).collect();
                write!(f, "missing scopes {}", scopes.join(", "))
            }
        }
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

/// What one role may do: the rules a decision applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RoleRules {
    pub(crate) name: String,
    pub(crate) ceiling: Ceiling,
    pub(crate) closed_world_only: bool,
    /// Sorted and de-duplicated.
    pub(crate) scopes: Vec<String>,
    pub(crate) allow: Vec<Pattern>,
    pub(crate) deny: Vec<Pattern>,
}

impl RoleRules {
    /// The one decision function: listing ([`Policy::visible_tools`](super::Policy::visible_tools))
    /// and dispatch ([`ToolContext::authorize`](super::ToolContext::authorize), [`Policy::decide`](super::Policy::decide)) all
    /// come here.
    pub(crate) fn decide(&self, assertions: &Assertions, tool: &CapabilityManifest) -> Decision {
        let provider = tool.provider();
        let name = tool.name();
        let mut reasons = Vec::new();
        if let Some(pattern) = self.deny.iter().find(|p| p.matches(provider, name)) {
            reasons.push(DenyReason::DeniedByPattern {
                pattern: pattern.as_str().to_owned(),
            });
        } else if !self.allow.iter().any(|p| p.matches(provider, name)) {
            reasons.push(DenyReason::NotAllowed);
        }
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
}

impl RoleRules {
    /// Whether the role's patterns let the tool through: some `allow` matches, no `deny` does.
    pub(crate) fn admits(&self, provider: Option<&str>, name: &str) -> bool {
        !self.deny.iter().any(|p| p.matches(provider, name))
            && self.allow.iter().any(|p| p.matches(provider, name))
    }
}

/// Whether every element of `needed` is in `granted` (both sorted), without allocating.
fn is_subset(needed: &[String], granted: &[String]) -> bool {
    let mut granted = granted.iter();
    needed
        .iter()
        .all(|scope| granted.by_ref().any(|g| g == scope))
}

/// Operator assertions, by provider (empty for none) and tool name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Assertions {
    by_provider: HashMap<String, HashMap<String, Assertion>>,
}

impl Assertions {
    /// A tool's effective hints, with the assertion about it (if any) applied.
    pub(crate) fn flags(&self, tool: &CapabilityManifest) -> capability_rules::Flags {
        tool.flags_with(self.get(tool.provider(), tool.name()))
    }

    /// Records the operator's assertion about `provider/name` (`""` for no provider).
    pub(crate) fn insert(&mut self, provider: &str, name: &str, assertion: Assertion) {
        self.by_provider
            .entry(provider.to_owned())
            .or_default()
            .insert(name.to_owned(), assertion);
    }

    pub(crate) fn get(&self, provider: Option<&str>, name: &str) -> Option<&Assertion> {
        if self.by_provider.is_empty() {
            return None;
        }
        self.by_provider.get(provider.unwrap_or(""))?.get(name)
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
