//! Property: serialization adds no tool. For random subsets of a tool list (a seeded
//! generator, many rounds), the request of each wire format carries exactly the given tools,
//! in order, and no other tool's name, description or schema appears anywhere in its JSON,
//! whatever the conversation holds (calls to and results of visible tools, system text,
//! errors).
//!
//! The driver passes only the role's visible tools; this is the other half of the guarantee
//! that the model never learns that a forbidden tool exists.

use capability_agent::provider::{anthropic, ollama, openai};
use capability_agent::{Arguments, Message, ToolCall, ToolResult, ToolSpec, Turn};
use capability_testkit::Rng;
use serde_json::{Value, json};

/// The fleet: every tool has a name, description and schema property that no other tool's
/// text contains (zero-padded numbers), so a leak is a plain substring.
fn fleet() -> Vec<ToolSpec> {
    const VERBS: [&str; 6] = ["read", "list", "restart", "delete", "scale", "rotate"];
    (0..24)
        .map(|i| ToolSpec {
            name: format!("{}_target_t{i:02}x", VERBS[i % VERBS.len()]),
            description: (i % 5 != 0).then(|| format!("Description marker d{i:02}q.")),
            input_schema: json!({
                "type": "object",
                "properties": { format!("prop_p{i:02}z"): { "type": "string" } },
                "required": [format!("prop_p{i:02}z")]
            }),
        })
        .collect()
}

fn markers(tool: &ToolSpec, i: usize) -> [String; 3] {
    [
        tool.name.clone(),
        format!("d{i:02}q"),
        format!("prop_p{i:02}z"),
    ]
}

/// A conversation that uses some of the visible tools (never a hidden one: the driver answers
/// a call to a hidden tool without echoing it into a request for this property's sake; see
/// `hidden_tool_calls_in_history_are_the_callers_business`).
fn conversation(rng: &mut Rng, visible: &[ToolSpec]) -> Vec<Message> {
    let mut messages = vec![
        Message::System("You are an SRE advisor.".into()),
        Message::User("Disk alert on host-7.".into()),
    ];
    let mut n = 0;
    for _ in 0..rng.below(4) {
        if visible.is_empty() {
            break;
        }
        let calls: Vec<ToolCall> = (0..1 + rng.below(3))
            .map(|_| {
                let tool = &visible[rng.below(visible.len())];
                n += 1;
                ToolCall {
                    id: format!("id_{n}"),
                    name: tool.name.clone(),
                    arguments: if rng.below(4) == 0 {
                        Arguments::Malformed {
                            raw: "{oops".into(),
                            error: "not JSON".into(),
                        }
                    } else {
                        Arguments::Json(json!({"host": "host-7"}))
                    },
                }
            })
            .collect();
        let results: Vec<Message> = calls
            .iter()
            .map(|call| {
                Message::Tool(ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: json!({"ok": true}),
                    is_error: rng.below(3) == 0,
                })
            })
            .collect();
        messages.push(Message::Assistant(Turn {
            text: (rng.below(2) == 0).then(|| "Checking.".into()),
            tool_calls: calls,
        }));
        messages.extend(results);
    }
    messages
}

fn tool_names(format: &str, body: &Value) -> Vec<String> {
    let Some(tools) = body.get("tools").and_then(Value::as_array) else {
        return Vec::new();
    };
    tools
        .iter()
        .map(|tool| {
            let name = if format == "anthropic" {
                &tool["name"]
            } else {
                &tool["function"]["name"]
            };
            name.as_str().expect("a tool name").to_owned()
        })
        .collect()
}

#[test]
fn a_serialized_request_carries_exactly_the_given_tools() {
    let fleet = fleet();
    let mut rng = Rng(0x5EED_0015);
    for round in 0..2_000 {
        // A random subset (any size, including none and all), in fleet order or shuffled.
        let mut picked: Vec<usize> = (0..fleet.len()).filter(|_| rng.below(2) == 0).collect();
        if round % 3 == 0 {
            for i in (1..picked.len()).rev() {
                picked.swap(i, rng.below(i + 1));
            }
        }
        let visible: Vec<ToolSpec> = picked.iter().map(|&i| fleet[i].clone()).collect();
        let messages = conversation(&mut rng, &visible);
        let bodies = [
            (
                "anthropic",
                anthropic::request("m", 1024, &messages, &visible),
            ),
            ("openai", openai::request("m", &messages, &visible)),
            ("ollama", ollama::request("m", &messages, &visible)),
        ];
        let expected: Vec<String> = visible.iter().map(|tool| tool.name.clone()).collect();
        for (format, body) in &bodies {
            assert_eq!(
                tool_names(format, body),
                expected,
                "{format}, round {round}"
            );
            let text = body.to_string();
            for (i, tool) in fleet.iter().enumerate() {
                let shown = picked.contains(&i);
                for marker in markers(tool, i) {
                    if !shown {
                        assert!(
                            !text.contains(&marker),
                            "{format}, round {round}: hidden tool {} leaks {marker:?} in {text}",
                            tool.name
                        );
                    }
                }
                if shown {
                    assert!(text.contains(&tool.name), "{format}: {} missing", tool.name);
                }
            }
        }
    }
}

/// The tools a request carries are those it was given, not those the history mentions: a call
/// to a tool outside the visible set that is already in the history (the driver answered it
/// with an error) does not put that tool into `tools`.
#[test]
fn hidden_tool_calls_in_history_are_the_callers_business() {
    let fleet = fleet();
    let visible = vec![fleet[0].clone()];
    let messages = vec![
        Message::User("go".into()),
        Message::Assistant(Turn {
            text: None,
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: fleet[3].name.clone(),
                arguments: Arguments::Json(json!({})),
            }],
        }),
        Message::Tool(ToolResult {
            call_id: "c1".into(),
            name: fleet[3].name.clone(),
            content: json!("not permitted"),
            is_error: true,
        }),
    ];
    for (format, body) in [
        ("anthropic", anthropic::request("m", 1, &messages, &visible)),
        ("openai", openai::request("m", &messages, &visible)),
        ("ollama", ollama::request("m", &messages, &visible)),
    ] {
        assert_eq!(tool_names(format, &body), [fleet[0].name.clone()]);
        // Neither its description nor its schema reaches the request.
        let text = body.to_string();
        assert!(
            !text.contains("d03q") && !text.contains("prop_p03z"),
            "{text}"
        );
    }
}
