//! Shadow mode: the loop runs beside the primary path, as an advisor, and its result can only
//! ever be attached as metadata.
//!
//! # The contract
//!
//! - **Read-only tools only.** [`run_shadow`] refuses to start ([`ShadowError::NotReadOnly`])
//!   when the decider would show the model any tool that is not read-only; the model is not
//!   called and nothing is recorded. Every tool call still goes through the audited dispatch.
//! - **Metadata only, by construction.** A [`ShadowResult`] has no public field, no
//!   constructor but [`ShadowResult::parse`] and [`run_shadow`], and no method that yields a
//!   decision: it holds `root_cause_check`, `evidence_used`, `confidence_delta`,
//!   `missing_evidence`, `next_step` and `parse_status` (and, after a degrade, its reason), and
//!   the only ways out are [`ShadowResult::into_metadata`] (a JSON map) and
//!   [`ShadowResult::attach`], which writes that map under the one key [`METADATA_KEY`] of
//!   the primary's metadata and touches nothing else. Any other field the model writes is
//!   dropped.
//! - **The confidence delta is in [-0.15, 0].** A positive value becomes 0, a value below
//!   -0.15 becomes -0.15 ([`clamp_confidence_delta`]): the shadow can only ever lower
//!   confidence, a little.
//! - **Never an error for what the model says.** The final text is parsed as a JSON object
//!   (bare, or in a fenced ```` ```json ```` block); text without one gives
//!   `parse_status = "unparsed"`, fields of the wrong type `"partial"`, a degraded loop
//!   `"degraded"`. Strings are cut at [`MAX_TEXT_CHARS`] characters, lists at
//!   [`MAX_LIST_ITEMS`] items.

use std::fmt;

use serde_json::{Map, Value};

use capability_audit::Caller;
use capability_core::authz::Authorize;

use crate::driver::{AgentLoop, Degrade, LoopOutcome, Shown, ToolExecutor, ToolSource};
use crate::model::{Message, Model};

/// The key of the primary's metadata a shadow result is attached under.
pub const METADATA_KEY: &str = "shadow";

/// The lowest confidence delta recorded.
pub const MIN_CONFIDENCE_DELTA: f64 = -0.15;

/// The longest string kept from the model's answer, in characters.
pub const MAX_TEXT_CHARS: usize = 1000;

/// The most items kept of a list in the model's answer.
pub const MAX_LIST_ITEMS: usize = 32;

/// Clamps a confidence delta to [-0.15, 0]: a positive value becomes 0 (and so does `-0.0`).
/// `None` for a value that is not a number (NaN).
pub fn clamp_confidence_delta(delta: f64) -> Option<f64> {
    if delta.is_nan() {
        return None;
    }
    let clamped = delta.clamp(MIN_CONFIDENCE_DELTA, 0.0);
    Some(if clamped == 0.0 { 0.0 } else { clamped })
}

/// How the shadow run's final text was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseStatus {
    /// A JSON object with the expected fields.
    Parsed,
    /// A JSON object, some of whose fields had the wrong type (those were dropped).
    Partial,
    /// No JSON object with any expected field: nothing was taken from the text.
    Unparsed,
    /// The loop degraded: there was no final text.
    Degraded,
}

impl ParseStatus {
    /// `parsed`, `partial`, `unparsed` or `degraded`.
    pub fn as_str(self) -> &'static str {
        match self {
            ParseStatus::Parsed => "parsed",
            ParseStatus::Partial => "partial",
            ParseStatus::Unparsed => "unparsed",
            ParseStatus::Degraded => "degraded",
        }
    }
}

impl fmt::Display for ParseStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a shadow run found: metadata for the primary decision, never a decision. See the
/// [module's contract](self).
#[derive(Clone, Debug, PartialEq)]
pub struct ShadowResult {
    root_cause_check: Option<String>,
    evidence_used: Vec<String>,
    confidence_delta: Option<f64>,
    missing_evidence: Vec<String>,
    next_step: Option<String>,
    parse_status: ParseStatus,
    degrade: Option<String>,
}

/// Something whose result carries metadata: what a shadow result can be attached to.
pub trait HasMetadata {
    /// The metadata map.
    fn metadata_mut(&mut self) -> &mut Map<String, Value>;
}

impl HasMetadata for Map<String, Value> {
    fn metadata_mut(&mut self) -> &mut Map<String, Value> {
        self
    }
}

impl ShadowResult {
    /// Reads the model's final text: a JSON object, bare or in a fenced block. Never fails:
    /// text that cannot be read gives [`ParseStatus::Unparsed`].
    pub fn parse(text: &str) -> ShadowResult {
        let mut result = ShadowResult::empty(ParseStatus::Unparsed);
        let Some(object) = find_object(text) else {
            return result;
        };
        let mut known = false;
        let mut wrong = false;
        let mut take = |key: &str| {
            let value = object.get(key)?;
            known = true;
            Some(value)
        };
        let text_field = |value: Option<&Value>, wrong: &mut bool| match value {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(cut(s)),
            Some(Value::Bool(b)) => Some(b.to_string()),
            Some(_) => {
                *wrong = true;
                None
            }
        };
        let list_field = |value: Option<&Value>, wrong: &mut bool| match value {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![cut(s)],
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|item| match item {
                    Value::String(s) => Some(cut(s)),
                    _ => {
                        *wrong = true;
                        None
                    }
                })
                .take(MAX_LIST_ITEMS)
                .collect(),
            Some(_) => {
                *wrong = true;
                Vec::new()
            }
        };
        result.root_cause_check = text_field(take("root_cause_check"), &mut wrong);
        result.evidence_used = list_field(take("evidence_used"), &mut wrong);
        result.missing_evidence = list_field(take("missing_evidence"), &mut wrong);
        result.next_step = text_field(take("next_step"), &mut wrong);
        result.confidence_delta = match take("confidence_delta") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => n.as_f64().and_then(clamp_confidence_delta),
            Some(_) => {
                wrong = true;
                None
            }
        };
        result.parse_status = match (known, wrong) {
            (false, _) => ParseStatus::Unparsed,
            (true, false) => ParseStatus::Parsed,
            (true, true) => ParseStatus::Partial,
        };
        result
    }

    fn empty(parse_status: ParseStatus) -> ShadowResult {
        ShadowResult {
            root_cause_check: None,
            evidence_used: Vec::new(),
            confidence_delta: None,
            missing_evidence: Vec::new(),
            next_step: None,
            parse_status,
            degrade: None,
        }
    }

    fn degraded(degrade: &Degrade) -> ShadowResult {
        let mut result = ShadowResult::empty(ParseStatus::Degraded);
        result.degrade = Some(cut(&degrade.to_string()));
        result
    }

    /// Whether the shadow run confirmed the root cause, in its words.
    pub fn root_cause_check(&self) -> Option<&str> {
        self.root_cause_check.as_deref()
    }

    /// The evidence it used.
    pub fn evidence_used(&self) -> &[String] {
        &self.evidence_used
    }

    /// The change of confidence it suggests, in [-0.15, 0].
    pub fn confidence_delta(&self) -> Option<f64> {
        self.confidence_delta
    }

    /// The evidence it missed.
    pub fn missing_evidence(&self) -> &[String] {
        &self.missing_evidence
    }

    /// The next step it suggests.
    pub fn next_step(&self) -> Option<&str> {
        self.next_step.as_deref()
    }

    /// How its final text was read.
    pub fn parse_status(&self) -> ParseStatus {
        self.parse_status
    }

    /// The metadata, as a JSON map: the six fields, and `degrade` (its reason) after a
    /// degrade.
    pub fn into_metadata(self) -> Map<String, Value> {
        let mut map = Map::new();
        let text = |s: Option<String>| s.map_or(Value::Null, Value::String);
        map.insert("root_cause_check".into(), text(self.root_cause_check));
        map.insert("evidence_used".into(), self.evidence_used.into());
        map.insert(
            "confidence_delta".into(),
            self.confidence_delta.map_or(Value::Null, Value::from),
        );
        map.insert("missing_evidence".into(), self.missing_evidence.into());
        map.insert("next_step".into(), text(self.next_step));
        map.insert("parse_status".into(), self.parse_status.as_str().into());
        if let Some(degrade) = self.degrade {
            map.insert("degrade".into(), degrade.into());
        }
        map
    }

    /// Attaches the metadata to the primary's, under [`METADATA_KEY`]; nothing else of the
    /// primary is touched.
    pub fn attach(self, primary: &mut impl HasMetadata) {
        primary
            .metadata_mut()
            .insert(METADATA_KEY.to_owned(), Value::Object(self.into_metadata()));
    }
}

/// Why a shadow run did not start.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShadowError {
    /// The decider would show the model tools that are not read-only: not an advisor role.
    NotReadOnly {
        /// Those tools.
        tools: Vec<String>,
    },
    /// The server's tool list could not be read.
    InvalidTools {
        /// What is wrong, as text.
        error: String,
    },
}

impl fmt::Display for ShadowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShadowError::NotReadOnly { tools } => write!(
                f,
                "a shadow run takes read-only tools only; the role would be shown {}",
                tools.join(", ")
            ),
            ShadowError::InvalidTools { error } => {
                write!(f, "the server's tool list cannot be read: {error}")
            }
        }
    }
}

impl std::error::Error for ShadowError {}

/// One shadow run of `agent_loop`: as [`AgentLoop::run`], refused unless every tool the
/// decider would show is read-only, and ending in a [`ShadowResult`] whatever the model says.
pub fn run_shadow<M, D, X>(
    agent_loop: &AgentLoop<'_>,
    model: &mut M,
    messages: &mut Vec<Message>,
    source: &ToolSource<'_>,
    decider: &D,
    caller: Caller<'_>,
    executor: &X,
) -> Result<ShadowResult, ShadowError>
where
    M: Model + ?Sized,
    D: Authorize + ?Sized,
    X: ToolExecutor + ?Sized,
{
    let shown = Shown::of(source, decider).map_err(|error| ShadowError::InvalidTools {
        error: error.to_string(),
    })?;
    let writers: Vec<String> = shown
        .visibility()
        .visible()
        .filter(|m| !m.read_only())
        .map(|m| m.name().to_owned())
        .collect();
    if !writers.is_empty() {
        return Err(ShadowError::NotReadOnly { tools: writers });
    }
    Ok(
        match agent_loop.run_shown(model, messages, &shown, decider, caller, executor) {
            LoopOutcome::Answer { text, .. } => ShadowResult::parse(&text),
            LoopOutcome::Degraded { degrade, .. } => ShadowResult::degraded(&degrade),
        },
    )
}

/// The first JSON object in `text`: in a fenced block, the whole text, or from its first `{`
/// to its last `}`.
fn find_object(text: &str) -> Option<Map<String, Value>> {
    let object = |candidate: &str| match serde_json::from_str::<Value>(candidate.trim()) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    };
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        // Skip the info string (`json`) up to the end of the line.
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let body = &after[body_start..];
        let Some(end) = body.find("```") else { break };
        if let Some(map) = object(&body[..end]) {
            return Some(map);
        }
        rest = &body[end + 3..];
    }
    if let Some(map) = object(text) {
        return Some(map);
    }
    let (first, last) = (text.find('{')?, text.rfind('}')?);
    (first < last)
        .then(|| object(&text[first..=last]))
        .flatten()
}

/// At most [`MAX_TEXT_CHARS`] characters of `text`.
fn cut(text: &str) -> String {
    text.chars().take(MAX_TEXT_CHARS).collect()
}
