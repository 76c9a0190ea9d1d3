//! Capability mismatch (CAP-SCAN-050): a tool that claims `readOnlyHint: true` whose own words
//! say it changes something.
//!
//! Hard when the name holds a verb of writing, sending, deleting or executing (`delete_file`,
//! `sendMessage`), when the description starts with one ("Delete a namespace"), or when it
//! states one plainly ("This tool deletes ..."); soft for a milder verb anywhere in the
//! description or the name, or a property such as `command` or `recipient`. A verb after a
//! negation ("does not delete") is no finding.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::OnceLock;

use super::finding::Severity;
use super::phrases::Fnv;
use super::text::{Scratch, tokenize};

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
    "deploy",
    "publish",
    "shutdown",
    "reboot",
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

/// What a word of a description is: bits of [`FIRST_HARD`], [`STATED_HARD`], [`SAID_SOFT`]
/// and [`NEGATIONS`].
const FIRST: u8 = 1;
const STATED: u8 = 2;
const SOFT: u8 = 4;
const NEGATION: u8 = 8;

/// Which lists of the description's words `word` (folded) is in: one lookup instead of one
/// comparison per word of each list.
fn said(word: &str) -> u8 {
    static KINDS: OnceLock<HashMap<&'static str, u8, BuildHasherDefault<Fnv>>> = OnceLock::new();
    let kinds = KINDS.get_or_init(|| {
        let mut kinds = HashMap::default();
        for (list, kind) in [
            (FIRST_HARD, FIRST),
            (STATED_HARD, STATED),
            (SAID_SOFT, SOFT),
            (NEGATIONS, NEGATION),
        ] {
            for word in list {
                *kinds.entry(*word).or_insert(0) |= kind;
            }
        }
        kinds
    });
    if word.len() > 12 {
        return 0; // longer than every word of the lists
    }
    kinds.get(word).copied().unwrap_or(0)
}

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

/// The words of a name (see [`name_words`]), as slices of it.
fn name_spans(name: &str) -> impl Iterator<Item = &str> {
    let bytes = name.as_bytes();
    let mut start = 0;
    let mut i = 0;
    std::iter::from_fn(move || {
        while i <= bytes.len() {
            let at = i;
            i += 1;
            let separator = at == bytes.len() || matches!(bytes[at], b'_' | b'-' | b'.' | b' ');
            let camel = at > 0
                && at < bytes.len()
                && bytes[at].is_ascii_uppercase()
                && (bytes[at - 1].is_ascii_lowercase() || bytes[at - 1].is_ascii_digit());
            if separator || camel {
                let word = (start, at);
                start = if separator { at + 1 } else { at };
                if word.1 > word.0 {
                    return name.get(word.0..word.1);
                }
            }
        }
        None
    })
}

/// Whether `word` is one of `list`, whatever its case.
fn among(word: &str, list: &[&str]) -> bool {
    list.iter().any(|w| w.eq_ignore_ascii_case(word))
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
/// `properties` names. The description comes with whether `scratch` holds it already folded
/// and cut into words.
pub(crate) fn mismatches<'p>(
    name: &str,
    description: Option<(&str, bool)>,
    properties: impl Iterator<Item = &'p str>,
    scratch: &mut Scratch,
) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for word in name_spans(name) {
        let severity = if among(word, NAME_HARD) {
            Severity::Hard
        } else if among(word, NAME_SOFT) {
            Severity::Soft
        } else {
            continue;
        };
        out.push(Mismatch {
            severity,
            at: Where::Name(name.to_owned()),
            word: word.to_ascii_lowercase(),
        });
    }
    if let Some((description, cut)) = description {
        let Scratch { folded, tokens } = scratch;
        if !cut {
            folded.fold(description);
            tokenize(&folded.text, tokens);
        }
        let text = folded.text.as_str();
        // Whether each of the last three words is a negation, to see one before a verb.
        let mut recent = [false; 3];
        for (n, token) in tokens.iter().filter(|t| t.word).enumerate() {
            let word = token.text(text);
            let kinds = said(word);
            let severity = if n == 0 && kinds & FIRST != 0 || kinds & STATED != 0 {
                Some(Severity::Hard)
            } else if kinds & SOFT != 0 {
                Some(Severity::Soft)
            } else {
                None
            };
            if let Some(severity) = severity
                && !recent.contains(&true)
            {
                out.push(Mismatch {
                    severity,
                    at: Where::Description(folded.raw_span(token.range())),
                    word: word.to_owned(),
                });
            }
            recent = [recent[1], recent[2], kinds & NEGATION != 0];
        }
    }
    for property in properties {
        if let Some(word) = name_spans(property).find(|w| among(w, PROPERTY_SOFT)) {
            out.push(Mismatch {
                severity: Severity::Soft,
                at: Where::Property(property.to_owned()),
                word: word.to_ascii_lowercase(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn severities(name: &str, description: &str) -> Vec<(Severity, String)> {
        mismatches(
            name,
            Some((description, false)),
            std::iter::empty(),
            &mut Scratch::default(),
        )
        .into_iter()
        .map(|m| (m.severity, m.word))
        .collect()
    }

    /// [`said`] looks up no word longer than 12 bytes.
    #[test]
    fn the_words_looked_up_are_short() {
        for word in [FIRST_HARD, STATED_HARD, SAID_SOFT, NEGATIONS].concat() {
            assert!(word.len() <= 12, "{word}");
            assert_ne!(said(word), 0, "{word}");
        }
    }

    #[test]
    fn names_are_cut_into_words() {
        assert_eq!(name_words("sendMessage"), ["send", "message"]);
        assert_eq!(
            name_words("git_diff-staged.v2"),
            ["git", "diff", "staged", "v2"]
        );
        for name in [
            "sendMessage",
            "git_diff-staged.v2",
            "__a__bC",
            "HTTPGet",
            "x1Y",
            "",
        ] {
            let spans: Vec<String> = name_spans(name).map(str::to_ascii_lowercase).collect();
            assert_eq!(spans, name_words(name), "{name}");
        }
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
