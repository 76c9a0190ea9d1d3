//! The role permission matrix: roles with a ceiling, tool patterns and scopes, and operator
//! assertions about specific tools, loaded from TOML.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use crate::dispatch::{Ceiling, Decision, DenyReason, RoleRules, ToolContext};
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

    /// The manifest as the policy sees it: with the operator's assertion about it applied, if
    /// there is one.
    pub fn effective_manifest(&self, tool: &CapabilityManifest) -> CapabilityManifest {
        match self.assertions.get(tool.provider(), tool.name()) {
            Some(assertion) => tool.with_assertion(assertion),
            None => tool.clone(),
        }
    }
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
        let before = text.get(..offset).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
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
    pub(crate) fn get(&self, provider: Option<&str>, name: &str) -> Option<&Assertion> {
        if self.by_provider.is_empty() {
            return None;
        }
        self.by_provider.get(provider.unwrap_or(""))?.get(name)
    }
}

/// A glob over `provider/tool`: `*` matches any run of characters (`/` included), `?` one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pattern {
    text: String,
}

impl Pattern {
    pub(crate) fn new(text: String) -> Result<Pattern, String> {
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

    pub(crate) fn any() -> Pattern {
        Pattern {
            text: "*".to_owned(),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the pattern matches `provider/name` (or `name` without a provider), without
    /// building that string.
    pub(crate) fn matches(&self, provider: Option<&str>, name: &str) -> bool {
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
