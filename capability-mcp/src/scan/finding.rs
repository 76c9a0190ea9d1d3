//! What the scan reports: a [`Rule`] with its stable code, a [`Severity`], and where in the
//! descriptor it found what ([`Finding`]). Nothing here looks at text; the rules are in the
//! sibling modules.

use std::fmt;
use std::ops::Range;

/// How much a finding weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Reported (on the listing, by `capability check`), never hides a tool by itself.
    Soft,
    /// Hides the tool by default: a listing withholds it with
    /// [`WithheldReason::Flagged`](crate::WithheldReason::Flagged).
    Hard,
}

impl Severity {
    /// `"soft"` or `"hard"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Severity::Soft => "soft",
            Severity::Hard => "hard",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule of the scan. Its [`code`](Rule::code) is stable: documented in `docs/scan.md`,
/// written in audit records and deny messages, never reused for another rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// Characters of the Unicode TAG block (U+E0000-E007F): invisible, and each one spells an
    /// ASCII character. Always hard; the finding's detail is what they spell.
    TagCharacters,
    /// Bidirectional controls (embeddings, overrides, isolates: hard; marks: soft), which make
    /// text read differently from how it is stored.
    BidiControl,
    /// Zero-width characters inside an ASCII word or in a run (hard), elsewhere (soft). A
    /// joiner between emoji or letters of scripts that need it is no finding.
    ZeroWidth,
    /// Variation selectors used as a payload: two or more in a row (hard), each one a byte.
    VariationSelectors,
    /// Other invisible format characters (soft hyphens, invisible operators, fillers): soft.
    InvisibleFormat,
    /// A phrase of prompt injection, after Unicode normalization (NFKC, invisible characters
    /// dropped, look-alike letters folded): "ignore previous instructions", "do not tell the
    /// user", "before answering, read ...", `<IMPORTANT>` tags. Hard.
    InjectionPhrase,
    /// A reference to a file of secrets (`~/.ssh`, `id_rsa`, `.env`, `mcp.json`,
    /// `.aws/credentials`, ...): hard; the bare word "credentials": soft.
    SensitivePath,
    /// An instruction addressed to the agent or model ("you must", "always call", "make sure
    /// to", "the assistant should"): soft.
    AgentDirective,
    /// A description naming another server's tool: hard when the sentence tells the agent what
    /// to do with it ("must", "instead", "make sure", "change"), soft otherwise.
    CrossServerReference,
    /// Two servers' tools whose shown names (or titles) differ only by look-alike characters,
    /// case or separators: both hard.
    ConfusableName,
    /// A base64 or hex run that decodes to a shell command or to text with an injection
    /// phrase: hard; the detail is the decoded text.
    EncodedPayload,
    /// A tool that claims `readOnlyHint: true` whose name, description or schema says it
    /// writes, sends, deletes or executes: hard when its name or a plain statement of its
    /// description says so, soft otherwise.
    CapabilityMismatch,
    /// A credential in the descriptor: AWS access key ids, private key blocks, GitHub tokens
    /// and a few other known formats (hard), a high-entropy `api_key=...` (soft).
    EmbeddedSecret,
}

impl Rule {
    /// Every rule, in code order.
    pub const ALL: [Rule; 13] = [
        Rule::TagCharacters,
        Rule::BidiControl,
        Rule::ZeroWidth,
        Rule::VariationSelectors,
        Rule::InvisibleFormat,
        Rule::InjectionPhrase,
        Rule::SensitivePath,
        Rule::AgentDirective,
        Rule::CrossServerReference,
        Rule::ConfusableName,
        Rule::EncodedPayload,
        Rule::CapabilityMismatch,
        Rule::EmbeddedSecret,
    ];

    /// The stable code, `CAP-SCAN-NNN`.
    pub const fn code(self) -> &'static str {
        match self {
            Rule::TagCharacters => "CAP-SCAN-001",
            Rule::BidiControl => "CAP-SCAN-002",
            Rule::ZeroWidth => "CAP-SCAN-003",
            Rule::VariationSelectors => "CAP-SCAN-004",
            Rule::InvisibleFormat => "CAP-SCAN-005",
            Rule::InjectionPhrase => "CAP-SCAN-010",
            Rule::SensitivePath => "CAP-SCAN-011",
            Rule::AgentDirective => "CAP-SCAN-020",
            Rule::CrossServerReference => "CAP-SCAN-030",
            Rule::ConfusableName => "CAP-SCAN-031",
            Rule::EncodedPayload => "CAP-SCAN-040",
            Rule::CapabilityMismatch => "CAP-SCAN-050",
            Rule::EmbeddedSecret => "CAP-SCAN-060",
        }
    }

    /// A short kebab-case name, e.g. `tag-characters`.
    pub const fn name(self) -> &'static str {
        match self {
            Rule::TagCharacters => "tag-characters",
            Rule::BidiControl => "bidi-control",
            Rule::ZeroWidth => "zero-width",
            Rule::VariationSelectors => "variation-selectors",
            Rule::InvisibleFormat => "invisible-format",
            Rule::InjectionPhrase => "injection-phrase",
            Rule::SensitivePath => "sensitive-path",
            Rule::AgentDirective => "agent-directive",
            Rule::CrossServerReference => "cross-server-reference",
            Rule::ConfusableName => "confusable-name",
            Rule::EncodedPayload => "encoded-payload",
            Rule::CapabilityMismatch => "capability-mismatch",
            Rule::EmbeddedSecret => "embedded-secret",
        }
    }

    /// The rule with this code.
    pub fn from_code(code: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.code() == code)
    }
}

impl fmt::Display for Rule {
    /// `CAP-SCAN-001 tag-characters`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code(), self.name())
    }
}

/// What one rule found in one string of a tool descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// How much it weighs.
    pub severity: Severity,
    /// Where: a JSON Pointer (RFC 6901) into the tool object, e.g. `/description` or
    /// `/inputSchema/properties/path/description`.
    pub pointer: String,
    /// Whether the text is the name of the member `pointer` points to (a property name),
    /// rather than its value.
    pub key: bool,
    /// The bytes of that string (as the server sent it, JSON escapes undone) the rule found.
    pub span: Range<usize>,
    /// What was found, printable on one line: invisible and control characters written as
    /// `\u{...}`, at most about 80 characters, secrets masked.
    pub excerpt: String,
    /// What it means, when the text does not say it: what TAG characters or a payload spell,
    /// which tool a reference names.
    pub detail: Option<String>,
}

impl Finding {
    /// The excerpt, and the detail when there is one: `"excerpt" (detail)`.
    pub fn what(&self) -> String {
        match &self.detail {
            Some(detail) => format!("`{}` ({detail})", self.excerpt),
            None => format!("`{}`", self.excerpt),
        }
    }

    /// Where, for a message: the pointer, with `(name)` for a member name.
    pub fn place(&self) -> String {
        let pointer = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        if self.key {
            format!("{pointer} (name)")
        } else {
            pointer.to_owned()
        }
    }
}

impl fmt::Display for Finding {
    /// `CAP-SCAN-010 injection-phrase (hard) at /description 12..40: `...``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) at {} {}..{}: {}",
            self.rule,
            self.severity,
            self.place(),
            self.span.start,
            self.span.end,
            self.what()
        )
    }
}

/// The longest excerpt, in characters, before it is cut.
const EXCERPT_CHARS: usize = 80;

/// `raw[span]` (widened to character boundaries), printable on one line: characters that do
/// not print, or print as nothing, written as `\u{...}`; cut after [`EXCERPT_CHARS`].
pub(crate) fn excerpt(raw: &str, span: &Range<usize>) -> String {
    let mut start = span.start.min(raw.len());
    while !raw.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = span.end.clamp(start, raw.len());
    while !raw.is_char_boundary(end) {
        end += 1;
    }
    let shown = &raw[start..end];
    if shown.len() <= EXCERPT_CHARS && shown.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        return shown.to_owned(); // printable ASCII, short: itself
    }
    let mut out = String::with_capacity(shown.len().min(4 * EXCERPT_CHARS));
    for (n, c) in shown.chars().enumerate() {
        if n == EXCERPT_CHARS {
            out.push('…');
            break;
        }
        if printable(c) {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{{{:X}}}", c as u32));
        }
    }
    out
}

/// Whether a character shows as itself: not a control, not invisible, not a bidi control.
pub(crate) fn printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !(c.is_control() || c.is_whitespace() || super::chars::invisible(c).is_some())
}
