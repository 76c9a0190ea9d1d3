//! The role permission matrix: roles with a ceiling, tool patterns and scopes, and operator
//! assertions about specific tools, loaded from TOML.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use crate::dispatch::{Ceiling, Decision, DenyReason, Effect, RoleRules, ToolContext};
use crate::{Assertion, CapabilityManifest};

/// A role permission matrix (ADR-105 D2).
///
/// Each role has a side-effect ceiling, `allow` and `deny` patterns over `provider/tool` names
/// (globs: `*` matches any run of characters, `/` included; `?` one character), and the scopes
/// it holds. Deny beats allow; a tool that no `allow` pattern matches is denied; an unknown role
/// is denied, never defaulted to another. Operator assertions (`[assertions."provider/tool"]`)
/// say what a specific tool really does, and win over its code or server.
///
/// ```
/// use capability::{CapabilityManifest, Policy};
///
/// let policy = Policy::from_toml_str(r#"
///     version = "2026-11"
///
///     [roles.auditor]
///     ceiling = "read-only"
///     allow = ["*"]
///     deny = ["ssh/*"]
///     scopes = ["k8s:read"]
///
///     [assertions."browser/take_screenshot"]
///     read_only = false      # it writes a file, whatever the server says
/// "#)?;
///
/// let list = CapabilityManifest::builder("list_pods").provider("k8s").read_only(true)
///     .scope("k8s:read").build()?;
/// let restart = CapabilityManifest::builder("restart_pod").provider("k8s")
///     .scope("k8s:write").build()?;
/// assert!(policy.decide("auditor", &list).is_allowed());
/// assert!(!policy.decide("auditor", &restart).is_allowed());
/// assert!(!policy.decide("intern", &list).is_allowed(), "unknown roles are denied");
///
/// let tools = [list, restart];
/// let shown: Vec<&CapabilityManifest> = policy.visible_tools("auditor", &tools);
/// assert_eq!(shown.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Policy {
    version: Option<String>,
    /// Sorted by name.
    roles: Vec<Arc<RoleRules>>,
    assertions: Arc<Assertions>,
}

impl Policy {
    /// Loads a policy from TOML text. A syntax error, an unknown key, a bad value, a bad pattern
    /// or scope: each gives an error with its line and column.
    pub fn from_toml_str(text: &str) -> Result<Policy, PolicyError> {
        let file: PolicyFile = toml::from_str(text).map_err(|error| {
            let at = error.span().map_or(0, |span| span.start);
            PolicyError::at(text, at, error.message().trim_end().to_owned())
        })?;
        let mut roles = Vec::with_capacity(file.roles.len());
        for (name, role) in file.roles {
            let scopes = role
                .scopes
                .iter()
                .map(|scope| {
                    capability_rules::check_scope(scope.get_ref())
                        .map(|()| scope.get_ref().clone())
                        .map_err(|v| PolicyError::at(text, scope.span().start, v.to_string()))
                })
                .collect::<Result<Vec<String>, PolicyError>>()?;
            let patterns = |list: Vec<Spanned<String>>| {
                list.into_iter()
                    .map(|p| {
                        let start = p.span().start;
                        Pattern::new(p.into_inner())
                            .map_err(|message| PolicyError::at(text, start, message))
                    })
                    .collect::<Result<Vec<Pattern>, PolicyError>>()
            };
            roles.push(Arc::new(RoleRules {
                name,
                ceiling: role.ceiling,
                closed_world_only: role.closed_world_only,
                scopes: capability_rules::normalize_scopes(scopes.iter().map(String::as_str)),
                allow: patterns(role.allow)?,
                deny: patterns(role.deny)?,
            }));
        }
        let mut assertions = Assertions::default();
        for (key, assertion) in file.assertions {
            let (provider, name) = match key.get_ref().split_once('/') {
                Some((provider, name)) => (provider, name),
                None => ("", key.get_ref().as_str()),
            };
            let valid = capability_rules::check_tool_name(name).is_ok()
                && (provider.is_empty() || capability_rules::check_provider(provider).is_ok());
            if !valid {
                return Err(PolicyError::at(
                    text,
                    key.span().start,
                    format!(
                        "`{}` does not name a tool; write `provider/tool` or `tool`, \
                         without patterns",
                        key.get_ref()
                    ),
                ));
            }
            assertions
                .by_provider
                .entry(provider.to_owned())
                .or_default()
                .insert(name.to_owned(), assertion);
        }
        Ok(Policy {
            version: file.version,
            roles,
            assertions: Arc::new(assertions),
        })
    }

    /// Loads a policy from a TOML file; errors name the file.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Policy, PolicyError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| PolicyError {
            file: Some(path.display().to_string()),
            line: 0,
            column: 0,
            message: format!("cannot read the policy: {error}"),
        })?;
        Policy::from_toml_str(&text).map_err(|mut error| {
            error.file = Some(path.display().to_string());
            error
        })
    }

    /// The `version` the policy file declares, if any.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The roles, sorted by name.
    pub fn roles(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.roles.iter().map(|r| r.name.as_str())
    }

    fn role(&self, role: &str) -> Option<&Arc<RoleRules>> {
        self.roles
            .binary_search_by(|r| r.name.as_str().cmp(role))
            .ok()
            .map(|i| &self.roles[i])
    }

    /// The one decision function: may `role` call `tool`? Used for listing and for dispatch.
    pub fn decide(&self, role: &str, tool: &CapabilityManifest) -> Decision {
        match self.role(role) {
            Some(rules) => rules.decide(&self.assertions, tool),
            None => Decision::deny(DenyReason::UnknownRole {
                role: role.to_owned(),
            }),
        }
    }

    /// The tools `role` may call, in their order: filter a tool list with this before
    /// converting it to an LLM provider's schema, so a role never sees what it may not call.
    /// An unknown role sees nothing.
    pub fn visible_tools<'t>(
        &self,
        role: &str,
        tools: &'t [CapabilityManifest],
    ) -> Vec<&'t CapabilityManifest> {
        match self.role(role) {
            Some(rules) => tools
                .iter()
                .filter(|tool| rules.decide(&self.assertions, tool).is_allowed())
                .collect(),
            None => Vec::new(),
        }
    }

    /// The grant of `role` for one session, to authorize each call; `None` for an unknown role.
    pub fn context(&self, role: &str, session: impl Into<String>) -> Option<ToolContext> {
        self.role(role).map(|rules| {
            ToolContext::from_policy(
                session.into(),
                Arc::clone(rules),
                Arc::clone(&self.assertions),
            )
        })
    }

    /// The effective hints of a tool, with the operator's assertion about it applied.
    pub(crate) fn effective_flags(&self, tool: &CapabilityManifest) -> capability_rules::Flags {
        self.assertions.flags(tool)
    }

    /// The manifest as the policy sees it: with the operator's assertion about it applied, if
    /// there is one.
    pub fn effective_manifest(&self, tool: &CapabilityManifest) -> CapabilityManifest {
        match self.assertions.get(tool.provider(), tool.name()) {
            Some(assertion) => tool.with_assertion(assertion),
            None => tool.clone(),
        }
    }
}

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
            for scope in &role.scopes {
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
                if role.admits(tool.provider(), tool.name()) {
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
            (Some(rules), Some(manifest)) => rules.decide(&self.policy.assertions, manifest),
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

/// The line and column (both from 1, the column in characters) of a byte offset.
pub(crate) fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// A policy file that could not be loaded: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError {
    file: Option<String>,
    line: usize,
    column: usize,
    message: String,
}

impl PolicyError {
    fn at(text: &str, offset: usize, message: String) -> PolicyError {
        let (line, column) = position(text, offset);
        PolicyError {
            file: None,
            line,
            column,
            message,
        }
    }

    /// The line (from 1), or 0 when the file could not be read.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The column (from 1, in characters), or 0 when the file could not be read.
    pub fn column(&self) -> usize {
        self.column
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.as_deref().unwrap_or("policy");
        if self.line == 0 {
            write!(f, "{file}: {}", self.message)
        } else {
            write!(f, "{file}:{}:{}: {}", self.line, self.column, self.message)
        }
    }
}

impl std::error::Error for PolicyError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    version: Option<String>,
    #[serde(default)]
    roles: BTreeMap<String, RoleFile>,
    #[serde(default)]
    assertions: BTreeMap<Spanned<String>, Assertion>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleFile {
    ceiling: Ceiling,
    #[serde(default)]
    closed_world_only: bool,
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    #[serde(default)]
    scopes: Vec<Spanned<String>>,
}

/// Operator assertions, by provider (empty for none) and tool name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Assertions {
    by_provider: HashMap<String, HashMap<String, Assertion>>,
}

impl Assertions {
    /// A tool's effective hints, with the assertion about it (if any) applied.
    pub(crate) fn flags(&self, tool: &CapabilityManifest) -> capability_rules::Flags {
        match self.get(tool.provider(), tool.name()) {
            Some(assertion) => {
                let mut stated = tool.data.hints().stated();
                assertion.apply(&mut stated);
                crate::hints::Hints::resolve(stated).flags()
            }
            None => tool.data.hints().flags(),
        }
    }

    pub(crate) fn get(&self, provider: Option<&str>, name: &str) -> Option<&Assertion> {
        if self.by_provider.is_empty() {
            return None;
        }
        self.by_provider.get(provider.unwrap_or(""))?.get(name)
    }
}

/// A glob over `provider/tool`: `*` matches any run of characters (`/` included), `?` one.
/// The patterns of policy files and authority grants.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Pattern {
    text: String,
}

impl Pattern {
    /// Checks and builds a pattern: `provider/tool` made of `A-Z a-z 0-9 _ - .` with `*` and
    /// `?` as wildcards, at most one `/`.
    pub fn new(text: String) -> Result<Pattern, String> {
        let ok_char = |c: char| c.is_ascii_alphanumeric() || "_-./*?".contains(c);
        if text.is_empty() {
            return Err("a tool pattern cannot be empty; use `*` for every tool".to_owned());
        }
        if let Some(c) = text.chars().find(|c| !ok_char(*c)) {
            return Err(format!(
                "tool pattern `{text}` contains {c:?}; a pattern is `provider/tool` made of \
                 `A-Z a-z 0-9 _ - .` with `*` and `?` as wildcards"
            ));
        }
        if text.matches('/').count() > 1 {
            return Err(format!(
                "tool pattern `{text}` has more than one `/`; write `provider/tool`"
            ));
        }
        Ok(Pattern { text })
    }

    /// `*`: every tool.
    pub fn any() -> Pattern {
        Pattern {
            text: "*".to_owned(),
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the pattern matches `provider/name` (or `name` without a provider), without
    /// building that string.
    pub fn matches(&self, provider: Option<&str>, name: &str) -> bool {
        let subject = Subject { provider, name };
        glob(self.text.as_bytes(), &subject)
    }
}

/// `provider/name` seen as one byte string.
struct Subject<'a> {
    provider: Option<&'a str>,
    name: &'a str,
}

impl Subject<'_> {
    fn prefix_len(&self) -> usize {
        self.provider.map_or(0, |p| p.len() + 1)
    }

    fn len(&self) -> usize {
        self.prefix_len() + self.name.len()
    }

    fn at(&self, i: usize) -> u8 {
        match self.provider {
            Some(p) if i < p.len() => p.as_bytes()[i],
            Some(p) if i == p.len() => b'/',
            _ => self.name.as_bytes()[i - self.prefix_len()],
        }
    }
}

/// Iterative wildcard matching with one backtrack point: linear in practice.
fn glob(pattern: &[u8], subject: &Subject<'_>) -> bool {
    let (mut p, mut s) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    let len = subject.len();
    while s < len {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == subject.at(s)) {
            p += 1;
            s += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, s));
            p += 1;
        } else if let Some((star_p, star_s)) = star {
            p = star_p + 1;
            s = star_s + 1;
            star = Some((star_p, star_s + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, provider: Option<&str>, name: &str) -> bool {
        Pattern::new(pattern.to_owned())
            .expect("a valid pattern")
            .matches(provider, name)
    }

    #[test]
    fn globs_over_provider_and_name() {
        assert!(matches("*", Some("k8s"), "list_pods"));
        assert!(matches("*", None, "list_pods"));
        assert!(matches("k8s/*", Some("k8s"), "list_pods"));
        assert!(!matches("k8s/*", Some("k8sx"), "list_pods"));
        assert!(!matches("k8s/*", None, "list_pods"));
        assert!(matches("k8s/restart_*", Some("k8s"), "restart_pod"));
        assert!(!matches("k8s/restart_*", Some("k8s"), "list_pods"));
        assert!(matches("*/exec*", Some("ssh"), "exec_command"));
        assert!(matches("k8s/?et_pod", Some("k8s"), "get_pod"));
        assert!(matches("list_pods", None, "list_pods"));
        assert!(!matches("list_pods", Some("k8s"), "list_pods"));
        assert!(matches("*pods", Some("k8s"), "list_pods"));
        assert!(matches("*s*s*", Some("k8s"), "list_pods"));
        assert!(!matches("*x*", Some("k8s"), "list_pods"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(Pattern::new(String::new()).is_err());
        assert!(Pattern::new("k8s /x".to_owned()).is_err());
        assert!(Pattern::new("a/b/c".to_owned()).is_err());
        assert!(Pattern::new("k8s/[ab]".to_owned()).is_err());
    }

    #[test]
    fn error_positions_are_lines_and_columns() {
        let text = "a = 1\nbb = 2\n  ccc";
        let e = PolicyError::at(text, text.find("ccc").unwrap(), "x".into());
        assert_eq!((e.line(), e.column()), (3, 3));
        let e = PolicyError::at(text, 0, "x".into());
        assert_eq!((e.line(), e.column()), (1, 1));
    }
}
