//! The HTTP `Model`s against a tiny local HTTP/1.1 server (std `TcpListener` on 127.0.0.1:0,
//! one scripted answer per connection): a tool call, a final answer, a 500, a 401, a malformed
//! body, a "does not support tools" error, in each wire format; and the request the server got
//! (path, headers, the tools it carried). The API key never shows in an error or in `Debug`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use capability_agent::http::{AnthropicModel, OllamaModel, OpenAiModel};
use capability_agent::{Arguments, Message, Model, ModelErrorKind, ToolSpec};
use serde_json::{Value, json};

const KEY: &str = "sk-test-SECRET-4f2a9c";

/// What the server received.
#[derive(Debug)]
struct Received {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: Value,
}

struct Server {
    base: String,
    received: Arc<Mutex<Vec<Received>>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Answers the `n`-th connection with `answers[n]` (status, body), then stops.
    fn start(answers: Vec<(u16, String)>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&received);
        let thread = std::thread::spawn(move || {
            for (status, body) in answers {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                if let Some(request) = serve(stream, status, &body) {
                    log.lock().expect("log").push(request);
                }
            }
        });
        Server {
            base,
            received,
            thread: Some(thread),
        }
    }

    fn received(&mut self) -> Vec<Received> {
        if let Some(thread) = self.thread.take() {
            thread.join().expect("server thread");
        }
        std::mem::take(&mut *self.received.lock().expect("log"))
    }
}

fn serve(stream: TcpStream, status: u16, body: &str) -> Option<Received> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    let length: usize = headers.get("content-length")?.parse().ok()?;
    let mut raw = vec![0; length];
    reader.read_exact(&mut raw).ok()?;
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        307 => "Temporary Redirect",
        401 => "Unauthorized",
        _ => "Internal Server Error",
    };
    let mut stream = stream;
    // A 307 redirects to the address in its body.
    let location = if status == 307 {
        format!("location: {body}\r\n")
    } else {
        String::new()
    };
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\n{location}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    stream.flush().ok()?;
    Some(Received {
        method,
        path,
        headers,
        body: serde_json::from_slice(&raw).unwrap_or(Value::Null),
    })
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "disk_usage".into(),
            description: Some("Disk usage of a host".into()),
            input_schema: json!({"type": "object", "properties": {"host": {"type": "string"}}}),
        },
        ToolSpec {
            name: "list_alerts".into(),
            description: None,
            input_schema: json!({"type": "object"}),
        },
    ]
}

fn conversation() -> Vec<Message> {
    vec![
        Message::System("You are an SRE advisor.".into()),
        Message::User("Disk alert on host-7.".into()),
    ]
}

/// A format's own bodies for the answers of [`answers`].
struct Script {
    tool_call: Value,
    final_answer: Value,
    no_tools: (u16, Value),
}

/// Runs the six cases against `model` and returns what the server received.
fn run_cases<M: Model>(model: &mut M, server: &mut Server) -> Vec<Received> {
    let tools = tools();
    let messages = conversation();

    let turn = model.turn(&messages, &tools).expect("a tool call");
    assert_eq!(turn.tool_calls.len(), 1, "{turn:?}");
    assert_eq!(turn.tool_calls[0].name, "disk_usage");
    assert_eq!(
        turn.tool_calls[0].arguments,
        Arguments::Json(json!({"host": "host-7"}))
    );

    let turn = model.turn(&messages, &tools).expect("a final answer");
    assert!(turn.is_final());
    assert_eq!(turn.text.as_deref(), Some("Host-7 is at 97%."));

    let error = model.turn(&messages, &tools).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Status(500), "{error}");
    assert!(error.message.contains("upstream exploded"), "{error}");

    let error = model.turn(&messages, &tools).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Status(401), "{error}");
    assert!(error.message.contains("invalid"), "{error}");
    assert!(!error.to_string().contains(KEY), "{error}");

    let error = model.turn(&messages, &tools).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Malformed, "{error}");

    let error = model.turn(&messages, &tools).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::NoToolSupport, "{error}");

    server.received()
}

/// The six answers, in the order [`run_cases`] expects them.
fn answers(script: &Script, unauthorized: Value) -> Vec<(u16, String)> {
    vec![
        (200, script.tool_call.to_string()),
        (200, script.final_answer.to_string()),
        (
            500,
            json!({"error": {"message": "upstream exploded"}}).to_string(),
        ),
        (401, unauthorized.to_string()),
        (200, "<html>not json</html>".to_owned()),
        (script.no_tools.0, script.no_tools.1.to_string()),
    ]
}

fn assert_all_posted(received: &[Received], path: &str) {
    assert_eq!(received.len(), 6, "{received:#?}");
    for request in received {
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, path);
        assert_eq!(request.headers["content-type"], "application/json");
    }
}

#[test]
fn anthropic_over_http() {
    let script = Script {
        tool_call: json!({"type": "message", "role": "assistant", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "disk_usage", "input": {"host": "host-7"}}]}),
        final_answer: json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "Host-7 is at 97%."}]}),
        no_tools: (
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "This model does not support tools"}}),
        ),
    };
    let unauthorized = json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}});
    let mut server = Server::start(answers(&script, unauthorized));
    let mut model =
        AnthropicModel::new(&format!("{}/", server.base), KEY, "claude-test").with_max_tokens(512);
    assert_eq!(model.provider(), "anthropic");
    assert!(model.supports_tools());
    let received = run_cases(&mut model, &mut server);
    assert_all_posted(&received, "/v1/messages");
    let first = &received[0];
    assert_eq!(first.headers["x-api-key"], KEY);
    assert_eq!(first.headers["anthropic-version"], "2023-06-01");
    assert!(!first.headers.contains_key("authorization"));
    assert_eq!(first.body["model"], "claude-test");
    assert_eq!(first.body["max_tokens"], 512);
    assert_eq!(first.body["system"], "You are an SRE advisor.");
    let names: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["disk_usage", "list_alerts"]);
    assert_eq!(
        first.body["tools"][0]["input_schema"],
        tools()[0].input_schema
    );
}

#[test]
fn openai_over_http() {
    let message = |m: Value| json!({"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": m, "finish_reason": "stop"}]});
    let script = Script {
        tool_call: message(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "disk_usage", "arguments": "{\"host\":\"host-7\"}"}}]})),
        final_answer: message(json!({"role": "assistant", "content": "Host-7 is at 97%."})),
        no_tools: (
            400,
            json!({"error": {"message": "tools are not supported for this model", "type": "invalid_request_error"}}),
        ),
    };
    let unauthorized = json!({"error": {"message": "Incorrect API key provided: sk-test-***9c (invalid)", "type": "invalid_request_error", "code": "invalid_api_key"}});
    let mut server = Server::start(answers(&script, unauthorized));
    let mut model = OpenAiModel::new(&format!("{}/v1", server.base), KEY, "gpt-test");
    assert_eq!(model.provider(), "openai");
    let received = run_cases(&mut model, &mut server);
    assert_all_posted(&received, "/v1/chat/completions");
    let first = &received[0];
    assert_eq!(first.headers["authorization"], format!("Bearer {KEY}"));
    assert!(!first.headers.contains_key("x-api-key"));
    assert_eq!(first.body["model"], "gpt-test");
    assert_eq!(first.body["messages"][0]["role"], "system");
    let names: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["disk_usage", "list_alerts"]);
    assert_eq!(first.body["tools"][0]["type"], "function");
}

#[test]
fn ollama_over_http() {
    let message = |m: Value| json!({"model": "llama3.2", "created_at": "2024-07-22T20:33:28.123648Z", "message": m, "done": true});
    let script = Script {
        tool_call: message(json!({"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "disk_usage", "arguments": {"host": "host-7"}}}]})),
        final_answer: message(json!({"role": "assistant", "content": "Host-7 is at 97%."})),
        no_tools: (
            400,
            json!({"error": "registry.ollama.ai/library/gemma:2b does not support tools"}),
        ),
    };
    let unauthorized = json!({"error": "unauthorized: invalid token"});
    let mut server = Server::start(answers(&script, unauthorized));
    let mut model = OllamaModel::new(&server.base, "llama3.2");
    assert_eq!(model.provider(), "ollama");
    let received = run_cases(&mut model, &mut server);
    assert_all_posted(&received, "/api/chat");
    let first = &received[0];
    assert!(!first.headers.contains_key("authorization"));
    assert!(!first.headers.contains_key("x-api-key"));
    assert_eq!(first.body["stream"], false);
    assert_eq!(first.body["model"], "llama3.2");
    let names: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["disk_usage", "list_alerts"]);
}

#[test]
fn ollama_ids_continue_across_the_conversation() {
    let body = json!({"message": {"role": "assistant", "tool_calls": [
        {"function": {"name": "disk_usage", "arguments": {"host": "a"}}},
        {"function": {"name": "disk_usage", "arguments": {"host": "b"}}}]}, "done": true});
    let mut server = Server::start(vec![(200, body.to_string()), (200, body.to_string())]);
    let mut model = OllamaModel::new(&server.base, "llama3.2");
    let mut messages = conversation();
    let first = model.turn(&messages, &tools()).unwrap();
    let ids: Vec<String> = first.tool_calls.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids, ["call_0", "call_1"]);
    messages.push(Message::Assistant(first));
    let second = model.turn(&messages, &tools()).unwrap();
    let ids: Vec<String> = second.tool_calls.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids, ["call_2", "call_3"]);
    assert_eq!(server.received().len(), 2);
}

#[test]
fn an_unreachable_provider_is_a_transport_error_without_the_key() {
    // A port nothing listens on.
    let port = capability_testkit::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut models: Vec<Box<dyn Model>> = vec![
        Box::new(AnthropicModel::new(&base, KEY, "m").with_timeout(Duration::from_secs(5))),
        Box::new(OpenAiModel::new(&base, KEY, "m").with_timeout(Duration::from_secs(5))),
        Box::new(OllamaModel::new(&base, "m").with_timeout(Duration::from_secs(5))),
    ];
    for model in &mut models {
        let error = model.turn(&conversation(), &tools()).unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::Transport, "{error}");
        assert!(!error.to_string().contains(KEY), "{error}");
    }
}

#[test]
fn a_model_without_tools_refuses_tools_before_sending_and_debug_hides_the_key() {
    // No server: a request would be a transport error, not NoToolSupport.
    let mut anthropic = AnthropicModel::new("http://127.0.0.1:9", KEY, "m").without_tools();
    let mut openai = OpenAiModel::new("http://127.0.0.1:9", KEY, "m").without_tools();
    let mut ollama = OllamaModel::new("http://127.0.0.1:9", "m").without_tools();
    let models: [&mut dyn Model; 3] = [&mut anthropic, &mut openai, &mut ollama];
    for model in models {
        assert!(!model.supports_tools());
        let error = model.turn(&conversation(), &tools()).unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::NoToolSupport, "{error}");
    }
    for debug in [format!("{anthropic:?}"), format!("{openai:?}")] {
        assert!(!debug.contains(KEY), "{debug}");
        assert!(debug.contains("[redacted]"), "{debug}");
    }
    assert_eq!(anthropic.url(), "http://127.0.0.1:9/v1/messages");
    assert_eq!(openai.url(), "http://127.0.0.1:9/chat/completions");
    assert_eq!(ollama.url(), "http://127.0.0.1:9/api/chat");
}

#[test]
fn a_key_echoed_by_the_provider_is_redacted() {
    let echo = json!({"error": {"message": format!("key {KEY} is revoked")}});
    let mut server = Server::start(vec![(401, echo.to_string())]);
    let mut model = OpenAiModel::new(&server.base, KEY, "m").with_provider_name("local-vllm");
    assert_eq!(model.provider(), "local-vllm");
    let error = model.turn(&conversation(), &[]).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Status(401));
    assert!(!error.to_string().contains(KEY), "{error}");
    assert!(error.message.contains("[redacted]"), "{error}");
    assert!(server.received()[0].body.get("tools").is_none());
}

#[test]
fn a_redirect_is_not_followed_so_the_key_stays_home() {
    let mut elsewhere = Server::start(vec![(200, json!({"content": []}).to_string())]);
    let target = format!("{}/v1/messages", elsewhere.base);
    let mut server = Server::start(vec![(307, target)]);
    let mut model = AnthropicModel::new(&server.base, KEY, "m");
    let error = model.turn(&conversation(), &tools()).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Status(307), "{error}");
    assert_eq!(server.received().len(), 1);
    // Nothing reached the other server: unblock its accept with a plain connection and check
    // that what it got carries no key.
    drop(TcpStream::connect(
        elsewhere.base.trim_start_matches("http://"),
    ));
    let got = elsewhere.received();
    assert!(
        got.iter()
            .all(|r| !r.headers.values().any(|v| v.contains(KEY))),
        "{got:?}"
    );
    assert!(got.is_empty(), "{got:?}");
}
