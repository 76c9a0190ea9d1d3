//! What the loop tests share: a scripted model, tool lists, a dispatch over a memory sink.

#![allow(dead_code, reason = "each test file uses part of it")]

use std::collections::VecDeque;
use std::sync::Arc;

use capability_agent::{Arguments, Message, Model, ModelError, ToolCall, ToolSpec, Turn};
use capability_audit::{AuditRecord, AuditedDispatch, Budget, MemorySink};
use serde_json::{Value, json};

/// A model that plays back a script of turns, and records what it was given.
pub struct Scripted {
    pub provider: String,
    pub tools: bool,
    pub script: VecDeque<Result<Turn, ModelError>>,
    /// Played when the script is over (`None`: an error turn).
    pub then: Option<Turn>,
    /// The names of the tools each turn was given.
    pub shown: Vec<Vec<String>>,
    /// The conversation each turn was given.
    pub seen: Vec<Vec<Message>>,
    /// Each turn's request as each provider would receive it: Anthropic Messages,
    /// OpenAI-compatible chat completions, Ollama `/api/chat`.
    pub requests: Vec<[Value; 3]>,
}

impl Scripted {
    pub fn new(script: impl IntoIterator<Item = Turn>) -> Self {
        Scripted {
            provider: "scripted".to_owned(),
            tools: true,
            script: script.into_iter().map(Ok).collect(),
            then: None,
            shown: Vec::new(),
            seen: Vec::new(),
            requests: Vec::new(),
        }
    }

    /// Always asks for the same turn.
    pub fn repeating(turn: Turn) -> Self {
        let mut model = Scripted::new([]);
        model.then = Some(turn);
        model
    }

    /// Every turn fails.
    pub fn failing(provider: &str) -> Self {
        let mut model = Scripted::new([]);
        model.provider = provider.to_owned();
        model
    }

    pub fn turns(&self) -> usize {
        self.shown.len()
    }
}

impl Model for Scripted {
    fn provider(&self) -> &str {
        &self.provider
    }

    fn supports_tools(&self) -> bool {
        self.tools
    }

    fn turn(&mut self, messages: &[Message], tools: &[ToolSpec]) -> Result<Turn, ModelError> {
        self.shown
            .push(tools.iter().map(|t| t.name.clone()).collect());
        self.seen.push(messages.to_vec());
        self.requests.push([
            capability_agent::provider::anthropic::request("m", 1024, messages, tools),
            capability_agent::provider::openai::request("m", messages, tools),
            capability_agent::provider::ollama::request("m", messages, tools),
        ]);
        match self.script.pop_front() {
            Some(turn) => turn,
            None => self.then.clone().ok_or_else(|| {
                ModelError::new(
                    capability_agent::ModelErrorKind::Transport,
                    "connection refused",
                )
            }),
        }
    }
}

/// A turn calling one tool.
pub fn call(id: &str, name: &str, arguments: Value) -> Turn {
    Turn {
        text: None,
        tool_calls: vec![ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: Arguments::Json(arguments),
        }],
    }
}

/// A final answer.
pub fn answer(text: &str) -> Turn {
    Turn {
        text: Some(text.to_owned()),
        tool_calls: Vec::new(),
    }
}

/// An MCP tool object.
pub fn tool(name: &str, read_only: bool) -> Value {
    json!({
        "name": name,
        "description": format!("The tool {name}."),
        "inputSchema": {"type": "object", "properties": {"namespace": {"type": "string"}}},
        "annotations": {"readOnlyHint": read_only, "destructiveHint": !read_only},
    })
}

/// The k8s server's tools: two read-only, two mutating.
pub fn k8s_tools() -> Vec<Value> {
    vec![
        tool("list_pods", true),
        tool("get_pod_logs", true),
        tool("restart_pod", false),
        tool("delete_pod", false),
    ]
}

pub const POLICY: &str = r#"
version = "test/1"

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]

[roles.monitor]
ceiling = "read-only"
allow = ["k8s/*"]
deny = ["k8s/restart*", "k8s/delete*"]

[roles.logs]
ceiling = "read-only"
allow = ["k8s/get_pod_logs"]
"#;

/// A dispatch over a memory sink, tolerating `max_denials` denials per session.
pub fn dispatch(max_denials: u32) -> (Arc<MemorySink>, AuditedDispatch) {
    let sink = Arc::new(MemorySink::new());
    let dispatch = AuditedDispatch::new(sink.clone()).with_budget(Budget {
        max_calls: 25,
        max_denials,
    });
    (sink, dispatch)
}

/// The records' tools, in order.
pub fn tools_of(records: &[AuditRecord]) -> Vec<&str> {
    records.iter().map(|r| r.tool.as_str()).collect()
}

/// One record per call: the outcome of a call that ran (its intent, written before it ran, is
/// checked and left out), or the one record of a call that did not run; in trail order.
#[allow(dead_code)]
pub fn per_call(sink: &MemorySink) -> Vec<AuditRecord> {
    let records = sink.records();
    for (i, intent) in records.iter().enumerate() {
        if intent.phase == Some(capability_audit::Phase::Intent) {
            assert!(
                records[i + 1..].iter().any(|r| r.call_id == intent.call_id
                    && r.phase == Some(capability_audit::Phase::Outcome)),
                "intent {} has no outcome",
                intent.seq
            );
        }
    }
    records
        .into_iter()
        .filter(|r| r.phase != Some(capability_audit::Phase::Intent))
        .collect()
}
