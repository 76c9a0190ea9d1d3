//! OpenAI-compatible chat completions (`POST /v1/chat/completions`): tools are `{type:
//! "function", function: {name, description, parameters}}`, the model's calls are
//! `tool_calls[].{id, type: "function", function: {name, arguments}}` where `arguments` is a
//! JSON *string*, and results go back as `{role: "tool", tool_call_id, content}` with a string
//! content.

use serde_json::{Map, Value, json};

use super::{broken_call, content_text, function_tools, made_up_id, malformed, string_arguments};
use crate::model::{Arguments, Message, ModelError, ToolCall, ToolSpec, Turn};

/// The request body for `model` over `messages` with exactly `tools` (omitted when empty).
///
/// Earlier calls are replayed with their arguments as the model wrote them (a malformed
/// argument string goes back verbatim).
pub fn request(model: &str, messages: &[Message], tools: &[ToolSpec]) -> Value {
    let wire: Vec<Value> = messages
        .iter()
        .map(|message| match message {
            Message::System(text) => json!({ "role": "system", "content": text }),
            Message::User(text) => json!({ "role": "user", "content": text }),
            Message::Assistant(turn) => assistant(turn),
            Message::Tool(result) => json!({
                "role": "tool",
                "tool_call_id": result.call_id,
                "content": content_text(&result.content),
            }),
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_owned()));
    body.insert("messages".into(), Value::Array(wire));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(function_tools(tools)));
    }
    Value::Object(body)
}

fn assistant(turn: &Turn) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), Value::String("assistant".into()));
    message.insert(
        "content".into(),
        turn.text.clone().map_or(Value::Null, Value::String),
    );
    if !turn.tool_calls.is_empty() {
        let calls = turn
            .tool_calls
            .iter()
            .map(|call| {
                let arguments = match &call.arguments {
                    Arguments::Json(value) => value.to_string(),
                    Arguments::Malformed { raw, .. } => raw.clone(),
                };
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": { "name": call.name, "arguments": arguments },
                })
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(message)
}

/// The model's turn in a response body: `choices[0].message.content` and its `tool_calls`.
///
/// A body that is not an object, has no `choices[0].message` object, or whose `content` or
/// `tool_calls` has the wrong type is [`Malformed`](crate::ModelErrorKind::Malformed). A call
/// whose `arguments` string is not JSON, or not a JSON object, becomes [`Arguments::Malformed`]
/// with the raw text; so does a call without a string `id` (it gets a made-up one) or `name`,
/// or of a `type` other than `function`.
pub fn parse_response(body: &Value) -> Result<Turn, ModelError> {
    let Some(object) = body.as_object() else {
        return Err(malformed("the body is not a JSON object"));
    };
    if let Some(message) = object.get("error").and(super::error_message(body)) {
        return Err(malformed(format!("the body is an error: {message}")));
    }
    let Some(message) = object
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .and_then(|choice| choice.get("message"))
        .filter(|message| message.is_object())
    else {
        return Err(malformed("the body has no `choices[0].message` object"));
    };
    let text = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(Value::Array(parts)) => Some(text_parts(parts)?),
        Some(_) => return Err(malformed("`content` is not a string")),
    };
    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => calls
            .iter()
            .enumerate()
            .map(|(n, call)| tool_call(call, n))
            .collect(),
        Some(_) => return Err(malformed("`tool_calls` is not an array")),
    };
    Ok(Turn {
        text: text.filter(|text| !text.is_empty()),
        tool_calls,
    })
}

/// Content given as parts (`[{type: "text", text}]`, as some compatible servers answer).
fn text_parts(parts: &[Value]) -> Result<String, ModelError> {
    let mut text = String::new();
    for part in parts {
        match (part.get("type").and_then(Value::as_str), part.get("text")) {
            (Some("text"), Some(Value::String(part))) => text.push_str(part),
            _ => return Err(malformed("a `content` part is not a text part")),
        }
    }
    Ok(text)
}

fn tool_call(call: &Value, n: usize) -> ToolCall {
    let id = call.get("id").and_then(Value::as_str);
    let function = call.get("function");
    let name = function
        .and_then(|function| function.get("name"))
        .and_then(Value::as_str);
    let kind = call
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("function");
    let arguments = match (id, name, function.and_then(|f| f.get("arguments"))) {
        _ if kind != "function" => broken_call(call, format!("the call's type is `{kind}`")),
        (None, _, _) => broken_call(call, "the tool call has no string `id`"),
        (_, None, _) => broken_call(call, "the tool call has no string `function.name`"),
        (_, _, Some(Value::String(raw))) => string_arguments(raw),
        (_, _, Some(other)) => Arguments::Malformed {
            raw: other.to_string(),
            error: format!(
                "`function.arguments` is {} instead of a JSON string",
                super::json_kind(other)
            ),
        },
        (_, _, None) => broken_call(call, "the tool call has no `function.arguments`"),
    };
    ToolCall {
        id: id.map_or_else(|| made_up_id(n), str::to_owned),
        name: name.unwrap_or_default().to_owned(),
        arguments,
    }
}
