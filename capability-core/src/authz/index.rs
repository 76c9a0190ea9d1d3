//! The policy compiled against one tool list: the fast twin of the one decision
//! ([`rules`](super::rules)), proven equal to it by a property test.

use std::collections::HashMap;

use super::policy::Policy;
use super::rules::{Decision, DenyReason, Effect};
use crate::manifest::CapabilityManifest;

impl Policy {
    /// Compiles the policy against a tool list, for the hot path: patterns are resolved per
    /// tool and role once, scopes are interned as bit sets, and a decision becomes a few bit
    /// operations. [`PolicyIndex::is_allowed`] agrees with [`Policy::decide`] on every pair
    /// (a property test checks it); [`PolicyIndex::decide`] gives the reasons.
    pub fn index<'a>(&'a self, tools: &'a [CapabilityManifest]) -> PolicyIndex<'a> {
        PolicyIndex::new(self, tools)
    }
}

/// A role's position in a [`PolicyIndex`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RoleId(usize);

/// A policy compiled against one tool list. See [`Policy::index`].
///
/// ```
/// use capability::{CapabilityManifest, Policy};
///
/// let policy = Policy::from_toml_str(
///     "[roles.monitor]\nceiling = \"read-only\"\nallow = [\"k8s/*\"]\nscopes = [\"k8s:read\"]\n",
/// )?;
/// let tools = [
///     CapabilityManifest::builder("list_pods").provider("k8s").read_only(true).scope("k8s:read").build()?,
///     CapabilityManifest::builder("restart_pod").provider("k8s").scope("k8s:write").build()?,
/// ];
/// let index = policy.index(&tools);
/// let monitor = index.role("monitor").expect("in the policy");
/// assert!(index.is_allowed(monitor, 0));
/// assert!(!index.is_allowed(monitor, 1));
/// assert_eq!(index.visible(monitor).count(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct PolicyIndex<'a> {
    policy: &'a Policy,
    tools: &'a [CapabilityManifest],
    /// Bit sets are `words` u64s long.
    words: usize,
    roles: Vec<CompiledRole>,
    compiled: Vec<CompiledTool>,
    /// Per tool, `words` words of required scopes; a scope no role holds gets a bit too, so it
    /// can never be satisfied.
    tool_scopes: Vec<u64>,
    /// Per role, `words` words of granted scopes.
    role_scopes: Vec<u64>,
    /// Per tool, one bit per role: the role's patterns admit the tool.
    admitted: Vec<u64>,
}

#[derive(Clone, Copy, Debug)]
struct CompiledRole {
    /// Bit i set when the ceiling permits effect i (read, write, destructive write).
    effects: u8,
    closed_world_only: bool,
}

#[derive(Clone, Copy, Debug)]
struct CompiledTool {
    /// One bit: 1 read, 2 write, 4 destructive write.
    effect: u8,
    open_world: bool,
}

impl<'a> PolicyIndex<'a> {
    fn new(policy: &'a Policy, tools: &'a [CapabilityManifest]) -> Self {
        let mut interned: HashMap<&str, usize> = HashMap::new();
        for role in &policy.roles {
            for scope in &role.rules.scopes {
                let next = interned.len();
                interned.entry(scope.as_str()).or_insert(next);
            }
        }
        for tool in tools {
            for scope in tool.required_scopes() {
                let next = interned.len();
                interned.entry(scope.as_str()).or_insert(next);
            }
        }
        let words = interned.len().div_ceil(64).max(1);
        let set = |bits: &mut [u64], scope: &str| {
            if let Some(&i) = interned.get(scope) {
                bits[i / 64] |= 1 << (i % 64);
            }
        };
        let mut role_scopes = vec![0u64; words * policy.roles.len()];
        let mut roles = Vec::with_capacity(policy.roles.len());
        for (r, role) in policy.roles.iter().enumerate() {
            let role = &role.rules;
            for scope in &role.scopes {
                set(&mut role_scopes[r * words..(r + 1) * words], scope);
            }
            let effects = [Effect::Read, Effect::Write, Effect::DestructiveWrite]
                .iter()
                .enumerate()
                .filter(|(_, e)| role.ceiling.permits(**e))
                .fold(0u8, |acc, (i, _)| acc | (1 << i));
            roles.push(CompiledRole {
                effects,
                closed_world_only: role.closed_world_only,
            });
        }
        let role_words = policy.roles.len().div_ceil(64).max(1);
        let mut tool_scopes = vec![0u64; words * tools.len()];
        let mut admitted = vec![0u64; role_words * tools.len()];
        let mut compiled = Vec::with_capacity(tools.len());
        for (t, tool) in tools.iter().enumerate() {
            for scope in tool.required_scopes() {
                set(&mut tool_scopes[t * words..(t + 1) * words], scope);
            }
            let flags = policy.effective_flags(tool);
            compiled.push(CompiledTool {
                effect: match Effect::of(flags.read_only, flags.destructive) {
                    Effect::Read => 1,
                    Effect::Write => 2,
                    Effect::DestructiveWrite => 4,
                },
                open_world: flags.open_world,
            });
            for (r, role) in policy.roles.iter().enumerate() {
                // The same pattern reading as the decision's: one function for both.
                if role
                    .rules
                    .pattern_reason(tool.provider(), tool.name())
                    .is_none()
                {
                    admitted[t * role_words + r / 64] |= 1 << (r % 64);
                }
            }
        }
        PolicyIndex {
            policy,
            tools,
            words,
            roles,
            compiled,
            tool_scopes,
            role_scopes,
            admitted,
        }
    }

    /// The id of a role; `None` for a role the policy does not have.
    pub fn role(&self, name: &str) -> Option<RoleId> {
        self.policy
            .roles
            .binary_search_by(|r| r.name.as_str().cmp(name))
            .ok()
            .map(RoleId)
    }

    /// Whether `role` may call the tool at this position of the list. Out-of-range positions
    /// are denied.
    #[inline]
    pub fn is_allowed(&self, role: RoleId, tool: usize) -> bool {
        let (Some(r), Some(t)) = (self.roles.get(role.0), self.compiled.get(tool)) else {
            return false;
        };
        let role_words = self.roles.len().div_ceil(64).max(1);
        let admitted = self.admitted[tool * role_words + role.0 / 64] >> (role.0 % 64) & 1 == 1;
        let w = self.words;
        let needed = &self.tool_scopes[tool * w..(tool + 1) * w];
        let granted = &self.role_scopes[role.0 * w..(role.0 + 1) * w];
        admitted
            && r.effects & t.effect != 0
            && !(r.closed_world_only && t.open_world)
            && needed.iter().zip(granted).all(|(n, g)| n & !g == 0)
    }

    /// The full decision, with every reason: the same as [`Policy::decide`].
    pub fn decide(&self, role: RoleId, tool: usize) -> Decision {
        match (self.policy.roles.get(role.0), self.tools.get(tool)) {
            (Some(role), Some(manifest)) => role.rules.decide(&self.policy.assertions, manifest),
            _ => Decision::deny(DenyReason::NotAllowed),
        }
    }

    /// The tools `role` may call, in list order.
    pub fn visible(&self, role: RoleId) -> impl Iterator<Item = &'a CapabilityManifest> + '_ {
        self.tools
            .iter()
            .enumerate()
            .filter(move |(i, _)| self.is_allowed(role, *i))
            .map(|(_, t)| t)
    }
}
