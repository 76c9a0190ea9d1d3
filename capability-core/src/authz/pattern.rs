//! Tool patterns: globs over `provider/tool`, shared by policy roles and authority grants.

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
}
