//! Malformed model output, in each wire format: a typed outcome, never a panic.
//! - a body that is not the format: `ModelError { kind: Malformed }`;
//! - one broken tool call (arguments not JSON / not an object, a missing id or name):
//!   `Arguments::Malformed` on that call, the other calls intact;
//! - ids are kept exactly as the provider wrote them.

use capability_agent::provider::{anthropic, ollama, openai};
use capability_agent::{Arguments, ModelErrorKind, Turn};
use serde_json::{Value, json};

fn malformed_kind(result: Result<Turn, capability_agent::ModelError>) -> String {
    match result {
        Err(error) => {
            assert_eq!(error.kind, ModelErrorKind::Malformed, "{error}");
            error.message
        }
        Ok(turn) => panic!("expected Malformed, got {turn:?}"),
    }
}

fn malformed_args(arguments: &Arguments) -> (&str, &str) {
    match arguments {
        Arguments::Malformed { raw, error } => (raw, error),
        Arguments::Json(value) => panic!("expected Malformed arguments, got {value}"),
    }
}

type Parse = fn(&Value) -> Result<Turn, capability_agent::ModelError>;
const PARSERS: [(&str, Parse); 3] = [
    ("anthropic", anthropic::parse_response),
    ("openai", openai::parse_response),
    ("ollama", ollama::parse_response),
];

#[test]
fn bodies_that_are_not_the_format_are_malformed_errors() {
    for (name, parse) in PARSERS {
        for body in [
            json!(null),
            json!("text"),
            json!([1, 2]),
            json!(42),
            json!({}),
            json!({"unrelated": true}),
        ] {
            let message = malformed_kind(parse(&body));
            assert!(!message.is_empty(), "{name}: {body}");
        }
    }
    // Error bodies that came with a 2xx.
    let message = malformed_kind(anthropic::parse_response(&json!({
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"}
    })));
    assert!(message.contains("Overloaded"), "{message}");
    let message = malformed_kind(openai::parse_response(
        &json!({"error": {"message": "bad key", "type": "invalid_request_error"}}),
    ));
    assert!(message.contains("bad key"), "{message}");
    let message = malformed_kind(ollama::parse_response(&json!({"error": "model not found"})));
    assert!(message.contains("model not found"), "{message}");
}

#[test]
fn anthropic_wrong_blocks_are_malformed() {
    let unknown = json!({"content": [{"type": "server_tool_use", "id": "x", "name": "y"}]});
    assert!(malformed_kind(anthropic::parse_response(&unknown)).contains("server_tool_use"));
    for content in [
        json!(["text"]),
        json!([{"text": "no type"}]),
        json!([{"type": "text", "text": 5}]),
    ] {
        malformed_kind(anthropic::parse_response(&json!({ "content": content })));
    }
    let lying = json!({"content": [{"type": "text", "text": "hi"}], "stop_reason": "tool_use"});
    malformed_kind(anthropic::parse_response(&lying));
    // Thinking blocks are skipped, not errors.
    let thinking = json!({"content": [
        {"type": "thinking", "thinking": "hmm", "signature": "s"},
        {"type": "text", "text": "done"}
    ], "stop_reason": "end_turn"});
    assert_eq!(
        anthropic::parse_response(&thinking)
            .unwrap()
            .text
            .as_deref(),
        Some("done")
    );
}

#[test]
fn anthropic_broken_tool_use_blocks_become_malformed_arguments() {
    let body = json!({"stop_reason": "tool_use", "content": [
        {"type": "tool_use", "name": "no_id", "input": {}},
        {"type": "tool_use", "id": "toolu_2", "input": {}},
        {"type": "tool_use", "id": "toolu_3", "name": "string_input", "input": "rm -rf /"},
        {"type": "tool_use", "id": "toolu_4", "name": "no_input"},
        {"type": "tool_use", "id": "toolu_5", "name": "fine", "input": {"a": 1}}
    ]});
    let turn = anthropic::parse_response(&body).unwrap();
    assert_eq!(turn.tool_calls.len(), 5);
    let (raw, error) = malformed_args(&turn.tool_calls[0].arguments);
    assert!(
        error.contains("id") && raw.contains("no_id"),
        "{error} / {raw}"
    );
    assert_eq!(turn.tool_calls[0].id, "call_0");
    assert!(
        malformed_args(&turn.tool_calls[1].arguments)
            .1
            .contains("name")
    );
    assert_eq!(turn.tool_calls[1].name, "");
    let (raw, _) = malformed_args(&turn.tool_calls[2].arguments);
    assert_eq!(raw, "\"rm -rf /\"");
    malformed_args(&turn.tool_calls[3].arguments);
    assert_eq!(
        turn.tool_calls[4].arguments,
        Arguments::Json(json!({"a": 1}))
    );
    assert_eq!(turn.tool_calls[4].id, "toolu_5");
}

fn openai_body(calls: Value) -> Value {
    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls}}]})
}

#[test]
fn openai_arguments_that_are_not_a_json_object_are_kept_raw() {
    let body = openai_body(json!([
        {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{\"x\": 1"}},
        {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "[1, 2]"}},
        {"id": "c3", "type": "function", "function": {"name": "c", "arguments": "not json at all"}},
        {"id": "c4", "type": "function", "function": {"name": "d", "arguments": {"x": 1}}},
        {"id": "c5", "type": "function", "function": {"name": "e"}},
        {"type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "c7", "type": "function", "function": {"arguments": "{}"}},
        {"id": "c8", "type": "custom", "custom": {"name": "g", "input": "x"}},
        {"id": "c9", "type": "function", "function": {"name": "h", "arguments": "{\"ok\": true}"}}
    ]));
    let turn = openai::parse_response(&body).unwrap();
    let calls = &turn.tool_calls;
    assert_eq!(calls.len(), 9);
    assert_eq!(malformed_args(&calls[0].arguments).0, "{\"x\": 1");
    assert!(malformed_args(&calls[0].arguments).1.contains("not JSON"));
    assert_eq!(malformed_args(&calls[1].arguments).0, "[1, 2]");
    assert!(malformed_args(&calls[1].arguments).1.contains("an array"));
    assert_eq!(malformed_args(&calls[2].arguments).0, "not json at all");
    assert!(
        malformed_args(&calls[3].arguments)
            .1
            .contains("instead of a JSON string")
    );
    malformed_args(&calls[4].arguments);
    assert!(malformed_args(&calls[5].arguments).1.contains("id"));
    assert_eq!(calls[5].id, "call_5");
    assert!(malformed_args(&calls[6].arguments).1.contains("name"));
    assert!(malformed_args(&calls[7].arguments).1.contains("custom"));
    assert_eq!(calls[8].arguments, Arguments::Json(json!({"ok": true})));
    assert_eq!(calls[8].name, "h");
}

#[test]
fn openai_wrong_message_shapes_are_malformed() {
    for body in [
        json!({"choices": []}),
        json!({"choices": [{"message": "hi"}]}),
        json!({"choices": [{"message": {"content": 5}}]}),
        json!({"choices": [{"message": {"content": "x", "tool_calls": {"id": "c"}}}]}),
        json!({"choices": [{"message": {"content": [{"type": "image_url"}]}}]}),
    ] {
        malformed_kind(openai::parse_response(&body));
    }
    let parts = json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]});
    assert_eq!(
        openai::parse_response(&parts).unwrap().text.as_deref(),
        Some("ab")
    );
}

#[test]
fn ollama_broken_calls_become_malformed_arguments() {
    let body = json!({"message": {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "a", "arguments": "{\"x\": 1}"}},
        {"function": {"arguments": {}}},
        {"function": {"name": "c"}},
        {"id": "call_given", "function": {"name": "d", "arguments": {"y": 2}}},
        "junk"
    ]}});
    let turn = ollama::parse_response_from(&body, 7).unwrap();
    let calls = &turn.tool_calls;
    assert_eq!(calls.len(), 5);
    assert!(malformed_args(&calls[0].arguments).1.contains("a string"));
    assert!(malformed_args(&calls[1].arguments).1.contains("name"));
    malformed_args(&calls[2].arguments);
    assert_eq!(calls[3].id, "call_given");
    assert_eq!(calls[3].arguments, Arguments::Json(json!({"y": 2})));
    malformed_args(&calls[4].arguments);
    let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["call_7", "call_8", "call_9", "call_given", "call_11"]);
    for body in [
        json!({"message": {"content": 1}}),
        json!({"message": {"tool_calls": "x"}}),
        json!({"message": []}),
    ] {
        malformed_kind(ollama::parse_response(&body));
    }
}

#[test]
fn ids_are_kept_exactly() {
    let odd = "toolu_ÄÖ \"quoted\" \\ </script> 🙂";
    let a = json!({"content": [{"type": "tool_use", "id": odd, "name": "t", "input": {}}]});
    assert_eq!(anthropic::parse_response(&a).unwrap().tool_calls[0].id, odd);
    let o = openai_body(
        json!([{"id": odd, "type": "function", "function": {"name": "t", "arguments": "{}"}}]),
    );
    assert_eq!(openai::parse_response(&o).unwrap().tool_calls[0].id, odd);
    let l = json!({"message": {"tool_calls": [{"id": odd, "function": {"name": "t", "arguments": {}}}]}});
    assert_eq!(ollama::parse_response(&l).unwrap().tool_calls[0].id, odd);
}

/// A small deterministic generator of arbitrary JSON (over the kit's generator), biased towards
/// the formats' own keys, so the parsers walk deep into wrong shapes.
struct Arbitrary(capability_testkit::Rng);
impl Arbitrary {
    fn below(&mut self, n: u64) -> u64 {
        self.0.next() % n
    }
    fn value(&mut self, depth: u32) -> Value {
        const KEYS: [&str; 16] = [
            "content",
            "type",
            "text",
            "tool_use",
            "id",
            "name",
            "input",
            "choices",
            "message",
            "tool_calls",
            "function",
            "arguments",
            "stop_reason",
            "error",
            "index",
            "tool_name",
        ];
        match if depth == 0 {
            self.below(5)
        } else {
            self.below(7)
        } {
            0 => Value::Null,
            1 => Value::Bool(self.below(2) == 0),
            2 => json!(self.below(1000) as i64 - 500),
            3 => json!(KEYS[self.below(16) as usize]),
            4 => json!(["{", "{}", "[1]", "\"x\"", "{\"a\":1}"][self.below(5) as usize]),
            5 => Value::Array((0..self.below(4)).map(|_| self.value(depth - 1)).collect()),
            _ => Value::Object(
                (0..self.below(5))
                    .map(|_| {
                        (
                            KEYS[self.below(16) as usize].to_owned(),
                            self.value(depth - 1),
                        )
                    })
                    .collect(),
            ),
        }
    }
}

#[test]
fn arbitrary_json_never_panics_a_parser() {
    let mut rng = Arbitrary(capability_testkit::Rng(0x9E37_79B9_7F4A_7C15));
    for _ in 0..20_000 {
        let body = rng.value(5);
        for (_, parse) in PARSERS {
            let _ = parse(&body);
        }
        let _ = ollama::parse_response_from(&body, usize::MAX);
    }
}
