//! The three wire formats, both directions, as pure functions over [`serde_json::Value`] (no
//! HTTP):
//!
//! - [`anthropic`]: Anthropic Messages (`tools[].input_schema`, `tool_use` / `tool_result`
//!   content blocks, a top-level `system`).
//! - [`openai`]: OpenAI-compatible chat completions (`tools[].function.parameters`,
//!   `tool_calls` whose `arguments` is a JSON *string*, `role: "tool"` results).
//! - [`ollama`]: Ollama `/api/chat` (the OpenAI tool shape, but `arguments` is an object and
//!   calls have no ids: the parser makes up `call_<n>`).
//!
//! Each has a `request(..)` that serializes the conversation and the tools it is given, and
//! nothing else (the loop gives only the role's visible tools: serialization adds none), and a
//! `parse_response(..)` that reads one answer into a [`Turn`](crate::Turn). Model output that is
//! wrong in one tool call (arguments that are not a JSON object, a missing id or name) becomes
//! [`Arguments::Malformed`] on that call, which the loop never
//! dispatches; a body that is not the format at all becomes a
//! [`ModelError`] of kind [`Malformed`](crate::ModelErrorKind::Malformed).
//! Nothing here panics on any input.
//!
//! ```
//! use capability_agent::provider::openai;
//! use capability_agent::{Arguments, Message, ToolSpec};
//! use serde_json::json;
//!
//! let tools = [ToolSpec {
//!     name: "disk_usage".into(),
//!     description: Some("Disk usage of a host".into()),
//!     input_schema: json!({"type": "object", "properties": {"host": {"type": "string"}}}),
//! }];
//! let body = openai::request("gpt-4.1", &[Message::User("Disk alert".into())], &tools);
//! assert_eq!(body["tools"][0]["function"]["name"], "disk_usage");
//!
//! let answer = json!({"choices": [{"message": {"role": "assistant", "content": null,
//!     "tool_calls": [{"id": "call_1", "type": "function",
//!         "function": {"name": "disk_usage", "arguments": "{\"host\": "}}]}}]});
//! let turn = openai::parse_response(&answer).unwrap();
//! // Arguments that are not JSON are kept, typed, and never dispatched.
//! assert!(matches!(turn.tool_calls[0].arguments, Arguments::Malformed { .. }));
//! ```

pub mod anthropic;
pub mod ollama;
pub mod openai;

use serde_json::{Map, Value};

use crate::model::{Arguments, ModelError, ModelErrorKind, ToolSpec};

/// Whether a provider's error message says that the model does not support tools (Ollama:
/// `"registry.ollama.ai/library/gemma:2b does not support tools"`; OpenAI-compatible servers
/// say similar things). The HTTP `Model`s map such an answer to
/// [`ModelErrorKind::NoToolSupport`].
pub fn says_no_tool_support(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "does not support tools",
        "does not support tool",
        "doesn't support tools",
        "tools are not supported",
        "tool use is not supported",
        "tool calling is not supported",
        "function calling is not supported",
    ]
    .iter()
    .any(|phrase| message.contains(phrase))
}

/// The error message of a provider's error body, in any of the three formats: `{"error":
/// {"message": ..}}` (Anthropic, OpenAI), `{"error": ".."}` (Ollama), or `{"message": ..}`.
pub fn error_message(body: &Value) -> Option<String> {
    match body.get("error") {
        Some(Value::String(message)) => return Some(message.clone()),
        Some(Value::Object(error)) => {
            if let Some(Value::String(message)) = error.get("message") {
                return Some(message.clone());
            }
        }
        _ => {}
    }
    match body.get("message") {
        Some(Value::String(message)) => Some(message.clone()),
        _ => None,
    }
}

/// A [`ModelError`] of kind [`Malformed`](ModelErrorKind::Malformed).
pub(crate) fn malformed(message: impl Into<String>) -> ModelError {
    ModelError::new(ModelErrorKind::Malformed, message)
}

/// A tool result's content as the text formats that want a string get it: a string as it is,
/// anything else as compact JSON.
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Arguments that are a JSON object; anything else is malformed, with `raw` kept.
pub(crate) fn object_arguments(value: &Value) -> Arguments {
    match value {
        Value::Object(_) => Arguments::Json(value.clone()),
        other => Arguments::Malformed {
            raw: other.to_string(),
            error: format!(
                "the arguments are not a JSON object but {}",
                json_kind(other)
            ),
        },
    }
}

/// Arguments written as a JSON string (OpenAI): parsed, and required to be an object.
pub(crate) fn string_arguments(raw: &str) -> Arguments {
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Arguments::Json(value),
        Ok(other) => Arguments::Malformed {
            raw: raw.to_owned(),
            error: format!(
                "the arguments are not a JSON object but {}",
                json_kind(&other)
            ),
        },
        Err(error) => Arguments::Malformed {
            raw: raw.to_owned(),
            error: format!("the arguments are not JSON: {error}"),
        },
    }
}

/// What kind of JSON value this is, for messages.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The arguments a request replays for an earlier call: the object the model wrote, or `{}`
/// for malformed arguments (formats whose arguments must be an object cannot carry the raw
/// text; the call was never dispatched and its result says why).
pub(crate) fn replayed_object(arguments: &Arguments) -> Value {
    match arguments {
        Arguments::Json(value @ Value::Object(_)) => value.clone(),
        _ => Value::Object(Map::new()),
    }
}

/// The tools in the OpenAI function shape (`{type: "function", function: {name, description,
/// parameters}}`), shared by the OpenAI-compatible and Ollama formats.
pub(crate) fn function_tools(tools: &[ToolSpec]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let mut function = Map::new();
            function.insert("name".into(), Value::String(tool.name.clone()));
            if let Some(description) = &tool.description {
                function.insert("description".into(), Value::String(description.clone()));
            }
            function.insert("parameters".into(), tool.input_schema.clone());
            serde_json::json!({ "type": "function", "function": function })
        })
        .collect()
}

/// A tool call that cannot be dispatched: its name or id is missing, or its shape is wrong.
/// The raw call is kept for the record.
pub(crate) fn broken_call(raw: &Value, error: impl Into<String>) -> Arguments {
    Arguments::Malformed {
        raw: raw.to_string(),
        error: error.into(),
    }
}

/// The id made up for the `n`-th call of a conversation that came without one.
pub(crate) fn made_up_id(n: usize) -> String {
    format!("call_{n}")
}
