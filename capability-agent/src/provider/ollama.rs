//! Ollama `/api/chat` (non-streaming): tools in the OpenAI function shape, the model's calls
//! as `message.tool_calls[].function.{name, arguments}` with an *object* `arguments` and no id,
//! and results as `{role: "tool", content, tool_name}`.
//!
//! Ollama gives its calls no ids; the parser makes up `call_<n>`, numbered across the
//! conversation (see [`parse_response_from`]), so every result can be matched to its call.

use serde_json::{Map, Value, json};

use super::{
    broken_call, content_text, function_tools, made_up_id, malformed, object_arguments,
    replayed_object,
};
use crate::model::{Message, ModelError, ToolCall, ToolSpec, Turn};

/// The request body for `model` over `messages` with exactly `tools` (omitted when empty);
/// `stream` is `false`.
///
/// Earlier calls are replayed with their `index` in the turn; malformed arguments as `{}`
/// (`arguments` must be an object).
pub fn request(model: &str, messages: &[Message], tools: &[ToolSpec]) -> Value {
    let wire: Vec<Value> = messages
        .iter()
        .map(|message| match message {
            Message::System(text) => json!({ "role": "system", "content": text }),
            Message::User(text) => json!({ "role": "user", "content": text }),
            Message::Assistant(turn) => assistant(turn),
            Message::Tool(result) => json!({
                "role": "tool",
                "content": content_text(&result.content),
                "tool_name": result.name,
            }),
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_owned()));
    body.insert("messages".into(), Value::Array(wire));
    body.insert("stream".into(), Value::Bool(false));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(function_tools(tools)));
    }
    Value::Object(body)
}

fn assistant(turn: &Turn) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), Value::String("assistant".into()));
    if let Some(text) = &turn.text {
        message.insert("content".into(), Value::String(text.clone()));
    }
    if !turn.tool_calls.is_empty() {
        let calls = turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                json!({
                    "type": "function",
                    "function": {
                        "index": index,
                        "name": call.name,
                        "arguments": replayed_object(&call.arguments),
                    },
                })
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(message)
}

/// The model's turn in a response body, its calls numbered from `call_0`: the same as
/// [`parse_response_from`]`(body, 0)`.
pub fn parse_response(body: &Value) -> Result<Turn, ModelError> {
    parse_response_from(body, 0)
}

/// The model's turn in a response body: `message.content` and `message.tool_calls`. Calls
/// without an id (Ollama gives none) get `call_<first>`, `call_<first + 1>`, ...: pass the
/// number of calls already in the conversation so ids never repeat. A call that does carry a
/// string `id` keeps it.
///
/// A body that is not an object, is an error (`{"error": ..}`), has no `message` object, or
/// whose `content` or `tool_calls` has the wrong type is
/// [`Malformed`](crate::ModelErrorKind::Malformed). A call without a string `function.name`, or
/// whose `arguments` is not an object, becomes [`Arguments::Malformed`](crate::Arguments).
pub fn parse_response_from(body: &Value, first: usize) -> Result<Turn, ModelError> {
    let Some(object) = body.as_object() else {
        return Err(malformed("the body is not a JSON object"));
    };
    if let Some(Value::String(error)) = object.get("error") {
        return Err(malformed(format!("the body is an error: {error}")));
    }
    let Some(message) = object.get("message").filter(|message| message.is_object()) else {
        return Err(malformed("the body has no `message` object"));
    };
    let text = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => return Err(malformed("`message.content` is not a string")),
    };
    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => calls
            .iter()
            .enumerate()
            .map(|(n, call)| tool_call(call, first.saturating_add(n)))
            .collect(),
        Some(_) => return Err(malformed("`message.tool_calls` is not an array")),
    };
    Ok(Turn {
        text: text.filter(|text| !text.is_empty()),
        tool_calls,
    })
}

fn tool_call(call: &Value, n: usize) -> ToolCall {
    let function = call.get("function");
    let name = function
        .and_then(|function| function.get("name"))
        .and_then(Value::as_str);
    let arguments = match (name, function.and_then(|f| f.get("arguments"))) {
        (None, _) => broken_call(call, "the tool call has no string `function.name`"),
        (_, Some(arguments)) => object_arguments(arguments),
        (_, None) => broken_call(call, "the tool call has no `function.arguments`"),
    };
    ToolCall {
        id: call
            .get("id")
            .and_then(Value::as_str)
            .map_or_else(|| made_up_id(n), str::to_owned),
        name: name.unwrap_or_default().to_owned(),
        arguments,
    }
}

/// How many tool calls the conversation already holds: the `first` to give
/// [`parse_response_from`] for the next turn.
pub fn calls_so_far(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(|message| match message {
            Message::Assistant(turn) => turn.tool_calls.len(),
            _ => 0,
        })
        .sum()
}
