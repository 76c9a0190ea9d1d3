//! The walk through one tool object: which strings are read, by which rules, and where each
//! finding is reported (a JSON Pointer and the bytes of the raw string).

use std::ops::Range;

use serde_json::{Map, Value};

use super::claims::{self, Where};
use super::finding::{Finding, Rule, Severity, excerpt};
use super::fleet::distinctive;
use super::phrases::Matcher;
use super::text::{Folded, Scratch, Token, tokenize};
use super::{Mention, ToolScan, payload, secrets, unicode};

/// Strings of one word shorter than this take [`Walker::word`]: below the shortest payload
/// (16) and credential (15) the rules decode or look for.
const SHORT: usize = 15;
/// How deep a schema is followed (serde_json parses 128 levels).
const MAX_DEPTH: usize = 128;
/// Bytes of context shown on each side of invisible characters.
const CONTEXT: usize = 24;

/// One step of a JSON Pointer.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

thread_local! {
    static SCRATCH: std::cell::Cell<Option<Scratch>> = const { std::cell::Cell::new(None) };
}

/// What the rules need while walking one tool.
struct Walker<'a> {
    path: Vec<Step<'a>>,
    folded: Folded,
    tokens: Vec<Token>,
    /// Whether `folded` and `tokens` are the last string [`Walker::string`] read.
    cut: bool,
    out: ToolScan,
}

/// Scans one tool object.
pub(crate) fn tool(tool: &Value) -> ToolScan {
    let Some(object) = tool.as_object() else {
        return ToolScan::default();
    };
    let scratch = SCRATCH.with(std::cell::Cell::take).unwrap_or_default();
    let mut walker = Walker {
        path: Vec::with_capacity(16),
        folded: scratch.folded,
        tokens: scratch.tokens,
        cut: false,
        out: ToolScan::default(),
    };
    // One pass over the members (a lookup each would search the map six times).
    let (mut name, mut title, mut description, mut annotations) = (None, None, None, None);
    let (mut input, mut output) = (None, None);
    for (key, value) in object {
        match key.as_str() {
            "name" => name = Some(value),
            "title" => title = Some(value),
            "description" => description = Some(value),
            "annotations" => annotations = value.as_object(),
            "inputSchema" => input = Some(value),
            "outputSchema" => output = Some(value),
            _ => {}
        }
    }
    let claims_read_only = annotations
        .and_then(|a| a.get("readOnlyHint"))
        .and_then(Value::as_bool)
        == Some(true);
    let name_text = name.and_then(Value::as_str).unwrap_or_default();
    let mut claims = None;
    for (key, value) in [
        ("name", name),
        ("title", title),
        ("description", description),
    ] {
        if let Some(Value::String(text)) = value {
            walker.path.push(Step::Key(key));
            walker.string(text, false, key != "name");
            walker.path.pop();
            if claims_read_only && key == "description" {
                // While the walker still holds the description folded and cut into words.
                claims = Some(walker.read_only_claim(name_text, Some(text), input));
            }
        }
    }
    if let Some(Value::String(title)) = annotations.and_then(|a| a.get("title")) {
        walker
            .path
            .extend([Step::Key("annotations"), Step::Key("title")]);
        walker.string(title, false, true);
        walker.path.clear();
    }
    for (key, schema) in [("inputSchema", input), ("outputSchema", output)] {
        if let Some(schema) = schema {
            walker.path.push(Step::Key(key));
            walker.value(schema, false);
            walker.path.pop();
        }
    }
    if claims_read_only {
        let found = claims.unwrap_or_else(|| walker.read_only_claim(name_text, None, input));
        walker.out.findings.extend(found);
    }
    let scratch = Scratch {
        folded: std::mem::take(&mut walker.folded),
        tokens: std::mem::take(&mut walker.tokens),
    };
    SCRATCH.with(|cell| cell.set(Some(scratch)));
    walker.out
}

impl<'a> Walker<'a> {
    fn pointer(&self) -> String {
        let mut out = String::new();
        for step in &self.path {
            out.push('/');
            match step {
                Step::Key(key) if key.contains(['~', '/']) => {
                    out.push_str(&key.replace('~', "~0").replace('/', "~1"));
                }
                Step::Key(key) => out.push_str(key),
                Step::Index(i) => out.push_str(&i.to_string()),
            }
        }
        out
    }

    fn push(
        &mut self,
        rule: Rule,
        severity: Severity,
        key: bool,
        span: Range<usize>,
        excerpt: String,
        detail: Option<String>,
    ) {
        let pointer = self.pointer();
        self.out.findings.push(Finding {
            rule,
            severity,
            pointer,
            key,
            span,
            excerpt,
            detail,
        });
    }

    /// A schema value: every string and every member name, `secret` when it is the default or
    /// an example of a property whose name says it holds a secret.
    fn value(&mut self, value: &'a Value, secret: bool) {
        if self.path.len() > MAX_DEPTH {
            return;
        }
        match value {
            Value::String(text) => {
                self.string(text, false, true);
                if secret {
                    self.secret_default(text);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.path.push(Step::Index(i));
                    self.value(item, secret);
                    self.path.pop();
                }
            }
            Value::Object(members) => self.object(members, secret),
            _ => {}
        }
    }

    fn object(&mut self, members: &'a Map<String, Value>, secret: bool) {
        for (name, member) in members {
            self.path.push(Step::Key(name));
            self.string(name, true, true);
            let secret_here = secret
                || (matches!(name.as_str(), "default" | "examples" | "example" | "const")
                    && self.secret_property());
            self.value(member, secret_here);
            self.path.pop();
        }
    }

    /// Whether the object being walked is a property whose name says it holds a secret.
    fn secret_property(&self) -> bool {
        let n = self.path.len();
        n >= 3
            && matches!(self.path[n - 3], Step::Key("properties"))
            && matches!(self.path[n - 2], Step::Key(name) if secret_name(name))
    }

    /// A default or example of a secret property: a long random value is a soft finding.
    fn secret_default(&mut self, text: &str) {
        if text.len() >= 16 && secrets::entropy(text.as_bytes()) >= 3.5 {
            let span = 0..text.len();
            let masked = secrets::masked(text, &span);
            let detail = Some("a value of a property that holds a secret".to_owned());
            self.push(
                Rule::EmbeddedSecret,
                Severity::Soft,
                false,
                span,
                masked,
                detail,
            );
        }
    }

    /// Every rule that reads one string. `mentions`: keep the words that may name another
    /// server's tool (not in the tool's own name).
    fn string(&mut self, raw: &str, key: bool, mentions: bool) {
        if raw.len() < SHORT && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            self.cut = false;
            return self.word(raw, key);
        }
        let mut folded = std::mem::take(&mut self.folded);
        let mut tokens = std::mem::take(&mut self.tokens);
        let ascii = folded.fold(raw);
        let mut hidden = Vec::new();
        if !ascii {
            unicode::scan(raw, &mut hidden);
        }
        for hit in hidden {
            let wide =
                hit.span.start.saturating_sub(CONTEXT)..(hit.span.end + CONTEXT).min(raw.len());
            self.push(
                hit.rule,
                hit.severity,
                key,
                hit.span,
                excerpt(raw, &wide),
                hit.detail,
            );
        }

        tokenize(&folded.text, &mut tokens);
        let mut phrases = Vec::new();
        Matcher::text().find(&folded.text, &tokens, |phrase, range| {
            let bytes = tokens[range.start].start as usize..tokens[range.end - 1].end as usize;
            phrases.push((phrase.rule, phrase.severity, folded.raw_span(bytes)));
        });
        for (rule, severity, span) in phrases {
            let shown = excerpt(raw, &span);
            self.push(rule, severity, key, span, shown, None);
        }
        // References to another server's tool are looked for in text, not in identifiers.
        if mentions && !key && tokens.len() > 1 {
            self.mentions(raw, &folded, &tokens);
        }
        self.folded = folded;
        self.tokens = tokens;
        self.cut = true;

        let mut payloads = Vec::new();
        payload::scan(raw, &mut payloads);
        for found in payloads {
            let shown = excerpt(raw, &found.span);
            self.push(
                Rule::EncodedPayload,
                Severity::Hard,
                key,
                found.span,
                shown,
                Some(found.detail),
            );
        }
        let mut credentials = Vec::new();
        secrets::scan(raw, &self.folded, &self.tokens, &mut credentials);
        for secret in credentials {
            let masked = secrets::masked(raw, &secret.span);
            self.push(
                Rule::EmbeddedSecret,
                secret.severity,
                key,
                secret.span,
                masked,
                Some(secret.kind.to_owned()),
            );
        }
    }

    /// [`Walker::string`] for a string of fewer than [`SHORT`] letters, digits and `_`, such
    /// as most property names and enum values: one word, so no reference to another tool (that
    /// needs two), nothing invisible (ASCII), too short for a payload or a credential; only the
    /// phrases of one word (a file of secrets) can be in it. Folded, it is only lowercased.
    fn word(&mut self, raw: &str, key: bool) {
        let matcher = Matcher::text();
        let mut head = [0u8; 2];
        let n = raw.len().min(2);
        head[..n].copy_from_slice(&raw.as_bytes()[..n]);
        head.make_ascii_lowercase();
        if !matcher.may_start(&head[..n], raw.len()) {
            return; // the first test of [`Matcher::find`], before any copy
        }
        let mut lower = [0u8; SHORT];
        let lower = &mut lower[..raw.len()];
        lower.copy_from_slice(raw.as_bytes());
        lower.make_ascii_lowercase();
        let Ok(lower) = std::str::from_utf8(lower) else {
            return;
        };
        let mut phrases = Vec::new();
        matcher.find_word(lower, |phrase| {
            phrases.push((phrase.rule, phrase.severity));
        });
        for (rule, severity) in phrases {
            let span = 0..raw.len();
            let shown = excerpt(raw, &span);
            self.push(rule, severity, key, span, shown, None);
        }
    }

    /// Keeps the words of `raw` that could be another tool's name, with whether their
    /// sentence tells the agent what to do.
    fn mentions(&mut self, raw: &str, folded: &Folded, tokens: &[Token]) {
        let text = folded.text.as_str();
        let mut pointer = None;
        // The sentence of the last mention, `(start, end, directive)`: the next mention in it
        // has the same.
        let mut last: Option<(usize, usize, bool)> = None;
        for (i, token) in tokens.iter().enumerate() {
            // Cheap tests first: long enough, and a separator or a capital somewhere.
            if !token.word || token.end - token.start < 5 {
                continue;
            }
            let span = folded.raw_span(token.range());
            let word = &raw[span.clone()];
            let separated = text.as_bytes()[token.range()]
                .iter()
                .any(|b| matches!(b, b'_' | b'-' | b'.'));
            if !(separated || word.bytes().any(|b| b.is_ascii_uppercase())) || !distinctive(word) {
                continue;
            }
            let pointer = pointer.get_or_insert_with(|| self.pointer()).clone();
            let directive = match last {
                Some((start, end, directive)) if (start..end).contains(&i) => directive,
                _ => {
                    let (start, end) = sentence(text, tokens, i);
                    let directive = tokens[start..end].iter().enumerate().any(|(k, t)| {
                        directs(
                            t.text(text),
                            tokens.get(start + k + 1).map(|n| n.text(text)),
                        )
                    });
                    last = Some((start, end, directive));
                    directive
                }
            };
            self.out.mentions.push(Mention {
                word: token.text(text).into(),
                pointer,
                key: false,
                excerpt: excerpt(raw, &span),
                span,
                directive,
            });
        }
    }

    /// The claim `readOnlyHint: true` against the tool's name, description and properties:
    /// the findings, in that order. Called with a description right after
    /// [`Walker::string`] read it, so its words are not cut again.
    fn read_only_claim(
        &mut self,
        name: &str,
        description: Option<&str>,
        input: Option<&Value>,
    ) -> Vec<Finding> {
        let properties = input
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|p| p.keys().map(String::as_str));
        let mut scratch = Scratch {
            folded: std::mem::take(&mut self.folded),
            tokens: std::mem::take(&mut self.tokens),
        };
        let cut = std::mem::take(&mut self.cut);
        let found = claims::mismatches(
            name,
            description.map(|d| (d, cut)),
            properties,
            &mut scratch,
        );
        self.folded = scratch.folded;
        self.tokens = scratch.tokens;
        let mut out = Vec::new();
        for found in found {
            let (pointer, key, span, shown) = match &found.at {
                Where::Name(name) => ("/name".to_owned(), false, 0..name.len(), name.clone()),
                Where::Description(span) => {
                    let raw = description.unwrap_or_default();
                    (
                        "/description".to_owned(),
                        false,
                        span.clone(),
                        excerpt(raw, span),
                    )
                }
                Where::Property(property) => {
                    let escaped = property.replace('~', "~0").replace('/', "~1");
                    (
                        format!("/inputSchema/properties/{escaped}"),
                        true,
                        0..property.len(),
                        excerpt(property, &(0..property.len())),
                    )
                }
            };
            let detail = format!("claims readOnlyHint: true, but says `{}`", found.word);
            out.push(Finding {
                rule: Rule::CapabilityMismatch,
                severity: found.severity,
                pointer,
                key,
                span,
                excerpt: shown,
                detail: Some(detail),
            });
        }
        out
    }
}

/// Whether a property name says it holds a secret.
fn secret_name(name: &str) -> bool {
    claims::name_words(name).iter().any(|w| {
        matches!(
            w.as_str(),
            "key"
                | "apikey"
                | "token"
                | "secret"
                | "password"
                | "passwd"
                | "credential"
                | "credentials"
        )
    })
}

/// The tokens of the sentence around token `i`: `[start, end)`.
fn sentence(text: &str, tokens: &[Token], i: usize) -> (usize, usize) {
    let stop = |k: usize| {
        let t = tokens[k];
        !t.word && matches!(t.text(text), "." | "!" | "?" | ";")
    };
    let new_line = |k: usize| {
        k > 0
            && text.as_bytes()[tokens[k - 1].end as usize..tokens[k].start as usize]
                .contains(&b'\n')
    };
    let mut start = i;
    while start > 0 && !stop(start - 1) && !new_line(start) {
        start -= 1;
    }
    let mut end = i + 1;
    while end < tokens.len() && !stop(end) && !new_line(end) {
        end += 1;
    }
    (start, end)
}

/// Whether a word tells the agent what to do.
fn directs(word: &str, next: Option<&str>) -> bool {
    matches!(
        word,
        "must"
            | "shall"
            | "instead"
            | "always"
            | "never"
            | "ensure"
            | "change"
            | "replace"
            | "redirect"
            | "override"
            | "ignore"
            | "don't"
            | "dont"
            | "required"
            | "mandatory"
    ) || (word == "make" && next == Some("sure"))
        || (word == "do" && next == Some("not"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of JSON Schema (keywords, type names) that most of a schema's strings are: no rule
    /// finds anything in them (a test checks it).
    const SCHEMA_WORDS: &[&str] = &[
        "type",
        "properties",
        "required",
        "items",
        "description",
        "title",
        "default",
        "enum",
        "const",
        "format",
        "pattern",
        "$schema",
        "$ref",
        "$defs",
        "$id",
        "definitions",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "examples",
        "additionalProperties",
        "uniqueItems",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "nullable",
        "deprecated",
        "readOnly",
        "writeOnly",
        "string",
        "object",
        "integer",
        "number",
        "boolean",
        "array",
        "null",
    ];

    /// What the walk finds in `word`, a string of an input schema (a member name when `key`).
    fn scanned(word: &str, key: bool) -> ToolScan {
        let mut walker = Walker {
            path: vec![Step::Key("inputSchema")],
            folded: Folded::default(),
            tokens: Vec::new(),
            cut: false,
            out: ToolScan::default(),
        };
        walker.string(word, key, true);
        walker.out
    }

    /// A string of one short word ([`Walker::word`]) is still read for the phrases of one word:
    /// files of secrets, as property names or values, in any case.
    #[test]
    fn one_word_strings_find_the_phrases_of_one_word() {
        for (word, severity) in [
            ("id_rsa", Severity::Hard),
            ("ID_ED25519_pub", Severity::Hard),
            ("authorized_keys", Severity::Hard),
            ("known_hosts", Severity::Hard),
            ("Credentials", Severity::Soft),
            ("kubeconfig", Severity::Soft),
        ] {
            for key in [false, true] {
                let found: Vec<_> = scanned(word, key)
                    .findings
                    .iter()
                    .map(|f| (f.rule, f.severity, f.span.clone(), f.key))
                    .collect();
                assert_eq!(
                    found,
                    [(Rule::SensitivePath, severity, 0..word.len(), key)],
                    "{word}"
                );
            }
        }
    }

    /// The fast path skips only what the rules would find nothing in.
    #[test]
    fn the_words_of_json_schema_are_clean() {
        for word in SCHEMA_WORDS {
            for key in [false, true] {
                assert_eq!(scanned(word, key), ToolScan::default(), "{word}");
            }
        }
    }
}
