//! The three wire formats against the providers' documented examples
//! (`tests/fixtures/*/`, sources in `tests/fixtures/README.md`): each documented response parses
//! to the expected `Turn`, and a request built from the same `ToolSpec`s and messages equals the
//! documented request.

use capability_agent::provider::{anthropic, ollama, openai};
use capability_agent::{Arguments, Message, ToolCall, ToolResult, ToolSpec, Turn};
use serde_json::{Value, json};

fn fixture(path: &str) -> Value {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The `ToolSpec`s of a request's tools, read back from the wire (the round trip).
fn specs_of_function_tools(body: &Value) -> Vec<ToolSpec> {
    body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|tool| {
            assert_eq!(tool["type"], "function");
            let f = &tool["function"];
            ToolSpec {
                name: f["name"].as_str().expect("name").to_owned(),
                description: f["description"].as_str().map(str::to_owned),
                input_schema: f["parameters"].clone(),
            }
        })
        .collect()
}

fn anthropic_specs(body: &Value) -> Vec<ToolSpec> {
    body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|tool| ToolSpec {
            name: tool["name"].as_str().expect("name").to_owned(),
            description: tool["description"].as_str().map(str::to_owned),
            input_schema: tool["input_schema"].clone(),
        })
        .collect()
}

// ---- Anthropic ----

fn anthropic_weather_call() -> ToolCall {
    ToolCall {
        id: "toolu_01A09q90qw90lq917835lq9".into(),
        name: "get_weather".into(),
        arguments: Arguments::Json(json!({"location": "San Francisco, CA", "unit": "celsius"})),
    }
}

#[test]
fn anthropic_documented_tool_use_response_parses() {
    let turn = anthropic::parse_response(&fixture("anthropic/response_tool_use.json")).unwrap();
    assert_eq!(
        turn,
        Turn {
            text: Some("I'll check the current weather in San Francisco for you.".into()),
            tool_calls: vec![anthropic_weather_call()],
        }
    );
}

#[test]
fn anthropic_documented_final_response_parses() {
    let turn = anthropic::parse_response(&fixture("anthropic/response_final.json")).unwrap();
    assert!(turn.is_final());
    assert_eq!(
        turn.text.as_deref(),
        Some(
            "The current weather in San Francisco is 15 degrees Celsius (59 degrees Fahrenheit). \
             It's a cool day in the city by the bay!"
        )
    );
}

#[test]
fn anthropic_request_equals_the_documented_requests() {
    let documented = fixture("anthropic/request_tools.json");
    let specs = anthropic_specs(&documented);
    let question = Message::User("What is the weather like in San Francisco?".into());
    let built = anthropic::request(
        "claude-opus-4-1-20250805",
        1024,
        std::slice::from_ref(&question),
        &specs,
    );
    assert_eq!(built, documented);
    // The tools round-trip: read back from the built request, they are the specs.
    assert_eq!(anthropic_specs(&built), specs);

    let answer = anthropic::parse_response(&fixture("anthropic/response_tool_use.json")).unwrap();
    let result = Message::Tool(ToolResult {
        call_id: "toolu_01A09q90qw90lq917835lq9".into(),
        name: "get_weather".into(),
        content: json!("15 degrees"),
        is_error: false,
    });
    let messages = [question, Message::Assistant(answer), result];
    let built = anthropic::request("claude-opus-4-1-20250805", 1024, &messages, &specs);
    assert_eq!(built, fixture("anthropic/request_tool_result.json"));
}

#[test]
fn anthropic_system_messages_go_to_the_top_level_and_errors_are_flagged() {
    let messages = [
        Message::System("Be brief.".into()),
        Message::User("hi".into()),
        Message::Assistant(Turn {
            text: None,
            tool_calls: vec![anthropic_weather_call()],
        }),
        Message::Tool(ToolResult {
            call_id: "toolu_01A09q90qw90lq917835lq9".into(),
            name: "get_weather".into(),
            content: json!({"error": "denied"}),
            is_error: true,
        }),
    ];
    let built = anthropic::request("m", 10, &messages, &[]);
    assert_eq!(built["system"], "Be brief.");
    assert!(built.get("tools").is_none());
    let wire = built["messages"].as_array().unwrap();
    assert_eq!(wire.len(), 3, "{built}");
    assert_eq!(
        wire[2]["content"][0],
        json!({
            "type": "tool_result",
            "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
            "content": "{\"error\":\"denied\"}",
            "is_error": true,
        })
    );
}

// ---- OpenAI ----

#[test]
fn openai_documented_tool_calls_response_parses() {
    let turn = openai::parse_response(&fixture("openai/response_tool_calls.json")).unwrap();
    assert_eq!(
        turn,
        Turn {
            text: None,
            tool_calls: vec![ToolCall {
                id: "call_abc123".into(),
                name: "get_current_weather".into(),
                arguments: Arguments::Json(json!({"location": "Boston, MA"})),
            }],
        }
    );
}

#[test]
fn openai_documented_final_response_parses() {
    let turn = openai::parse_response(&fixture("openai/response_final.json")).unwrap();
    assert_eq!(
        turn,
        Turn {
            text: Some("Hello! How can I assist you today?".into()),
            tool_calls: vec![],
        }
    );
}

#[test]
fn openai_request_equals_the_documented_requests() {
    let documented = fixture("openai/request_tools.json");
    let specs = specs_of_function_tools(&documented);
    let question = Message::User("What is the weather like in Boston today?".into());
    let built = openai::request("gpt-4.1", std::slice::from_ref(&question), &specs);
    // `tool_choice: "auto"` is the documented default with tools; the request leaves it out.
    let mut expected = documented.clone();
    expected.as_object_mut().unwrap().remove("tool_choice");
    assert_eq!(built, expected);
    assert_eq!(specs_of_function_tools(&built), specs);

    let answer = openai::parse_response(&fixture("openai/response_tool_calls.json")).unwrap();
    let result = Message::Tool(ToolResult {
        call_id: "call_abc123".into(),
        name: "get_current_weather".into(),
        content: json!({"temperature": 22, "unit": "celsius"}),
        is_error: false,
    });
    let built = openai::request(
        "gpt-4.1",
        &[question, Message::Assistant(answer), result],
        &[],
    );
    assert_eq!(built, fixture("openai/request_tool_result.json"));
}

// ---- Ollama ----

#[test]
fn ollama_documented_tool_calls_response_parses_with_made_up_ids() {
    let body = fixture("ollama/response_tool_calls.json");
    let expected = |id: &str| Turn {
        text: None,
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: "get_current_weather".into(),
            arguments: Arguments::Json(json!({"format": "celsius", "location": "Paris, FR"})),
        }],
    };
    assert_eq!(ollama::parse_response(&body).unwrap(), expected("call_0"));
    // Numbered across the conversation: three calls before, this one is the fourth.
    assert_eq!(
        ollama::parse_response_from(&body, 3).unwrap(),
        expected("call_3")
    );
}

#[test]
fn ollama_documented_final_response_parses() {
    let turn = ollama::parse_response(&fixture("ollama/response_final.json")).unwrap();
    assert_eq!(turn.text.as_deref(), Some("Hello! How are you today?"));
    assert!(turn.is_final());
}

#[test]
fn ollama_request_equals_the_documented_requests() {
    let documented = fixture("ollama/request_tools.json");
    let specs = specs_of_function_tools(&documented);
    let question = Message::User("What is the weather today in Paris?".into());
    let built = ollama::request("llama3.2", &[question], &specs);
    assert_eq!(built, documented);
    assert_eq!(specs_of_function_tools(&built), specs);

    let messages = [
        Message::User("What is the temperature in New York?".into()),
        Message::Assistant(Turn {
            text: None,
            tool_calls: vec![ToolCall {
                id: "call_0".into(),
                name: "get_temperature".into(),
                arguments: Arguments::Json(json!({"city": "New York"})),
            }],
        }),
        Message::Tool(ToolResult {
            call_id: "call_0".into(),
            name: "get_temperature".into(),
            content: json!("22°C"),
            is_error: false,
        }),
    ];
    let built = ollama::request("qwen3", &messages, &[]);
    assert_eq!(built, fixture("ollama/request_tool_result.json"));
    assert_eq!(ollama::calls_so_far(&messages), 1);
}
