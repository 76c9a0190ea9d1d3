//! Tool patterns: globs over `provider/tool`, shared by policy roles and authority grants.
//!
//! A pattern matches in one of two ways, chosen so that a mistake in a tool's name can only
//! ever deny more, never allow more:
//!
//! - **as an `allow` pattern** ([`Pattern::matches`]): exactly. Letter case counts, and a
//!   pattern with a provider part (`k8s/list_*`) matches only tools of a provider. A tool that
//!   spells its name differently is simply not allowed (fail-closed).
//! - **as a `deny` pattern** ([`Pattern::denies`]): loosely. Letters match regardless of ASCII
//!   case (`k8s/restart*` denies `K8s/Restart_pod`), and the provider part matches a tool
//!   without a provider (`k8s/restart*` denies a provider-less `restart_pod`). A tool cannot
//!   escape a deny pattern by the case of its name or by dropping its provider.

/// A glob over `provider/tool`: `*` matches any run of characters (`/` included), `?` one.
/// The patterns of policy files and authority grants.
///
/// ```
/// use capability::authz::Pattern;
///
/// let restart = Pattern::new("k8s/restart*".to_owned())?;
/// assert!(restart.matches(Some("k8s"), "restart_pod"));
/// // As an allow pattern it is exact: another case, or no provider, is not allowed.
/// assert!(!restart.matches(Some("K8s"), "Restart_pod"));
/// assert!(!restart.matches(None, "restart_pod"));
/// // As a deny pattern it cannot be escaped that way.
/// assert!(restart.denies(Some("K8s"), "Restart_pod"));
/// assert!(restart.denies(None, "restart_pod"));
/// # Ok::<(), String>(())
/// ```
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

    /// Whether the pattern, as an `allow` pattern, matches `provider/name` (or `name` without
    /// a provider): exactly, letter case included. Builds no string.
    pub fn matches(&self, provider: Option<&str>, name: &str) -> bool {
        glob(
            self.text.as_bytes(),
            &Subject { provider, name },
            Case::Exact,
        )
    }

    /// Whether the pattern, as a `deny` pattern, catches `provider/name`: like
    /// [`matches`](Self::matches), but ASCII letters match regardless of case, and for a tool
    /// without a provider the pattern's provider part (before its `/`) is taken to match, so
    /// only its tool part is compared. A deny pattern is thus never weaker than its `allow`
    /// reading: whatever [`matches`](Self::matches) it, it denies.
    pub fn denies(&self, provider: Option<&str>, name: &str) -> bool {
        let pattern = match (provider, self.text.split_once('/')) {
            (None, Some((_, tool_part))) => tool_part,
            _ => self.text.as_str(),
        };
        glob(pattern.as_bytes(), &Subject { provider, name }, Case::Ascii)
    }
}

/// How letters compare.
#[derive(Clone, Copy)]
enum Case {
    /// Byte for byte.
    Exact,
    /// ASCII letters regardless of case.
    Ascii,
}

impl Case {
    fn eq(self, a: u8, b: u8) -> bool {
        match self {
            Case::Exact => a == b,
            Case::Ascii => a.eq_ignore_ascii_case(&b),
        }
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

/// Whether the glob `pattern` (`*` any run, `?` one character) matches `text`, byte for byte or
/// with ASCII letters regardless of case: the matcher of tool patterns, for the other patterns
/// of a role (resource URIs, prompt names).
pub(crate) fn glob_text(pattern: &str, text: &str, ascii_case: bool) -> bool {
    let case = if ascii_case { Case::Ascii } else { Case::Exact };
    let subject = Subject {
        provider: None,
        name: text,
    };
    glob(pattern.as_bytes(), &subject, case)
}

/// Iterative wildcard matching with one backtrack point: linear in practice.
fn glob(pattern: &[u8], subject: &Subject<'_>, case: Case) -> bool {
    let (mut p, mut s) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    let len = subject.len();
    while s < len {
        if p < pattern.len() && (pattern[p] == b'?' || case.eq(pattern[p], subject.at(s))) {
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

    fn denies(pattern: &str, provider: Option<&str>, name: &str) -> bool {
        Pattern::new(pattern.to_owned())
            .expect("a valid pattern")
            .denies(provider, name)
    }

    #[test]
    fn allow_patterns_are_case_sensitive() {
        assert!(!matches("k8s/restart*", Some("K8s"), "Restart_pod"));
        assert!(!matches("k8s/restart*", Some("k8s"), "RESTART_POD"));
        assert!(!matches("LIST_PODS", None, "list_pods"));
    }

    #[test]
    fn deny_patterns_ignore_ascii_case() {
        assert!(denies("k8s/restart*", Some("K8s"), "Restart_pod"));
        assert!(denies("k8s/restart*", Some("K8S"), "RESTART_POD"));
        assert!(denies("*/EXEC*", Some("ssh"), "exec_command"));
        assert!(denies("k8s/?ESTART_pod", Some("k8s"), "restart_POD"));
        assert!(!denies("k8s/restart*", Some("k8s"), "list_pods"));
        assert!(!denies("k8s/restart*", Some("k8sx"), "restart_pod"));
    }

    #[test]
    fn deny_patterns_match_a_missing_provider() {
        assert!(denies("k8s/restart*", None, "restart_pod"));
        assert!(denies("k8s/restart*", None, "Restart_Pod"));
        assert!(denies("*/exec*", None, "exec_command"));
        assert!(denies("restart*", None, "restart_pod"));
        assert!(!denies("k8s/restart*", None, "list_pods"));
        assert!(!denies("k8s/", None, "restart_pod"));
        // A provider that is present must still match.
        assert!(!denies("k8s/restart*", Some("ssh"), "restart_pod"));
    }

    #[test]
    fn whatever_an_allow_pattern_matches_the_deny_reading_catches() {
        let patterns = [
            "*",
            "k8s/*",
            "k8s/list_*",
            "*/exec*",
            "list_pods",
            "k?s/*",
            "*s*s*",
        ];
        let subjects = [
            (Some("k8s"), "list_pods"),
            (None, "list_pods"),
            (Some("ssh"), "exec_command"),
            (Some("K8s"), "List_Pods"),
            (None, "exec"),
        ];
        for pattern in patterns {
            for (provider, name) in subjects {
                if matches(pattern, provider, name) {
                    assert!(
                        denies(pattern, provider, name),
                        "{pattern} {provider:?} {name}"
                    );
                }
            }
        }
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(Pattern::new(String::new()).is_err());
        assert!(Pattern::new("k8s /x".to_owned()).is_err());
        assert!(Pattern::new("a/b/c".to_owned()).is_err());
        assert!(Pattern::new("k8s/[ab]".to_owned()).is_err());
    }
}
