//! How a request that did not succeed reads: the server's own error kept whole, or the
//! engine's refusal with every reason as data ([`refused_by`]), as `GovernedServer` answers.

use ::rmcp::ErrorData;
use ::rmcp::model::{CallToolResponse, ErrorCode};
use serde_json::{Value, json};

use capability::audit::{Outcome, Principal};
use capability::authz::DenyReason;
use capability::rmcp::REFUSED_CODE;

use crate::serve::who::Who;

/// Why a request passed on to a server did not succeed: the server's own error, kept whole (its
/// code and data reach the client as the server gave them: `-32021` with the capabilities it
/// requires, say), or why no answer came.
#[derive(Debug)]
pub(crate) enum Unanswered {
    /// The server answered with this error.
    Server(ErrorData),
    /// No answer: the server is gone, the connection failed, the call was cancelled.
    Gone(String),
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unanswered::Server(error) => f.write_str(&error.message),
            Unanswered::Gone(why) => f.write_str(why),
        }
    }
}

impl From<String> for Unanswered {
    fn from(why: String) -> Self {
        Unanswered::Gone(why)
    }
}

impl From<Unanswered> for ErrorData {
    fn from(unanswered: Unanswered) -> Self {
        match unanswered {
            Unanswered::Server(error) => error,
            Unanswered::Gone(why) => ErrorData::internal_error(why, None),
        }
    }
}

/// What a server's failure to answer tells the client.
pub(crate) fn unanswered(server: &str) -> impl Fn(::rmcp::ServiceError) -> Unanswered + '_ {
    move |e| match e {
        ::rmcp::ServiceError::McpError(error) => Unanswered::Server(error),
        other => Unanswered::Gone(format!("the MCP server `{server}` did not answer: {other}")),
    }
}

/// A server's answer, for the record: the result, or what the server asked for instead.
pub(crate) struct Answer<T>(pub(crate) T);

impl serde::Serialize for Answer<CallToolResponse> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            CallToolResponse::Complete(result) => result.serialize(serializer),
            CallToolResponse::InputRequired(asked) => asked.serialize(serializer),
            CallToolResponse::Task(task) => task.serialize(serializer),
            _ => serializer.serialize_str("a response this build does not know"),
        }
    }
}

/// The client's answer to a call's `outcome`: its output, the tool's error, or the refusal
/// `refused` words.
pub(crate) fn answered<O, E: Into<Unanswered>>(
    outcome: Outcome<O, E>,
    refused: impl Fn(&Why) -> ErrorData,
) -> Result<O, ErrorData> {
    match outcome {
        Outcome::Done(output) => Ok(output),
        Outcome::Failed(error) => Err(error.into().into()),
        Outcome::Denied(denial) => Err(refused(&Why::denied(&denial))),
        Outcome::Degrade(reason) => Err(refused(&Why::dispatch(reason.to_string()))),
        Outcome::AuditFailed(error) => Err(refused(&Why::dispatch(format!(
            "its audit record could not be written: {error}"
        )))),
    }
}

/// Why a request is refused, as its client is told: the decision's reasons (each with its
/// code), or the dispatcher's own word (a degraded session, a trail that cannot be written);
/// and whose request it was.
#[derive(Clone, Debug)]
pub(crate) struct Why {
    text: String,
    role: Option<String>,
    principal: Option<Principal>,
    reasons: Vec<Value>,
    dispatch: Option<String>,
}

impl Why {
    /// `who`'s request refused for `reasons`.
    pub(crate) fn of(who: &Who, reasons: &[DenyReason]) -> Why {
        Why {
            text: reasons
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            role: Some(who.role.clone()),
            principal: who.principal.clone(),
            reasons: reasons.iter().map(reason_json).collect(),
            dispatch: None,
        }
    }

    /// A refusal the decision gave.
    fn denied(denial: &capability::authz::Denial) -> Why {
        let value = serde_json::to_value(denial).unwrap_or(Value::Null);
        let reasons: Vec<Value> = value["reasons"].as_array().cloned().unwrap_or_default();
        Why {
            text: denial.to_string(),
            role: value["role"].as_str().map(str::to_owned),
            principal: None,
            reasons,
            dispatch: None,
        }
    }

    /// A refusal of the dispatcher's own.
    pub(crate) fn dispatch(text: String) -> Why {
        Why {
            dispatch: Some(text.clone()),
            text,
            role: None,
            principal: None,
            reasons: Vec::new(),
        }
    }

    /// This refusal, of `who`'s request (its role and principal named).
    pub(crate) fn of_who(&self, who: &Who) -> Why {
        Why {
            role: self.role.clone().or_else(|| Some(who.role.clone())),
            principal: self.principal.clone().or_else(|| who.principal.clone()),
            ..self.clone()
        }
    }
}

/// A reason as data: its tagged JSON (`{"reason": "not_allowed", ...}`) and its words.
fn reason_json(reason: &DenyReason) -> Value {
    let mut value = serde_json::to_value(reason).unwrap_or(Value::Null);
    if let Value::Object(object) = &mut value {
        object.insert("message".to_owned(), Value::String(reason.to_string()));
    }
    value
}

/// The error of a refused `kind` (`tool`, `resource`, `prompt`) shown as `shown`, refused by
/// `by` (the engine's name: `capability-gateway`, `capability-proxy`): its message says why,
/// its data names what was asked, the caller's role and principal, and every reason with its
/// code (as `GovernedServer` answers).
pub(crate) fn refused_by(by: &str, kind: &str, shown: &str, why: &Why) -> ErrorData {
    let key = if kind == "resource" { "uri" } else { kind };
    let mut data = serde_json::Map::new();
    data.insert(key.to_owned(), json!(shown));
    data.insert("role".to_owned(), json!(why.role));
    if let Some(principal) = &why.principal {
        data.insert("principal".to_owned(), json!(principal));
    }
    data.insert("reasons".to_owned(), Value::Array(why.reasons.clone()));
    if let Some(dispatch) = &why.dispatch {
        data.insert("dispatch".to_owned(), json!(dispatch));
    }
    ErrorData::new(
        ErrorCode(REFUSED_CODE),
        format!("{kind} `{shown}` refused by {by}: {}", why.text),
        Some(Value::Object(data)),
    )
}
