//! Text helpers for default names and for "did you mean" suggestions.

/// The default tool or agent name of a type: snake_case of its identifier.
///
/// `PromQuery` becomes `prom_query`, `HTTPProbe` becomes `http_probe`, `ListUsersV2` becomes
/// `list_users_v2`, and a raw identifier loses its `r#`.
pub fn snake_case(ident: &str) -> String {
    let ident = ident.strip_prefix("r#").unwrap_or(ident);
    let chars: Vec<char> = ident.chars().collect();
    let mut out = String::with_capacity(ident.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1).copied();
            let boundary = match prev {
                None | Some('_') => false,
                Some(p) if p.is_lowercase() || p.is_ascii_digit() => true,
                // The last capital of an acronym starts a new word: `HTTPProbe` -> `http_probe`.
                Some(p) if p.is_uppercase() => next.is_some_and(char::is_lowercase),
                Some(_) => false,
            };
            if boundary {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The candidate closest to `word`, if one is close enough to be what the user meant.
///
/// Close enough means equal once case, `_` and `-` are ignored (`readOnly`, `read-only`,
/// `readonly` all suggest `read_only`), or at most two edits away.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let squashed = squash(word);
    if let Some(hit) = candidates.iter().find(|c| squash(c) == squashed) {
        return Some(hit);
    }
    candidates
        .iter()
        .map(|c| (edit_distance(&squashed, &squash(c)), *c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_of_type_names() {
        for (input, want) in [
            ("PromQuery", "prom_query"),
            ("RestartPod", "restart_pod"),
            ("HTTPProbe", "http_probe"),
            ("ListUsersV2", "list_users_v2"),
            ("K8sRestart", "k8s_restart"),
            ("Already_Snake", "already_snake"),
            ("r#Type", "type"),
            ("A", "a"),
        ] {
            assert_eq!(snake_case(input), want, "{input}");
        }
    }

    #[test]
    fn closest_suggests_likely_keys() {
        let keys = crate::TOOL_KEYS;
        assert_eq!(closest("readonly", keys), Some("read_only"));
        assert_eq!(closest("readOnly", keys), Some("read_only"));
        assert_eq!(closest("scope", keys), Some("scopes"));
        assert_eq!(closest("idempotnet", keys), Some("idempotent"));
        assert_eq!(closest("colour", keys), None);
    }
}
