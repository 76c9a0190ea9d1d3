//! Capability mismatch (CAP-SCAN-050): a tool that claims `readOnlyHint: true` whose own words
//! say it changes something.
//!
//! Hard when the name holds a verb of writing, sending, deleting or executing (`delete_file`,
//! `sendMessage`), when the description starts with one ("Delete a namespace"), or when it
//! states one plainly ("This tool deletes ..."); soft for a milder verb anywhere in the
//! description or the name, or a property such as `command` or `recipient`. A verb after a
//! negation ("does not delete") is no finding.

use super::finding::Severity;
use super::text::{Folded, Token, tokenize};

/// In a name: hard.
const NAME_HARD: &[&str] = &[
    "delete",
    "del",
    "remove",
    "rm",
    "drop",
    "destroy",
    "wipe",
    "erase",
    "purge",
    "truncate",
    "overwrite",
    "write",
    "send",
    "exec",
    "execute",
    "kill",
    "terminate",
    "upload",
    "transfer",
    "deploy",
    "publish",
    "shutdown",
    "reboot",
    "unlink",
    "rmdir",
    "shred",
];

/// In a name: soft.
const NAME_SOFT: &[&str] = &[
    "create",
    "update",
    "modify",
    "set",
    "put",
    "patch",
    "insert",
    "edit",
    "move",
    "mv",
    "rename",
    "run",
    "install",
    "uninstall",
    "push",
    "commit",
    "post",
    "reset",
    "restart",
    "stop",
    "save",
    "store",
    "clear",
    "toggle",
    "apply",
    "append",
    "replace",
    "merge",
    "grant",
    "revoke",
    "email",
    "mail",
    "notify",
    "invoke",
    "spawn",
    "shell",
    "cmd",
];

/// Stated in a description: hard.
const STATED_HARD: &[&str] = &[
    "deletes",
    "removes",
    "erases",
    "wipes",
    "destroys",
    "purges",
    "truncates",
    "overwrites",
    "executes",
    "kills",
    "terminates",
    "shreds",
    "unlinks",
];

/// The first word of a description (its imperative): hard.
const FIRST_HARD: &[&str] = &[
    "delete",
    "remove",
    "erase",
    "wipe",
    "destroy",
    "purge",
    "truncate",
    "overwrite",
    "execute",
    "kill",
    "terminate",
    "drop",
    "write",
    "send",
    "upload",
];

/// Anywhere in a description: soft.
const SAID_SOFT: &[&str] = &[
    "write",
    "writes",
    "send",
    "sends",
    "delete",
    "remove",
    "erase",
    "overwrite",
    "execute",
    "create",
    "creates",
    "modify",
    "modifies",
    "upload",
    "uploads",
    "transfer",
    "transfers",
    "permanently",
    "irreversibly",
];

/// Property names: soft.
const PROPERTY_SOFT: &[&str] = &[
    "command",
    "cmd",
    "script",
    "shell",
    "exec",
    "execute",
    "recipient",
    "recipients",
    "overwrite",
    "delete",
];

/// Words that turn the verb after them around.
const NEGATIONS: &[&str] = &[
    "not", "never", "no", "without", "don't", "doesn't", "won't", "cannot", "can't", "nor",
    "neither", "nothing", "isn't", "dont", "doesnt",
];

/// Where the claim is contradicted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Where {
    /// In the name: the word.
    Name(String),
    /// In the description: the bytes of the raw description.
    Description(std::ops::Range<usize>),
    /// A property of the input schema: its name.
    Property(String),
}

/// A contradiction of the read-only claim.
#[derive(Debug)]
pub(crate) struct Mismatch {
    pub(crate) severity: Severity,
    pub(crate) at: Where,
    pub(crate) word: String,
}

/// The words of a tool name: cut at `_ - .` and where a lowercase letter meets a capital.
pub(crate) fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if matches!(c, '_' | '-' | '.' | ' ') {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && previous_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Every contradiction of a read-only claim in `name`, `description` and the input schema's
/// `properties` names.
pub(crate) fn mismatches<'p>(
    name: &str,
    description: Option<&str>,
    properties: impl Iterator<Item = &'p str>,
) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for word in name_words(name) {
        let severity = if NAME_HARD.contains(&word.as_str()) {
            Severity::Hard
        } else if NAME_SOFT.contains(&word.as_str()) {
            Severity::Soft
        } else {
            continue;
        };
        out.push(Mismatch {
            severity,
            at: Where::Name(name.to_owned()),
            word,
        });
    }
    if let Some(description) = description {
        let mut folded = Folded::default();
        folded.fold(description);
        let mut tokens: Vec<Token> = Vec::new();
        tokenize(&folded.text, &mut tokens);
        let text = folded.text.as_str();
        let words: Vec<(usize, &str)> = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| t.word)
            .map(|(i, t)| (i, t.text(text)))
            .collect();
        for (n, &(i, word)) in words.iter().enumerate() {
            let severity = if n == 0 && FIRST_HARD.contains(&word) || STATED_HARD.contains(&word) {
                Severity::Hard
            } else if SAID_SOFT.contains(&word) {
                Severity::Soft
            } else {
                continue;
            };
            let negated = words[n.saturating_sub(3)..n]
                .iter()
                .any(|(_, w)| NEGATIONS.contains(w));
            if negated {
                continue;
            }
            out.push(Mismatch {
                severity,
                at: Where::Description(folded.raw_span(tokens[i].range())),
                word: word.to_owned(),
            });
        }
    }
    for property in properties {
        if let Some(word) = name_words(property)
            .into_iter()
            .find(|w| PROPERTY_SOFT.contains(&w.as_str()))
        {
            out.push(Mismatch {
                severity: Severity::Soft,
                at: Where::Property(property.to_owned()),
                word,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn severities(name: &str, description: &str) -> Vec<(Severity, String)> {
        mismatches(name, Some(description), std::iter::empty())
            .into_iter()
            .map(|m| (m.severity, m.word))
            .collect()
    }

    #[test]
    fn names_are_cut_into_words() {
        assert_eq!(name_words("sendMessage"), ["send", "message"]);
        assert_eq!(
            name_words("git_diff-staged.v2"),
            ["git", "diff", "staged", "v2"]
        );
    }

    #[test]
    fn a_stated_or_named_write_is_hard_a_negated_one_is_nothing() {
        assert_eq!(
            severities("cleanup", "Lists old files and deletes them."),
            [(Severity::Hard, "deletes".to_owned())]
        );
        assert_eq!(
            severities("delete_file", "Reads a file."),
            [(Severity::Hard, "delete".to_owned())]
        );
        assert_eq!(
            severities("wipe", "Delete a namespace."),
            [
                (Severity::Hard, "wipe".to_owned()),
                (Severity::Hard, "delete".to_owned())
            ]
        );
        assert!(severities("inspect", "Reads the file; does not delete anything.").is_empty());
        assert!(severities("git_log", "Shows the commit logs").is_empty());
    }
}
