//! The JSON-RPC error of a refused request (a `tools/call`, a read, a prompt, a completion, a
//! task): every reason, and for missing scopes the step-up challenge of the MCP authorization
//! specification (`insufficient_scope`).

use ::rmcp::ErrorData;
use serde_json::{Map, Value, json};

use capability_core::authz::DenyReason;

use crate::visibility::WithheldReason;

/// The JSON-RPC error code of a refused call: `-32602` (invalid params), the code MCP gives an
/// unknown tool, so that a hidden tool and a missing one answer alike by code.
pub const REFUSED_CODE: i32 = -32602;

/// What a refused request asked for: the key of `data` that names it, and the words of the
/// message.
#[derive(Clone, Copy)]
pub(super) enum Asked<'a> {
    Tool(&'a str),
    Resource(&'a str),
    Prompt(&'a str),
    Completion(&'a str),
    Task(&'a str),
}

impl Asked<'_> {
    fn key(self) -> &'static str {
        match self {
            Asked::Tool(_) => "tool",
            Asked::Resource(_) => "uri",
            Asked::Prompt(_) | Asked::Completion(_) => "prompt",
            Asked::Task(_) => "task",
        }
    }

    fn name(self) -> String {
        match self {
            Asked::Tool(name) | Asked::Resource(name) | Asked::Prompt(name) => name.to_owned(),
            Asked::Completion(name) | Asked::Task(name) => name.to_owned(),
        }
    }

    fn message(self) -> String {
        match self {
            Asked::Tool(name) => format!("call of `{name}` refused"),
            Asked::Resource(uri) => format!("`{uri}` refused"),
            Asked::Prompt(name) => format!("prompt `{name}` refused"),
            Asked::Completion(name) => format!("completion for `{name}` refused"),
            Asked::Task(id) => format!("task `{id}` refused"),
        }
    }
}

/// A refused request: what it asked for, the caller's role, and every reason.
pub(super) struct Refusal<'a> {
    pub(super) asked: Asked<'a>,
    pub(super) role: Option<&'a str>,
    /// Who the transport authenticated, if anyone: named in `data.principal`.
    pub(super) principal: Option<&'a capability_audit::Principal>,
    pub(super) reasons: Vec<WithheldReason>,
    /// The scopes the tool requires (for the `scope` of the challenge).
    pub(super) required_scopes: &'a [String],
    pub(super) resource_metadata: Option<&'a str>,
    /// Set when the audited dispatch said more than "denied" (degraded, audit failed).
    pub(super) dispatch: Option<String>,
}

impl Refusal<'_> {
    pub(super) fn into_error(self) -> ErrorData {
        let mut texts: Vec<String> = self.reasons.iter().map(ToString::to_string).collect();
        // A refusal of the dispatcher's own (a degraded session, a trail that cannot be
        // written) says so in the message too, not only in `data`.
        texts.extend(self.dispatch.iter().cloned());
        let message = format!("{}: {}", self.asked.message(), texts.join("; "));
        let mut data = Map::new();
        if let Asked::Completion(reference) = self.asked {
            data.insert("ref".to_owned(), json!(reference));
        } else {
            data.insert(self.asked.key().to_owned(), json!(self.asked.name()));
        }
        data.insert("role".to_owned(), json!(self.role));
        if let Some(principal) = self.principal {
            data.insert("principal".to_owned(), json!(principal));
        }
        let reasons: Vec<Value> = self.reasons.iter().map(reason_json).collect();
        data.insert("reasons".to_owned(), Value::Array(reasons));
        if let Some(dispatch) = self.dispatch {
            data.insert("dispatch".to_owned(), Value::String(dispatch));
        }
        let missing = missing_scopes(&self.reasons);
        if !missing.is_empty() {
            // Every scope the tool needs, so that one step-up grants it all (the missing ones
            // are among them).
            let mut scope: Vec<&str> = self.required_scopes.iter().map(String::as_str).collect();
            for m in &missing {
                if !scope.contains(&m.as_str()) {
                    scope.push(m);
                }
            }
            let scope = scope.join(" ");
            let description = format!("missing scopes: {}", missing.join(" "));
            data.insert("error".to_owned(), json!("insufficient_scope"));
            data.insert("error_description".to_owned(), json!(description));
            data.insert("scope".to_owned(), json!(scope));
            data.insert("missingScopes".to_owned(), json!(missing));
            data.insert(
                "wwwAuthenticate".to_owned(),
                json!(www_authenticate(
                    &scope,
                    &description,
                    self.resource_metadata
                )),
            );
        }
        ErrorData::new(
            ::rmcp::model::ErrorCode(REFUSED_CODE),
            message,
            Some(Value::Object(data)),
        )
    }
}

/// The `WWW-Authenticate` challenge of a step-up (RFC 6750 §3, as the MCP authorization
/// specification uses it): `Bearer error="insufficient_scope", scope="a b",
/// resource_metadata="…", error_description="…"`.
///
/// ```
/// use capability::rmcp::www_authenticate;
///
/// assert_eq!(
///     www_authenticate("k8s:write", "missing scopes: k8s:write", None),
///     r#"Bearer error="insufficient_scope", scope="k8s:write", error_description="missing scopes: k8s:write""#
/// );
/// ```
pub fn www_authenticate(scope: &str, description: &str, resource_metadata: Option<&str>) -> String {
    let mut header = format!(
        r#"Bearer error="insufficient_scope", scope="{}""#,
        quoted(scope)
    );
    if let Some(url) = resource_metadata {
        header.push_str(&format!(r#", resource_metadata="{}""#, quoted(url)));
    }
    header.push_str(&format!(r#", error_description="{}""#, quoted(description)));
    header
}

/// A quoted-string's content: no `"` or `\`, no control characters.
fn quoted(text: &str) -> String {
    text.chars()
        .filter(|c| *c != '"' && *c != '\\' && !c.is_control())
        .collect()
}

/// Every missing scope of the reasons (a grant's too), sorted, once each; empty unless missing
/// scopes are the only reasons (a step-up would not help a call above the role's ceiling).
fn missing_scopes(reasons: &[WithheldReason]) -> Vec<String> {
    fn is_scope(reason: &DenyReason) -> bool {
        match reason {
            DenyReason::MissingScopes { .. } => true,
            DenyReason::Grant { because, .. } => is_scope(because),
            _ => false,
        }
    }
    let only_scopes = reasons
        .iter()
        .all(|r| matches!(r, WithheldReason::Policy(reason) if is_scope(reason)));
    if !only_scopes {
        return Vec::new();
    }
    fn collect(reason: &DenyReason, into: &mut Vec<String>) {
        match reason {
            DenyReason::MissingScopes { scopes } => into.extend(scopes.iter().cloned()),
            DenyReason::Grant { because, .. } => collect(because, into),
            _ => {}
        }
    }
    let mut missing = Vec::new();
    for reason in reasons {
        if let WithheldReason::Policy(reason) = reason {
            collect(reason, &mut missing);
        }
    }
    missing.sort();
    missing.dedup();
    missing
}

/// One reason as JSON: a policy's reason as the audit trail writes it (`{"reason":
/// "ceiling_exceeded", ...}`), the others as `{"reason": "drift" | "duplicate_name" |
/// "not_listed" | "name_taken" | "flagged"}` (a flag with its `code`, `rule` and `field`);
/// each with its `message`.
fn reason_json(reason: &WithheldReason) -> Value {
    let mut value = match reason {
        WithheldReason::Policy(reason) => serde_json::to_value(reason).unwrap_or(Value::Null),
        WithheldReason::Drift(_) => json!({"reason": "drift"}),
        WithheldReason::Flagged {
            code, rule, field, ..
        } => json!({"reason": "flagged", "code": code, "rule": rule.name(), "field": field}),
        WithheldReason::DuplicateName => json!({"reason": "duplicate_name"}),
        WithheldReason::NotListed => json!({"reason": "not_listed"}),
        WithheldReason::NameTaken { shown, by } => {
            json!({"reason": "name_taken", "shown": shown, "by": by})
        }
    };
    if let Value::Object(object) = &mut value {
        object.insert("message".to_owned(), Value::String(reason.to_string()));
    }
    value
}
