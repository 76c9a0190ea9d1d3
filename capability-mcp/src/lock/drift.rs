//! Drift judged by what it introduces: a changed descriptor compared field by field with the
//! descriptor its pin keeps. A change of wording (the description, the title) that brings no
//! new finding and names no new tool may be accepted; any other change, or one that adds a
//! finding of the [scan](crate::scan) or a reference to another tool, hides the tool.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::hash::MCP_DESCRIPTOR_FIELDS;
use crate::scan::{Finding, ToolScan};

/// The fields whose change is a change of wording only.
const WORDING: [&str; 3] = ["/description", "/title", "/annotations/title"];

/// One field that differs between the pinned descriptor and the live one.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FieldChange {
    /// Where: a JSON Pointer into the tool (`/description`, `/annotations/readOnlyHint`,
    /// `/inputSchema/properties/path/type`).
    pub pointer: String,
    /// The pinned value; `None` when the field is new.
    pub old: Option<Value>,
    /// The live value; `None` when the field was removed.
    pub new: Option<Value>,
}

impl FieldChange {
    /// Whether it is a change of wording: the description or a title, text for text.
    pub fn is_wording(&self) -> bool {
        WORDING.contains(&self.pointer.as_str())
            && self.old.as_ref().is_some_and(Value::is_string)
            && self.new.as_ref().is_some_and(Value::is_string)
    }
}

/// How a changed descriptor differs from the one pinned, and what the change introduces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    changes: Vec<FieldChange>,
    findings: Vec<Finding>,
    references: Vec<String>,
}

impl Drift {
    /// Compares a pinned descriptor with a live one: each field that differs (objects field
    /// by field, down to the leaves of the schemas), the findings of the scan the live one has
    /// and the pinned one had not, and the names of tools it mentions that the pinned one did
    /// not mention.
    ///
    /// ```
    /// use capability::mcp::lock::Drift;
    /// use serde_json::json;
    ///
    /// let pinned = json!({"name": "read", "description": "Reads a fiel.",
    ///                     "inputSchema": {"type": "object"}});
    /// let mut typo = pinned.clone();
    /// typo["description"] = json!("Reads a file.");
    /// assert!(Drift::between(&pinned, &typo).is_wording_only());
    ///
    /// let mut flip = pinned.clone();
    /// flip["annotations"] = json!({"readOnlyHint": true});
    /// let drift = Drift::between(&pinned, &flip);
    /// assert!(!drift.is_wording_only());
    /// assert_eq!(drift.changes()[0].pointer, "/annotations");
    /// ```
    pub fn between(pinned: &Value, live: &Value) -> Drift {
        let mut changes = Vec::new();
        for field in MCP_DESCRIPTOR_FIELDS {
            let pointer = format!("/{field}");
            diff(pinned.get(field), live.get(field), &pointer, &mut changes);
        }
        let (before, after) = (ToolScan::of(pinned), ToolScan::of(live));
        let known: BTreeSet<_> = before.findings().iter().map(identity).collect();
        let findings = after
            .findings()
            .iter()
            .filter(|f| !known.contains(&identity(f)))
            .cloned()
            .collect();
        let mentioned: BTreeSet<&str> = before.mentions.iter().map(|m| &*m.word).collect();
        let mut references: Vec<String> = Vec::new();
        for mention in &after.mentions {
            let word = &*mention.word;
            if !mentioned.contains(word) && !references.iter().any(|r| r == word) {
                references.push(word.to_owned());
            }
        }
        Drift {
            changes,
            findings,
            references,
        }
    }

    /// Every field that differs, in the order of the descriptor's fields.
    pub fn changes(&self) -> &[FieldChange] {
        &self.changes
    }

    /// The findings of the scan the live descriptor has and the pinned one had not.
    pub fn new_findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Names the live descriptor mentions that the pinned one did not: possible references to
    /// other tools, files or hosts (as the scan keeps them for its fleet rules: distinctive
    /// identifiers such as `send_message`, `id_rsa` or `evil.example`), lowercase.
    pub fn new_references(&self) -> &[String] {
        &self.references
    }

    /// Whether the change is one of wording only: only the description and titles changed,
    /// and it brings no new finding and no new reference.
    pub fn is_wording_only(&self) -> bool {
        self.changes.iter().all(FieldChange::is_wording)
            && self.findings.is_empty()
            && self.references.is_empty()
    }

    /// What the change introduces, one phrase each, for a reason: each field changed other
    /// than wording, each new finding, each new reference. Empty for wording only.
    pub fn introduces(&self) -> Vec<String> {
        let mut out = Vec::new();
        for change in self.changes.iter().filter(|c| !c.is_wording()) {
            out.push(match change.pointer.split('/').nth(1) {
                Some("inputSchema") => format!("the input schema changed at {}", change.pointer),
                Some("outputSchema") => format!("the output schema changed at {}", change.pointer),
                Some("annotations") => format!(
                    "the hint {} changed from {} to {}",
                    change.pointer,
                    shown(change.old.as_ref()),
                    shown(change.new.as_ref())
                ),
                _ => format!("{} changed", change.pointer),
            });
        }
        for finding in &self.findings {
            out.push(format!("a new finding: {finding}"));
        }
        for name in &self.references {
            out.push(format!("a new reference: `{name}`"));
        }
        out
    }
}

/// A finding without its byte span: a typo fixed before it moves a finding, not adds one.
fn identity(f: &Finding) -> (&str, &str, &str, bool, &str, Option<&str>) {
    (
        f.rule.code(),
        f.severity.as_str(),
        &f.pointer,
        f.key,
        &f.excerpt,
        f.detail.as_deref(),
    )
}

/// A value in a reason, on one line and short.
pub(super) fn shown(value: Option<&Value>) -> String {
    match value {
        None => "(absent)".to_owned(),
        Some(value) => {
            let text = value.to_string();
            let mut chars = text.chars();
            let short: String = chars.by_ref().take(60).collect();
            if chars.next().is_some() {
                format!("{short}…")
            } else {
                short
            }
        }
    }
}

/// The leaves that differ between `old` and `new`, objects compared member by member; the
/// wording fields and arrays are compared whole. `/annotations` added or removed whole is one
/// change.
fn diff(old: Option<&Value>, new: Option<&Value>, pointer: &str, out: &mut Vec<FieldChange>) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) if !WORDING.contains(&pointer) => {
            members(a, b, pointer, out);
        }
        (a, b) if a != b => out.push(FieldChange {
            pointer: pointer.to_owned(),
            old: a.cloned(),
            new: b.cloned(),
        }),
        _ => {}
    }
}

fn members(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    pointer: &str,
    out: &mut Vec<FieldChange>,
) {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        let escaped = key.replace('~', "~0").replace('/', "~1");
        diff(a.get(key), b.get(key), &format!("{pointer}/{escaped}"), out);
    }
}

/// The canonical JSON of the fields of a tool the descriptor hash covers: what a lockfile
/// keeps of a pinned descriptor.
pub(super) fn snapshot(tool: &Value) -> String {
    let Some(object) = tool.as_object() else {
        return capability_core::json::to_canonical_json(tool);
    };
    let present = MCP_DESCRIPTOR_FIELDS
        .iter()
        .filter_map(|key| object.get(*key).map(|value| (*key, value)));
    capability_core::json::to_canonical_json_object(present)
}
