//! Anthropic Messages (`POST /v1/messages`): system messages go to the top-level `system`,
//! tools are `{name, description, input_schema}`, the model's tool calls are `tool_use` content
//! blocks `{type, id, name, input}`, and their results go back as a user message of
//! `tool_result` blocks `{type, tool_use_id, content, is_error}`.

use serde_json::{Map, Value, json};

use super::{broken_call, content_text, made_up_id, malformed, object_arguments, replayed_object};
use crate::model::{Message, ModelError, ToolCall, ToolSpec, Turn};

/// The request body for `model`, answering in at most `max_tokens` tokens, over `messages`
/// with exactly `tools` (omitted when empty).
///
/// Consecutive tool results are sent as one user message of `tool_result` blocks (the format
/// wants every result of a turn in the message that follows it), with `is_error: true` on
/// failed or refused calls (the format's default is `false`). Malformed arguments of an earlier
/// call are replayed as `{}`: `input` must be an object.
pub fn request(model: &str, max_tokens: u32, messages: &[Message], tools: &[ToolSpec]) -> Value {
    let mut system: Vec<&str> = Vec::new();
    let mut wire: Vec<Value> = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    for message in messages {
        if !matches!(message, Message::Tool(_)) && !results.is_empty() {
            wire.push(json!({ "role": "user", "content": std::mem::take(&mut results) }));
        }
        match message {
            Message::System(text) => system.push(text),
            Message::User(text) => wire.push(json!({ "role": "user", "content": text })),
            Message::Assistant(turn) => wire.push(assistant(turn)),
            Message::Tool(result) => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": result.call_id,
                    "content": content_text(&result.content),
                });
                if result.is_error {
                    block["is_error"] = Value::Bool(true);
                }
                results.push(block);
            }
        }
    }
    if !results.is_empty() {
        wire.push(json!({ "role": "user", "content": results }));
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_owned()));
    body.insert("max_tokens".into(), Value::from(max_tokens));
    if !system.is_empty() {
        body.insert("system".into(), Value::String(system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(wire));
    if !tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(tools.iter().map(tool).collect()),
        );
    }
    Value::Object(body)
}

/// One tool as the format shows it: `{name, description, input_schema}`.
pub fn tool(spec: &ToolSpec) -> Value {
    let mut tool = Map::new();
    tool.insert("name".into(), Value::String(spec.name.clone()));
    if let Some(description) = &spec.description {
        tool.insert("description".into(), Value::String(description.clone()));
    }
    tool.insert("input_schema".into(), spec.input_schema.clone());
    Value::Object(tool)
}

fn assistant(turn: &Turn) -> Value {
    let mut content = Vec::new();
    if let Some(text) = turn.text.as_deref().filter(|text| !text.is_empty()) {
        content.push(json!({ "type": "text", "text": text }));
    }
    for call in &turn.tool_calls {
        content.push(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": replayed_object(&call.arguments),
        }));
    }
    json!({ "role": "assistant", "content": content })
}

/// The model's turn in a response body: its `text` blocks (joined) and its `tool_use` blocks,
/// in order.
///
/// A body without a `content` array (or not an object), a block that is not an object, a block
/// type the format does not define for a client-tool conversation, or `stop_reason: "tool_use"`
/// with no `tool_use` block is [`Malformed`](crate::ModelErrorKind::Malformed). `thinking` and
/// `redacted_thinking` blocks are skipped. A `tool_use` block without a string `id` (it gets a
/// made-up one) or `name`, or whose `input` is not an object, becomes a call with
/// [`Arguments::Malformed`](crate::Arguments::Malformed).
pub fn parse_response(body: &Value) -> Result<Turn, ModelError> {
    let Some(object) = body.as_object() else {
        return Err(malformed("the body is not a JSON object"));
    };
    if object.get("type").and_then(Value::as_str) == Some("error") {
        let message = super::error_message(body).unwrap_or_else(|| "an error".to_owned());
        return Err(malformed(format!("the body is an error: {message}")));
    }
    let Some(blocks) = object.get("content").and_then(Value::as_array) else {
        return Err(malformed("the body has no `content` array"));
    };
    let stop_reason = match object.get("stop_reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) => Some(reason.as_str()),
        Some(_) => return Err(malformed("`stop_reason` is not a string")),
    };
    let mut texts: Vec<&str> = Vec::new();
    let mut tool_calls = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        let Some(kind) = block.get("type").and_then(Value::as_str) else {
            return Err(malformed(format!(
                "content block {index} has no string `type`"
            )));
        };
        match kind {
            "text" => match block.get("text") {
                Some(Value::String(text)) => texts.push(text),
                _ => {
                    return Err(malformed(format!(
                        "text block {index} has no string `text`"
                    )));
                }
            },
            "tool_use" => tool_calls.push(tool_use(block, tool_calls.len())),
            "thinking" | "redacted_thinking" => {}
            other => {
                return Err(malformed(format!(
                    "content block {index} has the unknown type `{other}`"
                )));
            }
        }
    }
    if stop_reason == Some("tool_use") && tool_calls.is_empty() {
        return Err(malformed(
            "`stop_reason` is `tool_use` but there is no `tool_use` block",
        ));
    }
    let text = texts.concat();
    Ok(Turn {
        text: (!text.is_empty()).then_some(text),
        tool_calls,
    })
}

fn tool_use(block: &Value, n: usize) -> ToolCall {
    let id = block.get("id").and_then(Value::as_str);
    let name = block.get("name").and_then(Value::as_str);
    let arguments = match (id, name, block.get("input")) {
        (None, _, _) => broken_call(block, "the `tool_use` block has no string `id`"),
        (_, None, _) => broken_call(block, "the `tool_use` block has no string `name`"),
        (_, _, None) => broken_call(block, "the `tool_use` block has no `input`"),
        (_, _, Some(input)) => object_arguments(input),
    };
    ToolCall {
        id: id.map_or_else(|| made_up_id(n), str::to_owned),
        name: name.unwrap_or_default().to_owned(),
        arguments,
    }
}
