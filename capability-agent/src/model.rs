//! The conversation as the loop sees it, whatever the provider: messages, tool calls, tool
//! results, the tools shown to the model, and the [`Model`] seam.

use std::fmt;

use serde_json::Value;

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// Instructions for the model.
    System(String),
    /// The user's (or the alert's) text.
    User(String),
    /// What the model said: text and/or tool calls.
    Assistant(Turn),
    /// The result of one tool call, answering the call with the same id.
    Tool(ToolResult),
}

/// One turn of the model: its text, and the tools it asks to call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Turn {
    /// The text, if any.
    pub text: Option<String>,
    /// The tool calls, in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
}

impl Turn {
    /// A final answer: text and no tool call.
    pub fn is_final(&self) -> bool {
        self.tool_calls.is_empty()
    }
}

/// A tool call the model asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The call's id, to answer it with. A provider that gave none (Ollama) gets one made up by
    /// the wire format (`call_<n>`), so every result can be matched.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the model wrote them.
    pub arguments: Arguments,
}

/// A tool call's arguments: a JSON object, or what the model wrote when it was not one.
#[derive(Clone, Debug, PartialEq)]
pub enum Arguments {
    /// A JSON value (an object, for any sensible tool).
    Json(Value),
    /// Not JSON (or not an object): never dispatched; the model gets an error result.
    Malformed {
        /// What the model wrote.
        raw: String,
        /// Why it is refused.
        error: String,
    },
}

/// The result of one tool call, as the model will read it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    /// The id of the call it answers.
    pub call_id: String,
    /// The tool's name (some formats repeat it).
    pub name: String,
    /// The content: the tool's output, or the error's text.
    pub content: Value,
    /// Whether the call failed or was refused.
    pub is_error: bool,
}

/// A tool as a model is shown it: its name, description and input schema. The loop builds these
/// only from the tools the role may see.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// Its input's JSON schema (an object schema).
    pub input_schema: Value,
}

impl ToolSpec {
    /// The spec of an MCP `Tool` object (`name`, `description`, `inputSchema`); `None` when it
    /// has no string name. A missing or non-object schema becomes `{"type": "object"}`.
    pub fn from_mcp_tool(tool: &Value) -> Option<ToolSpec> {
        let name = tool.get("name")?.as_str()?.to_owned();
        let description = tool
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let input_schema = match tool.get("inputSchema") {
            Some(schema @ Value::Object(_)) => schema.clone(),
            _ => serde_json::json!({ "type": "object" }),
        };
        Some(ToolSpec {
            name,
            description,
            input_schema,
        })
    }
}

/// A model provider: one turn at a time.
pub trait Model {
    /// The provider's name (`anthropic`, `openai`, `ollama`, ...): the key of its circuit
    /// breaker and what degrade reasons name.
    fn provider(&self) -> &str;

    /// Whether this model takes tools. A loop over a model that does not degrades at once.
    fn supports_tools(&self) -> bool;

    /// One turn: the conversation so far and the tools it may call.
    fn turn(&mut self, messages: &[Message], tools: &[ToolSpec]) -> Result<Turn, ModelError>;
}

/// A model turn that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelError {
    /// What kind of failure.
    pub kind: ModelErrorKind,
    /// What happened.
    pub message: String,
}

impl ModelError {
    /// An error of `kind`.
    pub fn new(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        ModelError {
            kind,
            message: message.into(),
        }
    }
}

/// Why a model turn failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelErrorKind {
    /// The provider could not be reached, or the connection broke.
    Transport,
    /// The provider answered with an HTTP error status.
    Status(u16),
    /// The provider's answer is not in its wire format.
    Malformed,
    /// The provider says this model does not support tools.
    NoToolSupport,
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ModelErrorKind::Transport => {
                write!(f, "the provider cannot be reached: {}", self.message)
            }
            ModelErrorKind::Status(status) => {
                write!(f, "the provider answered HTTP {status}: {}", self.message)
            }
            ModelErrorKind::Malformed => {
                write!(f, "the provider's answer is malformed: {}", self.message)
            }
            ModelErrorKind::NoToolSupport => {
                write!(f, "the model does not support tools: {}", self.message)
            }
        }
    }
}

impl std::error::Error for ModelError {}
