//! The decision: may this role (or this agent's session) call this tool? One function answers it
//! for listing and for dispatch.

use std::collections::HashMap;

pub use super::decision::{Ceiling, Decision, DenyReason, Effect};
use super::items::{Action, ItemPattern, ItemRules};
use super::pattern::Pattern;
use crate::manifest::{Assertion, CapabilityManifest};

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
    /// Resources, prompts, server requests (`items.rs`).
    pub(crate) items: ItemRules,
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
            items: ItemRules::default(),
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

    /// Keeps only the held scopes that are also in `within` (a credential that narrows what
    /// the role holds).
    pub(crate) fn retain_scopes(&mut self, within: &[String]) {
        self.scopes.retain(|scope| within.contains(scope));
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

    /// Also allows reading the resources this pattern matches (see `authz/items.rs`: server
    /// and URI globs; a URI is decided as sent and resolved).
    pub fn allow_resource(mut self, pattern: ItemPattern) -> Rules {
        self.items.resources.push(pattern);
        self
    }

    /// Denies reading the resources this pattern catches.
    pub fn deny_resource(mut self, pattern: ItemPattern) -> Rules {
        self.items.deny_resources.push(pattern);
        self
    }

    /// Also allows getting the prompts this pattern matches.
    pub fn allow_prompt(mut self, pattern: ItemPattern) -> Rules {
        self.items.prompts.push(pattern);
        self
    }

    /// Denies getting the prompts this pattern catches.
    pub fn deny_prompt(mut self, pattern: ItemPattern) -> Rules {
        self.items.deny_prompts.push(pattern);
        self
    }

    /// Lets the servers this pattern matches send the kinds of request it matches
    /// (`server/sampling`, `*/elicitation`, ...) to a caller under these rules.
    pub fn allow_server_requests(mut self, pattern: ItemPattern) -> Rules {
        self.items.server_requests.push(pattern);
        self
    }

    /// The one decision, for any action: a tool by [`Rules::decide`]; a resource, a prompt or
    /// a server's request by the patterns for them (deny beats allow, nothing allowed means
    /// deny; a resource URI is decided as sent and resolved, so `..` and escapes cannot
    /// leave an allowed directory).
    ///
    /// ```
    /// use capability::authz::{Action, Assertions, Ceiling, ItemPattern, Rules};
    ///
    /// let rules = Rules::new(Ceiling::ReadOnly)
    ///     .allow_resource(ItemPattern::new("fs/file:///srv/docs/*")?);
    /// let read = |uri| rules.decide_action(&Assertions::none(), &Action::Resource { server: "fs", uri });
    /// assert!(read("file:///srv/docs/a.md").is_allowed());
    /// assert!(!read("file:///srv/docs/../../etc/passwd").is_allowed());
    /// assert!(!read("file:///srv/docs/%2E%2E/%2e%2e/etc/passwd").is_allowed());
    /// assert!(!read("file:///etc/passwd").is_allowed());
    /// # Ok::<(), String>(())
    /// ```
    pub fn decide_action(&self, assertions: &Assertions, action: &Action<'_>) -> Decision {
        match action {
            Action::CallTool(tool) => self.decide(assertions, tool),
            other => Decision::from_reasons(self.items.deny_reason(other).into_iter().collect()),
        }
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
        Decision::from_reasons(reasons)
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
    /// The tools a call of which needs a human's approval (matched loosely, as `deny`
    /// patterns are: a requirement is not escaped by letter case).
    pub(crate) approve: Vec<Pattern>,
    /// The tools a call of which the client's human may confirm through MCP elicitation (a
    /// weaker consent: nothing is signed), unless an `approve` pattern wants a signature.
    pub(crate) confirm: Vec<Pattern>,
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
