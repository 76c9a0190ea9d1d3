//! `--otlp`: what the gateway and the proxy export, decoded at a loopback OTLP/HTTP receiver with
//! OpenTelemetry's own protobuf definitions (`opentelemetry-proto`), checked against
//! OpenTelemetry's conventions for MCP and against what the server was sent.
//!
//! - One trace spans client, gateway and server: the client's `traceparent` (in `_meta`) is the
//!   parent of the `mcp.server` span; the audited call's `execute_tool` span is its child; the
//!   `mcp.client` span of the leg to the server is that one's child, and it is the parent the
//!   server is sent in its request's `_meta` (with the client's `tracestate` and `baggage`).
//! - Every attribute the conventions name for these requests, and ours under `capability.*`
//!   (role, principal, policy version, verdict, the audit record's place in its chain, which is
//!   the trail's).
//! - Both paths of the gateway (its forwarding lane and rmcp's), a prompt (`gen_ai.prompt.name`)
//!   and a read (`mcp.resource.uri`), a refused call (an error, no leg, nothing at the server),
//!   a tool's error (`tool_error`), a malformed `traceparent` (a trace of its own), a client
//!   that does not sample (recorded all the same), the durations
//!   (`mcp.server.operation.duration` and the others), made-up tool names (bounded), a receiver
//!   that is down (no call lost, no exit held up), the gateway over Streamable HTTP
//!   (`mcp.session.id`, `tcp`, the session's duration).
//! - The proxy (the governed server in front of one server) with the official TypeScript SDK's
//!   client, and, without `--otlp`, the client's trace context passed to the server as it was.

#![cfg(unix)]

use crate::proxy_common;
use crate::support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric;
use opentelemetry_proto::tonic::trace::v1::{Span, span, status};
use prost::Message;
use serde_json::{Value, json};

use proxy_common::{BIN, records, scratch};
use support::{OtlpReceiver, TsTarget};

/// A stdio MCP server in plain Python that journals every line it reads to `$JOURNAL`.
const SERVER: &str = r#"
import json, os, sys
journal = open(os.environ["JOURNAL"], "a", buffering=1)
def send(message):
    sys.stdout.write(json.dumps(message) + "\n"); sys.stdout.flush()
def tool(name):
    return {"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
for line in sys.stdin:
    journal.write(line)
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
            "serverInfo": {"name": "journal", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id, "result": {"tools": [tool("echo"), tool("fail")]}})
    elif method == "tools/call":
        name, arguments = message["params"]["name"], message["params"].get("arguments")
        text = [{"type": "text", "text": json.dumps(arguments)}]
        send({"jsonrpc": "2.0", "id": id, "result": {"content": text, "isError": name == "fail"}})
    elif method == "resources/list":
        send({"jsonrpc": "2.0", "id": id, "result": {"resources": [
            {"uri": "journal://notes/1", "name": "note"}]}})
    elif method == "resources/templates/list":
        send({"jsonrpc": "2.0", "id": id, "result": {"resourceTemplates": []}})
    elif method == "resources/read":
        send({"jsonrpc": "2.0", "id": id, "result": {"contents": [
            {"uri": message["params"]["uri"], "text": "a note"}]}})
    elif method == "prompts/list":
        send({"jsonrpc": "2.0", "id": id, "result": {"prompts": [{"name": "greet"}]}})
    elif method == "prompts/get":
        send({"jsonrpc": "2.0", "id": id, "result": {"messages": [
            {"role": "user", "content": {"type": "text", "text": "hello"}}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": id, "result": {}})
    elif id is not None and method is not None:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
"#;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";
const TRACE_TYPED: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT_TYPED: &str = "b7ad6b7169203331";
const TRACE_REFUSED: &str = "11111111111111111111111111111111";
const TRACE_PROMPT: &str = "33333333333333333333333333333333";
const TRACE_READ: &str = "44444444444444444444444444444444";
const TRACE_PING: &str = "55555555555555555555555555555555";
const PARENT_REFUSED: &str = "2222222222222222";

fn traceparent(trace: &str, parent: &str) -> String {
    format!("00-{trace}-{parent}-01")
}

fn policy(dir: &Path) -> String {
    std::fs::write(dir.join("server.py"), SERVER).expect("server");
    format!(
        r#"version = "2026-12"

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]
resources = ["journal/*"]
prompts = ["journal/*"]

[servers.journal]
command = ["python3", {script:?}]
env = {{ JOURNAL = {journal:?} }}
trust = "trusted"
prefix = "j_"
"#,
        script = dir.join("server.py").display().to_string(),
        journal = dir.join("journal.jsonl").display().to_string(),
    )
}

// ---------------------------------------------------------------------------------------------
// The receiver.

/// What the receiver was sent, decoded.
trait Decoded {
    fn spans(&self) -> Vec<(Vec<KeyValue>, Span)>;
    fn histograms(&self) -> Vec<(String, String, HashMap<String, String>, u64)>;
}

impl Decoded for OtlpReceiver {
    fn spans(&self) -> Vec<(Vec<KeyValue>, Span)> {
        let posts = self.posts.lock().expect("posts");
        let mut spans = Vec::new();
        for post in posts.iter().filter(|p| p.path == "/v1/traces") {
            assert_eq!(post.content_type, "application/x-protobuf");
            let request =
                ExportTraceServiceRequest::decode(post.body.as_slice()).expect("OTLP spans");
            for resource in request.resource_spans {
                let attributes = resource.resource.map(|r| r.attributes).unwrap_or_default();
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        spans.push((attributes.clone(), span));
                    }
                }
            }
        }
        spans
    }

    /// Each histogram's data points: (metric name, unit, attributes, count).
    fn histograms(&self) -> Vec<(String, String, HashMap<String, String>, u64)> {
        let posts = self.posts.lock().expect("posts");
        let mut points = Vec::new();
        // Cumulative: the last export holds every count.
        if let Some(post) = posts.iter().rev().find(|p| p.path == "/v1/metrics") {
            assert_eq!(post.content_type, "application/x-protobuf");
            let request =
                ExportMetricsServiceRequest::decode(post.body.as_slice()).expect("OTLP metrics");
            for resource in request.resource_metrics {
                for scope in resource.scope_metrics {
                    for m in scope.metrics {
                        if let Some(metric::Data::Histogram(histogram)) = m.data {
                            for point in histogram.data_points {
                                points.push((
                                    m.name.clone(),
                                    m.unit.clone(),
                                    attribute_map(&point.attributes),
                                    point.count,
                                ));
                            }
                        }
                    }
                }
            }
        }
        points
    }
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn attribute_map(attributes: &[KeyValue]) -> HashMap<String, String> {
    attributes
        .iter()
        .map(|kv| {
            (
                kv.key.clone(),
                kv.value.as_ref().map(text).unwrap_or_default(),
            )
        })
        .collect()
}

fn attrs(span: &Span) -> HashMap<String, String> {
    attribute_map(&span.attributes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn is_error(span: &Span) -> bool {
    span.status
        .as_ref()
        .is_some_and(|s| s.code == status::StatusCode::Error as i32)
}

/// The one span named `name` in trace `trace`.
fn one<'s>(spans: &'s [(Vec<KeyValue>, Span)], trace: &str, name: &str) -> &'s Span {
    let found: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| hex(&s.trace_id) == trace && s.name == name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one span `{name}` in trace {trace}; the spans: {:#?}",
        spans
            .iter()
            .map(|(_, s)| (hex(&s.trace_id), &s.name))
            .collect::<Vec<_>>()
    );
    found[0]
}

/// The attributes `expected` are all on `span`, with these values.
fn has(span: &Span, expected: &[(&str, &str)]) {
    let got = attrs(span);
    for (key, value) in expected {
        assert_eq!(
            got.get(*key).map(String::as_str),
            Some(*value),
            "`{key}` of span `{}`: {got:#?}",
            span.name
        );
    }
}

fn lacks(span: &Span, keys: &[&str]) {
    let got = attrs(span);
    for key in keys {
        assert!(
            !got.contains_key(*key),
            "`{key}` on `{}`: {got:#?}",
            span.name
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The server's journal, and a client that writes its own lines.

fn journal(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The `_meta` the server was sent with the call whose arguments hold `n`.
fn sent_meta(dir: &Path, n: u64) -> Value {
    sent(dir, n)["params"]["_meta"].clone()
}

/// The call whose arguments hold `n`, as the server read it.
fn sent(dir: &Path, n: u64) -> Value {
    let journal = journal(dir);
    let calls: Vec<&Value> = journal
        .iter()
        .filter(|m| m["method"] == "tools/call" && m["params"]["arguments"]["n"] == n)
        .collect();
    assert_eq!(calls.len(), 1, "one call {n} at the server: {journal:#?}");
    calls[0].clone()
}

struct Client {
    child: Child,
    input: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Client {
    fn gateway(dir: &Path, otlp: Option<&str>) -> Client {
        let mut command = Command::new(BIN);
        command
            .arg("gateway")
            .arg("--policy")
            .arg(dir.join("policy.toml"))
            .arg("--role")
            .arg("operator")
            .arg("--audit")
            .arg(dir.join("audit.jsonl"));
        if let Some(url) = otlp {
            command.arg("--otlp").arg(url);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("gateway");
        let input = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut client = Client {
            child,
            input,
            lines,
        };
        client.line(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}})
            .to_string(),
        );
        let init = client.answer(&json!(0));
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        client.line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        client
    }

    fn line(&mut self, line: &str) {
        let input = self.input.as_mut().expect("open");
        writeln!(input, "{line}").expect("write");
        input.flush().expect("flush");
    }

    fn answer(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let line = self.lines.recv_timeout(left).expect("an answer");
            let value: Value = serde_json::from_str(&line).expect("JSON");
            if value.get("method").is_none() && &value["id"] == id {
                return value;
            }
        }
        panic!("no answer to {id}");
    }

    /// Closes the gateway's input and waits for it to exit (it sends what is left first).
    fn close(mut self) {
        drop(self.input.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.child.try_wait().expect("wait") {
                Some(status) => {
                    assert!(status.success(), "the gateway exits cleanly: {status}");
                    return;
                }
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                None => panic!("the gateway did not exit once its client was gone"),
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `tools/call` line: `extra` adds a key to the params (which sends it through rmcp's
/// typed path instead of the gateway's lane).
fn call(id: &Value, name: &str, n: u64, meta: Option<Value>, extra: bool) -> String {
    let mut params = json!({"name": name, "arguments": {"n": n}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    if extra {
        params["x-extra"] = json!(1);
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

/// The outcome records' `seq`s of the trail's calls of `tool`.
fn outcome_seqs(trail: &Path, tool: &str) -> Vec<String> {
    records(trail)
        .iter()
        .filter(|r| r["phase"] == "outcome" && r["tool"] == tool)
        .map(|r| r["seq"].to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The gateway.

#[test]
fn one_trace_spans_client_gateway_and_server_with_the_conventions_attributes() {
    let dir = scratch("otlp-gateway", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let receiver = OtlpReceiver::start();
    let mut client = Client::gateway(&dir, Some(&receiver.url));

    client.line(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    let listed = client.answer(&json!(1));
    assert_eq!(listed["result"]["tools"].as_array().map(Vec::len), Some(2));

    // The lane: the client's trace context, with its state, its baggage and a key of its own.
    let meta = json!({
        "traceparent": traceparent(TRACE, PARENT),
        "tracestate": "vendor=x",
        "baggage": "tenant=acme",
        "progressToken": "pt-2",
    });
    client.line(&call(&json!(2), "j_echo", 2, Some(meta), false));
    let answer = client.answer(&json!(2));
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    // rmcp's path, under a string id; the client says it does not sample this trace, which
    // does not decide what the gateway records.
    let meta = json!({"traceparent": format!("00-{TRACE_TYPED}-{PARENT_TYPED}-00")});
    client.line(&call(&json!("s-3"), "j_echo", 3, Some(meta), true));
    let answer = client.answer(&json!("s-3"));
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    // A tool's error, without a trace context: a trace of the gateway's own.
    client.line(&call(&json!(4), "j_fail", 4, None, false));
    assert_eq!(client.answer(&json!(4))["result"]["isError"], true);

    // A refused call: no server has it.
    let meta = json!({"traceparent": traceparent(TRACE_REFUSED, PARENT_REFUSED)});
    client.line(&call(&json!(5), "j_nothing", 5, Some(meta), false));
    let refused = client.answer(&json!(5));
    let code = refused["error"]["code"].as_i64().expect("a refusal");

    // A prompt and a resource, each in a trace of the client's.
    client.line(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "prompts/get", "params": {
            "name": "j_greet", "_meta": {"traceparent": traceparent(TRACE_PROMPT, PARENT)}}})
        .to_string(),
    );
    assert!(client.answer(&json!(7)).get("result").is_some());
    client.line(
        &json!({"jsonrpc": "2.0", "id": 8, "method": "resources/read", "params": {
            "uri": "journal://notes/1", "_meta": {"traceparent": traceparent(TRACE_READ, PARENT)}}})
        .to_string(),
    );
    assert!(client.answer(&json!(8)).get("result").is_some());

    // The gateway's own answer, in a trace of the client's.
    client.line(
        &json!({"jsonrpc": "2.0", "id": "p-9", "method": "ping", "params": {
            "_meta": {"traceparent": traceparent(TRACE_PING, PARENT)}}})
        .to_string(),
    );
    assert!(client.answer(&json!("p-9")).get("result").is_some());

    // A malformed traceparent (upper-case hex): ignored, the call starts a trace of its own.
    let bad = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01";
    client.line(&call(
        &json!(6),
        "j_echo",
        6,
        Some(json!({"traceparent": bad})),
        false,
    ));
    assert_eq!(client.answer(&json!(6))["result"]["isError"], false);
    client.close();

    let spans = receiver.spans();
    let trail = dir.join("audit.jsonl");
    let (resource, _) = spans.first().expect("spans were exported");
    assert_eq!(
        attribute_map(resource)
            .get("service.name")
            .map(String::as_str),
        Some("capability-gateway")
    );

    // The lane's call: client → mcp.server → execute_tool → mcp.client → server.
    let server = one(&spans, TRACE, "tools/call j_echo");
    assert_eq!(server.kind, span::SpanKind::Server as i32);
    assert_eq!(
        hex(&server.parent_span_id),
        PARENT,
        "the client's span is the parent"
    );
    has(
        server,
        &[
            ("mcp.method.name", "tools/call"),
            ("jsonrpc.request.id", "2"),
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", "j_echo"),
            ("mcp.protocol.version", "2025-11-25"),
            ("network.transport", "pipe"),
            ("capability.role", "operator"),
            ("capability.policy_version", "2026-12"),
            ("capability.verdict", "allowed"),
        ],
    );
    lacks(server, &["error.type", "mcp.session.id"]);
    assert!(!is_error(server));
    let executed = one(&spans, TRACE, "execute_tool echo");
    assert_eq!(executed.parent_span_id, server.span_id);
    assert_eq!(executed.kind, span::SpanKind::Internal as i32);
    has(
        executed,
        &[
            ("capability.provider", "journal"),
            ("capability.verdict", "allowed"),
        ],
    );
    let leg = one(&spans, TRACE, "tools/call echo");
    assert_eq!(leg.kind, span::SpanKind::Client as i32);
    assert_eq!(leg.parent_span_id, executed.span_id);
    has(
        leg,
        &[
            ("mcp.method.name", "tools/call"),
            ("gen_ai.tool.name", "echo"),
            ("network.transport", "pipe"),
            ("capability.server", "journal"),
        ],
    );
    // The leg names the id the server was sent (the lane's own, not the client's).
    let id = sent(&dir, 2)["id"].clone();
    assert!(
        id.as_str()
            .is_some_and(|id| id.starts_with("capability-gateway/")),
        "{id}"
    );
    has(
        leg,
        &[("jsonrpc.request.id", id.as_str().unwrap_or_default())],
    );
    // The server was sent the leg as its parent, the client's state and baggage, and the
    // rest of the client's `_meta` as it was.
    let sent = sent_meta(&dir, 2);
    assert_eq!(sent["traceparent"], traceparent(TRACE, &hex(&leg.span_id)));
    assert_eq!(sent["tracestate"], "vendor=x");
    assert_eq!(sent["baggage"], "tenant=acme");
    assert_eq!(sent["progressToken"], "pt-2");

    // rmcp's path: the same chain.
    let server_typed = one(&spans, TRACE_TYPED, "tools/call j_echo");
    assert_eq!(hex(&server_typed.parent_span_id), PARENT_TYPED);
    has(
        server_typed,
        &[
            ("jsonrpc.request.id", "s-3"),
            ("network.transport", "pipe"),
            ("capability.verdict", "allowed"),
            ("capability.role", "operator"),
        ],
    );
    let executed_typed = one(&spans, TRACE_TYPED, "execute_tool echo");
    assert_eq!(executed_typed.parent_span_id, server_typed.span_id);
    let leg_typed = one(&spans, TRACE_TYPED, "tools/call echo");
    assert_eq!(leg_typed.parent_span_id, executed_typed.span_id);
    // rmcp numbers this request inside its peer, after the leg's span is made: the leg names
    // the id the server was sent all the same.
    let id_typed = self::sent(&dir, 3)["id"].clone();
    assert!(
        id_typed.is_number(),
        "rmcp numbers its requests: {id_typed}"
    );
    has(leg_typed, &[("jsonrpc.request.id", &id_typed.to_string())]);
    assert_eq!(
        sent_meta(&dir, 3)["traceparent"],
        traceparent(TRACE_TYPED, &hex(&leg_typed.span_id)),
        "recorded, so sampled"
    );

    // Each call's record: the span's `capability.audit.seq` is its outcome's in the trail.
    let mut seqs: Vec<String> = [server, server_typed]
        .iter()
        .map(|s| attrs(s)["capability.audit.seq"].clone())
        .collect();
    for executed in [executed, executed_typed] {
        assert!(seqs.contains(&attrs(executed)["capability.audit.seq"]));
    }
    let mut on_record = outcome_seqs(&trail, "echo");
    on_record.truncate(2);
    seqs.sort();
    on_record.sort();
    assert_eq!(seqs, on_record, "the spans name the trail's records");

    // A tool's error: `tool_error` on both sides; a root span, and the server was sent its
    // trace.
    let failed: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "tools/call j_fail")
        .collect();
    assert_eq!(failed.len(), 1);
    let failed = failed[0];
    assert!(
        failed.parent_span_id.is_empty(),
        "no client context: a root"
    );
    has(failed, &[("error.type", "tool_error")]);
    assert!(is_error(failed));
    let trace = hex(&failed.trace_id);
    let failed_leg = one(&spans, &trace, "tools/call fail");
    has(failed_leg, &[("error.type", "tool_error")]);
    assert_eq!(
        sent_meta(&dir, 4)["traceparent"],
        traceparent(&trace, &hex(&failed_leg.span_id))
    );

    // The refusal: the error's code, the verdict, and no leg.
    let refused = one(&spans, TRACE_REFUSED, "tools/call j_nothing");
    let code = code.to_string();
    has(
        refused,
        &[
            ("error.type", code.as_str()),
            ("rpc.response.status_code", code.as_str()),
            ("capability.verdict", "denied"),
        ],
    );
    assert!(is_error(refused));
    let mut in_trace: Vec<&str> = spans
        .iter()
        .filter(|(_, s)| hex(&s.trace_id) == TRACE_REFUSED)
        .map(|(_, s)| s.name.as_str())
        .collect();
    in_trace.sort_unstable();
    assert_eq!(in_trace, ["execute_tool j_nothing", "tools/call j_nothing"]);
    assert!(
        !journal(&dir)
            .iter()
            .any(|m| m["params"]["arguments"]["n"] == 5),
        "a refused call reaches no server"
    );

    // The malformed context: ignored.
    let own = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.name == "tools/call j_echo" && attrs(s)["jsonrpc.request.id"] == "6")
        .expect("call 6");
    assert!(own.parent_span_id.is_empty());
    assert_ne!(hex(&own.trace_id), TRACE);
    let sent = sent_meta(&dir, 6)["traceparent"].clone();
    assert_eq!(
        sent.as_str().map(|t| &t[3..35]),
        Some(hex(&own.trace_id).as_str())
    );

    // The gateway's own requests: `initialize` and `ping`, each an `mcp.server` span.
    let pinged = one(&spans, TRACE_PING, "ping");
    assert_eq!(pinged.kind, span::SpanKind::Server as i32);
    assert_eq!(hex(&pinged.parent_span_id), PARENT);
    has(
        pinged,
        &[
            ("mcp.method.name", "ping"),
            ("jsonrpc.request.id", "p-9"),
            ("network.transport", "pipe"),
        ],
    );
    assert!(!is_error(pinged));
    let initialized: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "initialize")
        .collect();
    assert_eq!(initialized.len(), 1, "one initialize");
    assert_eq!(initialized[0].kind, span::SpanKind::Server as i32);
    has(
        initialized[0],
        &[
            ("mcp.method.name", "initialize"),
            ("jsonrpc.request.id", "0"),
            ("network.transport", "pipe"),
        ],
    );

    // The prompt: named for it, shown name on the gateway's side, own name on the leg.
    let got = one(&spans, TRACE_PROMPT, "prompts/get j_greet");
    has(
        got,
        &[
            ("mcp.method.name", "prompts/get"),
            ("gen_ai.prompt.name", "j_greet"),
        ],
    );
    lacks(got, &["gen_ai.tool.name", "gen_ai.operation.name"]);
    let got_leg = one(&spans, TRACE_PROMPT, "prompts/get greet");
    assert_eq!(got_leg.kind, span::SpanKind::Client as i32);
    has(
        got_leg,
        &[
            ("gen_ai.prompt.name", "greet"),
            ("capability.server", "journal"),
        ],
    );
    // The read: its URI (not in the name: a URI is not a low-cardinality target).
    // The server's span and the leg's have the same name: no tool or prompt to add.
    let read = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| {
            hex(&s.trace_id) == TRACE_READ
                && s.name == "resources/read"
                && s.kind == span::SpanKind::Server as i32
        })
        .expect("the read's span");
    has(
        read,
        &[
            ("mcp.resource.uri", "journal://notes/1"),
            ("capability.verdict", "allowed"),
        ],
    );
    let read_legs: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| hex(&s.trace_id) == TRACE_READ && s.kind == span::SpanKind::Client as i32)
        .collect();
    assert_eq!(read_legs.len(), 1);
    assert_eq!(read_legs[0].name, "resources/read");
    has(read_legs[0], &[("mcp.resource.uri", "journal://notes/1")]);
    let sent_read = journal(&dir)
        .into_iter()
        .find(|m| m["method"] == "resources/read")
        .expect("the read reached the server");
    assert_eq!(
        sent_read["params"]["_meta"]["traceparent"],
        traceparent(TRACE_READ, &hex(&read_legs[0].span_id))
    );

    // The listing: a span of its own, named for its method.
    let list: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "tools/list")
        .collect();
    assert_eq!(list.len(), 1);
    has(
        list[0],
        &[
            ("mcp.method.name", "tools/list"),
            ("jsonrpc.request.id", "1"),
        ],
    );
    lacks(list[0], &["gen_ai.tool.name", "error.type"]);

    // The durations.
    let histograms = receiver.histograms();
    let count = |name: &str, with: &[(&str, &str)]| -> u64 {
        histograms
            .iter()
            .filter(|(n, unit, a, _)| {
                n == name
                    && unit == "s"
                    && with
                        .iter()
                        .all(|(k, v)| a.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, _, _, count)| count)
            .sum()
    };
    let echo = [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "j_echo"),
    ];
    assert_eq!(count("mcp.server.operation.duration", &echo), 3);
    assert_eq!(
        count(
            "mcp.server.operation.duration",
            &[("gen_ai.tool.name", "j_fail"), ("error.type", "tool_error")]
        ),
        1
    );
    assert_eq!(
        count(
            "mcp.server.operation.duration",
            &[("gen_ai.tool.name", "j_nothing"), ("error.type", &code)]
        ),
        1
    );
    assert_eq!(
        count(
            "mcp.client.operation.duration",
            &[("gen_ai.tool.name", "echo")]
        ),
        3
    );
    assert_eq!(
        count(
            "mcp.server.session.duration",
            &[("network.transport", "pipe")]
        ),
        1
    );
}

#[test]
fn without_otlp_the_gateway_passes_the_clients_trace_context_on_as_it_was() {
    let dir = scratch("otlp-gateway-off", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let mut client = Client::gateway(&dir, None);
    let meta = json!({"traceparent": traceparent(TRACE, PARENT), "tracestate": "vendor=x"});
    client.line(&call(&json!(1), "j_echo", 1, Some(meta.clone()), false));
    client.answer(&json!(1));
    client.line(&call(&json!(2), "j_echo", 2, Some(meta), true));
    client.answer(&json!(2));
    client.close();
    for n in [1, 2] {
        let sent = sent_meta(&dir, n);
        assert_eq!(sent["traceparent"], traceparent(TRACE, PARENT), "call {n}");
        assert_eq!(sent["tracestate"], "vendor=x", "call {n}");
    }
}

#[test]
fn a_bad_otlp_endpoint_is_refused_before_anything_starts() {
    let dir = scratch("otlp-bad", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let out = Command::new(BIN)
        .arg("gateway")
        .arg("--policy")
        .arg(dir.join("policy.toml"))
        .args(["--role", "operator", "--audit"])
        .arg(dir.join("audit.jsonl"))
        .args(["--otlp", "127.0.0.1:4318"])
        .stdin(Stdio::null())
        .output()
        .expect("gateway");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "--otlp wants the URL of an OTLP/HTTP receiver, such as http://127.0.0.1:4318"
        ),
        "{stderr}"
    );
    assert!(journal(&dir).is_empty(), "no server was started");
}

// ---------------------------------------------------------------------------------------------
// The proxy (the governed server), with the official TypeScript SDK's client.

fn proxy_target(dir: &Path, otlp: Option<&str>) -> (String, Vec<String>) {
    let mut args: Vec<String> = vec![
        "proxy".into(),
        "--policy".into(),
        dir.join("policy.toml").display().to_string(),
        "--role".into(),
        "operator".into(),
        "--server".into(),
        "journal".into(),
        "--trust".into(),
        "trusted".into(),
        "--audit".into(),
        dir.join("audit.jsonl").display().to_string(),
    ];
    if let Some(url) = otlp {
        args.extend(["--otlp".into(), url.into()]);
    }
    args.extend([
        "--".into(),
        "env".into(),
        format!("JOURNAL={}", dir.join("journal.jsonl").display()),
        "python3".into(),
        dir.join("server.py").display().to_string(),
    ]);
    (BIN.to_owned(), args)
}

fn ts_calls(dir: &Path, otlp: Option<&str>) -> Option<Vec<Value>> {
    let servers = require_servers!("otlp through the proxy", None);
    let ops = json!([
        {"op": "call", "name": "echo", "arguments": {"n": 1}, "meta": {
            "traceparent": traceparent(TRACE, PARENT),
            "tracestate": "vendor=x",
            "baggage": "tenant=acme",
        }},
        {"op": "call", "name": "fail", "arguments": {"n": 2}},
    ]);
    let (program, args) = proxy_target(dir, otlp);
    let output = servers
        .ts_client(
            &ops,
            TsTarget::Stdio {
                program: Path::new(&program),
                args: &args,
            },
        )
        .output()
        .expect("the TypeScript client");
    let lines = support::ts_client_lines(&output).expect("its lines");
    Some(lines)
}

#[test]
fn the_proxy_and_its_governed_server_carry_the_typescript_clients_trace_to_the_server() {
    let dir: PathBuf = scratch("otlp-proxy", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let receiver = OtlpReceiver::start();
    let Some(lines) = ts_calls(&dir, Some(&receiver.url)) else {
        return;
    };
    assert_eq!(lines[1]["result"]["isError"], false, "{lines:?}");
    assert_eq!(lines[2]["result"]["isError"], true, "{lines:?}");

    let spans = receiver.spans();
    let (resource, _) = spans.first().expect("spans were exported");
    assert_eq!(
        attribute_map(resource)
            .get("service.name")
            .map(String::as_str),
        Some("capability-proxy")
    );
    // The server's span and the leg's have the same name here (the proxy adds no prefix).
    let named: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| hex(&s.trace_id) == TRACE && s.name == "tools/call echo")
        .collect();
    assert_eq!(named.len(), 2, "{named:#?}");
    let server = named
        .iter()
        .find(|s| s.kind == span::SpanKind::Server as i32)
        .expect("the server's span");
    assert_eq!(hex(&server.parent_span_id), PARENT);
    let version = attrs(server)["mcp.protocol.version"].clone();
    assert!(
        version.starts_with("20"),
        "the client's revision: {version}"
    );
    has(
        server,
        &[
            ("mcp.method.name", "tools/call"),
            ("gen_ai.tool.name", "echo"),
            ("network.transport", "pipe"),
            ("capability.role", "operator"),
            ("capability.policy_version", "2026-12"),
            ("capability.verdict", "allowed"),
        ],
    );
    let executed = one(&spans, TRACE, "execute_tool echo");
    assert_eq!(executed.parent_span_id, server.span_id);
    let legs: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| hex(&s.trace_id) == TRACE && s.kind == span::SpanKind::Client as i32)
        .collect();
    assert_eq!(legs.len(), 1);
    assert_eq!(legs[0].parent_span_id, executed.span_id);
    has(
        legs[0],
        &[
            ("capability.server", "journal"),
            ("gen_ai.tool.name", "echo"),
        ],
    );
    // The leg names the id the server was sent (the lane's own, a string rmcp never uses).
    let id = self::sent(&dir, 1)["id"].clone();
    let id = id.as_str().map_or_else(|| id.to_string(), str::to_owned);
    has(legs[0], &[("jsonrpc.request.id", &id)]);
    let sent = sent_meta(&dir, 1);
    assert_eq!(
        sent["traceparent"],
        traceparent(TRACE, &hex(&legs[0].span_id))
    );
    assert_eq!(sent["tracestate"], "vendor=x");
    assert_eq!(sent["baggage"], "tenant=acme");
    assert_eq!(
        attrs(server)["capability.audit.seq"],
        outcome_seqs(&dir.join("audit.jsonl"), "echo")[0]
    );

    let failed: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "tools/call fail")
        .collect();
    assert_eq!(failed.len(), 2, "the server's and the leg's");
    for span in failed {
        has(span, &[("error.type", "tool_error")]);
    }
    let histograms = receiver.histograms();
    assert!(
        histograms.iter().any(
            |(name, _, a, count)| name == "mcp.server.operation.duration"
                && a.get("gen_ai.tool.name").map(String::as_str) == Some("echo")
                && *count == 1
        ),
        "{histograms:?}"
    );
    assert!(
        histograms
            .iter()
            .any(|(name, _, _, count)| name == "mcp.server.session.duration" && *count == 1),
        "{histograms:?}"
    );
}

#[test]
fn without_otlp_the_proxy_passes_the_clients_trace_context_on_as_it_was() {
    let dir = scratch("otlp-proxy-off", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    if ts_calls(&dir, None).is_none() {
        return;
    }
    let sent = sent_meta(&dir, 1);
    assert_eq!(sent["traceparent"], traceparent(TRACE, PARENT));
    assert_eq!(sent["tracestate"], "vendor=x");
    assert_eq!(sent["baggage"], "tenant=acme");
}

// ---------------------------------------------------------------------------------------------
// The gateway over Streamable HTTP.

/// The JSON-RPC message in an HTTP answer's body (JSON, or an event stream, chunked or not).
fn message_in(body: &str) -> Value {
    body.lines()
        .map(|line| line.strip_prefix("data:").unwrap_or(line).trim())
        .find_map(|line| {
            serde_json::from_str::<Value>(line)
                .ok()
                .filter(|v| v.get("jsonrpc").is_some())
        })
        .unwrap_or_else(|| panic!("a JSON-RPC message in {body:?}"))
}

#[tokio::test(flavor = "current_thread")]
async fn over_http_the_span_names_its_session_and_the_session_its_duration() {
    let dir = scratch("otlp-gateway-http", "");
    let token = "operator-token-of-the-traced-gateway";
    let hash = capability_rules::sha256_hex(token.as_bytes());
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            "{}\n[bearer_tokens]\n\"sha256:{hash}\" = \"operator\"\n",
            policy(&dir)
        ),
    )
    .expect("policy");
    let receiver = OtlpReceiver::start();
    let trail = dir.join("audit.jsonl");
    let mut args = proxy_common::gateway_listen(&dir.join("policy.toml"), "127.0.0.1:0", &trail);
    args.extend(["--otlp".to_owned(), receiver.url.clone()]);
    let gateway = proxy_common::Listening::start_args(&args).await;
    let bearer = format!("Bearer {token}");
    let auth = ("Authorization", bearer.as_str());

    let init = support::raw_post(
        &gateway.url,
        &[auth],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    assert_eq!(init.status, 200, "{init:?}");
    let session = init.header("mcp-session-id").expect("a session").to_owned();
    let with_session = [auth, ("Mcp-Session-Id", session.as_str())];
    let initialized = support::raw_post(
        &gateway.url,
        &with_session,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(initialized.status, 202, "{initialized:?}");
    let called = support::raw_post(
        &gateway.url,
        &with_session,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "j_echo", "arguments": {"n": 7},
            "_meta": {"traceparent": traceparent(TRACE, PARENT)}}}),
    );
    assert_eq!(called.status, 200, "{called:?}");
    assert_eq!(
        message_in(&called.body)["result"]["isError"],
        false,
        "{called:?}"
    );
    let closed = support::raw_request(
        "DELETE",
        &gateway.url,
        &[auth, ("Mcp-Session-Id", session.as_str())],
        "",
    );
    assert!(closed.status < 300, "{closed:?}");
    assert_eq!(gateway.stop().await.code(), Some(0));

    let spans = receiver.spans();
    let server = one(&spans, TRACE, "tools/call j_echo");
    assert_eq!(hex(&server.parent_span_id), PARENT);
    has(
        server,
        &[
            ("network.transport", "tcp"),
            ("mcp.session.id", session.as_str()),
            ("mcp.protocol.version", "2025-11-25"),
            ("capability.role", "operator"),
            ("capability.verdict", "allowed"),
        ],
    );
    assert!(
        attrs(server)
            .get("capability.principal")
            .is_some_and(|p| !p.is_empty()),
        "the caller the edge authenticated: {:#?}",
        attrs(server)
    );
    let executed = one(&spans, TRACE, "execute_tool echo");
    assert_eq!(executed.parent_span_id, server.span_id);
    let leg = one(&spans, TRACE, "tools/call echo");
    assert_eq!(leg.parent_span_id, executed.span_id);
    assert_eq!(
        sent_meta(&dir, 7)["traceparent"],
        traceparent(TRACE, &hex(&leg.span_id))
    );
    let sessions: Vec<_> = receiver
        .histograms()
        .into_iter()
        .filter(|(name, _, _, _)| name == "mcp.server.session.duration")
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(
        sessions[0].2.get("network.transport").map(String::as_str),
        Some("tcp")
    );
    assert_eq!(sessions[0].3, 1, "the session closed: its duration");
}

#[test]
fn a_receiver_that_is_not_there_costs_no_call_and_no_exit() {
    let dir = scratch("otlp-gateway-down", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    // A port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let started = Instant::now();
    let mut client = Client::gateway(&dir, Some(&format!("http://127.0.0.1:{closed}")));
    for n in 1..=3 {
        client.line(&call(&json!(n), "j_echo", n, None, false));
        assert_eq!(client.answer(&json!(n))["result"]["isError"], false);
    }
    client.close();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "served and exited in {:?}",
        started.elapsed()
    );
    assert_eq!(
        records(&dir.join("audit.jsonl"))
            .iter()
            .filter(|r| r["phase"] == "outcome")
            .count(),
        3,
        "every call on record"
    );
}

#[test]
fn made_up_tool_names_cannot_grow_the_exported_durations_past_the_sdks_limit() {
    let dir = scratch("otlp-gateway-names", "");
    std::fs::write(dir.join("policy.toml"), policy(&dir)).expect("policy");
    let receiver = OtlpReceiver::start();
    let mut client = Client::gateway(&dir, Some(&receiver.url));
    // Each a name no server has: refused, and its duration carries the name it was asked by.
    const NAMES: u64 = 2_100;
    for n in 1..=NAMES {
        client.line(&call(&json!(n), &format!("j_made_up_{n}"), n, None, false));
    }
    for n in 1..=NAMES {
        assert!(client.answer(&json!(n)).get("error").is_some());
    }
    client.close();
    let points: Vec<_> = receiver
        .histograms()
        .into_iter()
        .filter(|(name, _, _, _)| name == "mcp.server.operation.duration")
        .collect();
    // The SDK keeps at most 2,000 attribute sets an instrument, then one for the overflow.
    assert!(points.len() <= 2_001, "{} attribute sets", points.len());
    let overflow: Vec<_> = points
        .iter()
        .filter(|(_, _, a, _)| a.get("otel.metric.overflow").map(String::as_str) == Some("true"))
        .collect();
    assert_eq!(overflow.len(), 1, "the rest counted under the overflow set");
    let total: u64 = points.iter().map(|(_, _, _, count)| count).sum();
    let initialize = points
        .iter()
        .find(|(_, _, a, _)| a.get("mcp.method.name").map(String::as_str) == Some("initialize"));
    assert_eq!(
        initialize.map(|(_, _, _, count)| *count),
        Some(1),
        "the session's initialize has its set (the first, before the limit)"
    );
    assert_eq!(
        total,
        NAMES + 1,
        "every call counted once, and the initialize"
    );
}
