//! A review as a person reads it (`capability pin --review`): per tool that drifted, its
//! status, each field that changed with the old and the new value (text compared word by word:
//! `[-removed-]` and `{+added+}`), what the change introduces, and the scan's findings.

use std::fmt;

use super::drift::{FieldChange, shown};
use super::review::{DriftStatus, Review, ReviewedTool};
use crate::scan::finding::excerpt;

/// The longest text, in words, compared word by word; longer ones are shown whole.
const MAX_WORDS: usize = 2_000;

/// A [`Review`] as a person reads it: see [`Review::report`].
#[derive(Clone, Copy, Debug)]
pub struct ReviewReport<'r> {
    review: &'r Review,
}

impl Review {
    /// The review as a person reads it: per tool that is not unchanged, its status, each field
    /// changed (`field: old -> new`, text word by word with `[-removed-]{+added+}`), what the
    /// change introduces, and the findings of the scan of the live descriptor.
    ///
    /// ```
    /// use capability::Server;
    /// use capability::mcp::Lockfile;
    /// use serde_json::json;
    ///
    /// let tools = vec![json!({"name": "read", "description": "Reads a fiel from disk.",
    ///                         "inputSchema": {"type": "object"}})];
    /// let server = Server::untrusted("fs");
    /// let mut lock = Lockfile::default();
    /// lock.pin(&server, &tools)?;
    /// let mut live = tools.clone();
    /// live[0]["description"] = json!("Reads a file from disk.");
    /// let review = lock.review(&server, &live)?;
    /// let text = review.report().to_string();
    /// assert!(text.contains("description: Reads a [-fiel-] {+file+} from disk."), "{text}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn report(&self) -> ReviewReport<'_> {
        ReviewReport { review: self }
    }
}

impl fmt::Display for ReviewReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let review = self.review;
        if !review.is_pinned() {
            return write!(
                f,
                "server `{}` is not in the lockfile: nothing is pinned to review against",
                review.server()
            );
        }
        let hidden = review.hidden_by_drift().count();
        let accepted = review.accepted_drift().count();
        write!(
            f,
            "server `{}`: {} tools, {hidden} hidden by drift, {accepted} shown though changed, \
             {} removed",
            review.server(),
            review.tools().len(),
            review.removed().len()
        )?;
        for tool in review.tools() {
            if tool.status() != &DriftStatus::Unchanged {
                tool_report(f, tool)?;
            }
        }
        for name in review.removed() {
            write!(f, "\n\n  {name}: removed (pinned, no longer listed)")?;
        }
        Ok(())
    }
}

fn tool_report(f: &mut fmt::Formatter<'_>, tool: &ReviewedTool) -> fmt::Result {
    let verdict = if tool.status().is_approved() {
        "shown"
    } else {
        "hidden"
    };
    let name = excerpt(tool.manifest().name(), &(0..tool.manifest().name().len()));
    write!(f, "\n\n  {name}: {} [{verdict}]", tool.status())?;
    if let Some(drift) = tool.drift() {
        for change in drift.changes() {
            write!(f, "\n    {}", Change(change))?;
        }
        for what in drift.introduces() {
            write!(f, "\n    introduces: {what}")?;
        }
    }
    for finding in tool.findings() {
        write!(f, "\n    finding: {finding}")?;
    }
    Ok(())
}

/// One field changed: `field: old -> new`, text word by word.
struct Change<'c>(&'c FieldChange);

impl fmt::Display for Change<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let change = self.0;
        let field = change.pointer.trim_start_matches('/');
        match (change.old.as_ref(), change.new.as_ref()) {
            (Some(serde_json::Value::String(old)), Some(serde_json::Value::String(new))) => {
                write!(f, "{field}: {}", word_diff(old, new))
            }
            (old, new) => write!(f, "{field}: {} -> {}", shown(old), shown(new)),
        }
    }
}

/// `old` and `new` word by word: the words both have, `[-words removed-]`, `{+words added+}`.
/// Invisible characters are written as `\u{...}`.
pub(super) fn word_diff(old: &str, new: &str) -> String {
    let printable = |s: &str| excerpt_all(s);
    let a: Vec<&str> = old.split_whitespace().collect();
    let b: Vec<&str> = new.split_whitespace().collect();
    if a.len() > MAX_WORDS || b.len() > MAX_WORDS {
        return format!("[-{}-] {{+{}+}}", printable(old), printable(new));
    }
    // The longest common subsequence of words, by dynamic programming from the end.
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out: Vec<String> = Vec::new();
    let (mut removed, mut added): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    let flush = |out: &mut Vec<String>, removed: &mut Vec<&str>, added: &mut Vec<&str>| {
        if !removed.is_empty() {
            out.push(format!("[-{}-]", printable(&removed.join(" "))));
            removed.clear();
        }
        if !added.is_empty() {
            out.push(format!("{{+{}+}}", printable(&added.join(" "))));
            added.clear();
        }
    };
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            flush(&mut out, &mut removed, &mut added);
            out.push(printable(a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            added.push(b[j]);
            j += 1;
        } else {
            removed.push(a[i]);
            i += 1;
        }
    }
    flush(&mut out, &mut removed, &mut added);
    out.join(" ")
}

/// The whole text, printable: each character that does not print written as `\u{...}`.
fn excerpt_all(text: &str) -> String {
    text.chars()
        .map(|c| {
            if crate::scan::finding::printable(c) {
                c.to_string()
            } else {
                format!("\\u{{{:X}}}", c as u32)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::word_diff;

    #[test]
    fn words_removed_and_added_are_marked() {
        assert_eq!(word_diff("a b c", "a b c"), "a b c");
        assert_eq!(
            word_diff("Reads a fiel.", "Reads a file."),
            "Reads a [-fiel.-] {+file.+}"
        );
        assert_eq!(word_diff("", "new words"), "{+new words+}");
        assert_eq!(word_diff("x\u{200B}y", "xy"), "[-x\\u{200B}y-] {+xy+}");
    }
}
