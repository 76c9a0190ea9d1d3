//! The rules that need the whole fleet: a description naming another server's tool
//! (CAP-SCAN-030), and two servers' tools whose names or titles differ only by look-alikes
//! (CAP-SCAN-031).
//!
//! A name is looked for only when it is distinctive (five characters or more, with `_`, `-`,
//! `.` or a capital inside), so that `add` or `search` in a sentence is not a reference. A
//! reference is found whole or as the end of a longer identifier (`mcp_whatsapp_send_message`
//! names `send_message`).

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

use super::ToolScan;
use super::chars::latin_look_alike;
use super::finding::{Finding, Rule, Severity};

/// One tool of a fleet, as the fleet rules see it.
pub(crate) struct Entry<'a> {
    /// Its own name.
    pub(crate) name: &'a str,
    /// The name the fleet shows (its server's prefix and its name).
    pub(crate) shown: &'a str,
    /// Its title, if it has one.
    pub(crate) title: Option<&'a str>,
    /// Its own scan (with the references it makes).
    pub(crate) scan: &'a ToolScan,
}

/// One server of a fleet.
pub(crate) struct Member<'a> {
    pub(crate) server: &'a str,
    pub(crate) tools: Vec<Entry<'a>>,
}

/// Whether a tool name is distinctive enough to be looked for in other servers' text.
pub(crate) fn distinctive(name: &str) -> bool {
    let inner_capital = name
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    name.chars().count() >= 5 && (name.contains(['_', '-', '.']) || inner_capital)
}

/// Every finding of the fleet rules: `(member, tool, finding)`, in the fleet's order.
pub(crate) fn cross(members: &[Member<'_>]) -> Vec<(usize, usize, Finding)> {
    let mut out = Vec::new();
    references(members, &mut out);
    confusables(members, &mut out);
    out.sort_by(|a, b| {
        (a.0, a.1, &a.2.pointer, a.2.span.start).cmp(&(b.0, b.1, &b.2.pointer, b.2.span.start))
    });
    out
}

fn references(members: &[Member<'_>], out: &mut Vec<(usize, usize, Finding)>) {
    let mut names: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
    for (m, member) in members.iter().enumerate() {
        for (t, entry) in member.tools.iter().enumerate() {
            for name in [entry.name, entry.shown] {
                if distinctive(name) {
                    let owners = names.entry(name.to_ascii_lowercase()).or_default();
                    if !owners.contains(&(m, t)) {
                        owners.push((m, t));
                    }
                }
            }
        }
    }
    if names.is_empty() {
        return;
    }
    for (m, member) in members.iter().enumerate() {
        for (t, entry) in member.tools.iter().enumerate() {
            for mention in &entry.scan.mentions {
                let word = mention.word.as_ref();
                let tails = word
                    .char_indices()
                    .filter(|(_, c)| matches!(c, '_' | '-' | '.'))
                    .map(|(i, _)| &word[i + 1..]);
                let Some(owners) = std::iter::once(word)
                    .chain(tails)
                    .find_map(|candidate| names.get(candidate))
                else {
                    continue;
                };
                let others: Vec<String> = owners
                    .iter()
                    .filter(|(m2, _)| *m2 != m)
                    .map(|&(m2, t2)| {
                        format!("`{}/{}`", members[m2].server, members[m2].tools[t2].name)
                    })
                    .collect();
                if others.is_empty() {
                    continue;
                }
                let (severity, how) = if mention.directive {
                    (Severity::Hard, "and tells the agent what to do with it")
                } else {
                    (Severity::Soft, "")
                };
                let detail = format!(
                    "names {} of another server{}{how}",
                    others.join(", "),
                    if how.is_empty() { "" } else { " " }
                );
                out.push((
                    m,
                    t,
                    Finding {
                        rule: Rule::CrossServerReference,
                        severity,
                        pointer: mention.pointer.clone(),
                        key: mention.key,
                        span: mention.span.clone(),
                        excerpt: mention.excerpt.clone(),
                        detail: Some(detail),
                    },
                ));
            }
        }
    }
}

/// The string as it looks: NFKC, look-alike letters as Latin, lowercase, `0` as `o`, `1`, `i`
/// and `|` as `l`, separators as `_`, `rn` as `m`, `vv` as `w`.
pub(crate) fn skeleton(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    if text.is_ascii() {
        // NFKC and the look-alikes leave ASCII as it is.
        for b in text.bytes() {
            out.push(match b.to_ascii_lowercase() {
                b'0' => 'o',
                b'1' | b'i' | b'|' => 'l',
                b'-' | b'.' | b' ' => '_',
                other => char::from(other),
            });
        }
        return out.replace("rn", "m").replace("vv", "w");
    }
    for c in text.nfkc() {
        let c = latin_look_alike(c).unwrap_or(c);
        for lower in c.to_lowercase() {
            out.push(match latin_look_alike(lower).unwrap_or(lower) {
                '0' => 'o',
                '1' | 'i' | '|' => 'l',
                '-' | '.' | ' ' => '_',
                other => other,
            });
        }
    }
    out.replace("rn", "m").replace("vv", "w")
}

fn confusables(members: &[Member<'_>], out: &mut Vec<(usize, usize, Finding)>) {
    // Shown names (ASCII: case, digits, separators), then titles (other scripts).
    let mut by_name: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
    let mut by_title: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
    for (m, member) in members.iter().enumerate() {
        for (t, entry) in member.tools.iter().enumerate() {
            by_name
                .entry(skeleton(entry.shown))
                .or_default()
                .push((m, t));
            if let Some(title) = entry.title {
                by_title.entry(skeleton(title)).or_default().push((m, t));
            }
        }
    }
    let text = |m: usize, t: usize, title: bool| -> &str {
        let entry = &members[m].tools[t];
        if title {
            entry.title.unwrap_or_default()
        } else {
            entry.shown
        }
    };
    for (title, groups) in [(false, by_name), (true, by_title)] {
        for group in groups.into_values() {
            for &(m, t) in &group {
                let mine = text(m, t, title);
                let look_alikes: Vec<String> = group
                    .iter()
                    .filter(|&&(m2, t2)| {
                        let theirs = text(m2, t2, title);
                        m2 != m
                            && theirs != mine
                            && !(title && mine.is_ascii() && theirs.is_ascii())
                    })
                    .map(|&(m2, t2)| {
                        format!(
                            "`{}/{}` (`{}`)",
                            members[m2].server,
                            members[m2].tools[t2].name,
                            text(m2, t2, title)
                        )
                    })
                    .collect();
                if look_alikes.is_empty() {
                    continue;
                }
                let entry = &members[m].tools[t];
                let (pointer, raw) = if title {
                    ("/title", entry.title.unwrap_or_default())
                } else {
                    ("/name", entry.name)
                };
                out.push((
                    m,
                    t,
                    Finding {
                        rule: Rule::ConfusableName,
                        severity: Severity::Hard,
                        pointer: pointer.to_owned(),
                        key: false,
                        span: 0..raw.len(),
                        excerpt: super::finding::excerpt(mine, &(0..mine.len())),
                        detail: Some(format!(
                            "looks like {} of another server",
                            look_alikes.join(", ")
                        )),
                    },
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skeletons_of_look_alikes_are_equal() {
        assert_eq!(skeleton("send_message"), skeleton("Send-Message"));
        assert_eq!(skeleton("list_files"), skeleton("Iist_fi1es"));
        assert_eq!(
            skeleton("Send Message"),
            skeleton("S\u{435}nd M\u{435}ssage")
        );
        assert_ne!(skeleton("send_message"), skeleton("send_messages"));
    }

    #[test]
    fn distinctive_names_have_a_separator_or_an_inner_capital() {
        assert!(distinctive("send_message") && distinctive("sendMessage"));
        assert!(!distinctive("add") && !distinctive("search") && !distinctive("a_b"));
    }
}
