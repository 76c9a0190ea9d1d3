//! `GovernedServer`'s `mcp.server` spans and durations (`capability::mcp::telemetry`), seen
//! from a library user's side: a `tracing` subscriber of the test's own keeps every span, and a
//! `Telemetry` of the test's own records what the governed server asks of it. In a test binary
//! of its own: both are installed once per process.
//!
//! - A call's span is named and attributed by OpenTelemetry's MCP conventions, carries the
//!   audited call's role, policy version, verdict and record, and is the parent of the call's
//!   `execute_tool` span.
//! - The trace context the client sent in `_meta` is handed to `Telemetry::adopt` for that
//!   span; a malformed one is not.
//! - A refused call's span and duration say the error code; a listing has a span of its own.

#![cfg(feature = "rmcp-server")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use capability::audit::{AuditedDispatch, Budget, MemorySink, Phase};
use capability::mcp::telemetry::{self, Ended, Side, Telemetry, TraceContext};
use capability::rmcp::{FixedRole, GovernedServer, REFUSED_CODE};
use capability::{Policy, Server};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ContentBlock, ErrorData, Implementation, ListToolsResult, PaginatedRequestParams,
    RequestMetaObject, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};

const POLICY: &str = r#"
version = "2026-11"

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]

[roles.viewer]
ceiling = "read-only"
allow = ["*"]
"#;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[derive(Clone)]
struct Ops;

impl ServerHandler for Ops {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ops", "1.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Tool> = [
            json!({"name": "list_pods", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": true, "openWorldHint": false}}),
            json!({"name": "restart_pod", "inputSchema": {"type": "object"},
                   "annotations": {"destructiveHint": true, "openWorldHint": false}}),
        ]
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("a tool"))
        .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        tracing::info!(target: "capability::test", "the tool runs");
        Ok(
            CallToolResult::success(vec![ContentBlock::text(format!("ran {}", request.name))])
                .into(),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// The test's subscriber and telemetry.

#[derive(Clone, Debug)]
struct SpanData {
    name: &'static str,
    metadata: &'static tracing::Metadata<'static>,
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
}

#[derive(Default)]
struct Spans {
    next: AtomicU64,
    spans: Mutex<BTreeMap<u64, SpanData>>,
    /// The entered spans (the test runs on one thread).
    stack: Mutex<Vec<u64>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl tracing::Subscriber for &'static Spans {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let parent = if attrs.is_contextual() {
            self.stack.lock().expect("stack").last().copied()
        } else {
            attrs.parent().map(Id::into_u64)
        };
        let mut data = SpanData {
            name: attrs.metadata().name(),
            metadata: attrs.metadata(),
            parent,
            fields: BTreeMap::new(),
        };
        attrs.record(&mut Fields(&mut data.fields));
        self.spans.lock().expect("spans").insert(id, data);
        Id::from_u64(id)
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        if let Some(data) = self.spans.lock().expect("spans").get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut data.fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, id: &Id) {
        self.stack.lock().expect("stack").push(id.into_u64());
    }
    /// What `Span::current()` asks (the audited dispatch finds the `mcp.server` span so).
    fn current_span(&self) -> tracing_core::span::Current {
        let stack = self.stack.lock().expect("stack");
        let spans = self.spans.lock().expect("spans");
        match stack
            .last()
            .and_then(|id| spans.get(id).map(|s| (*id, s.metadata)))
        {
            Some((id, metadata)) => tracing_core::span::Current::new(Id::from_u64(id), metadata),
            None => tracing_core::span::Current::none(),
        }
    }
    fn exit(&self, id: &Id) {
        let mut stack = self.stack.lock().expect("stack");
        if let Some(at) = stack.iter().rposition(|s| *s == id.into_u64()) {
            stack.remove(at);
        }
    }
}

/// A duration recorded: its side, its attributes, its seconds.
type Recorded = (Side, Vec<(String, String)>, f64);

/// What the governed server asked of the telemetry.
#[derive(Default)]
struct Asked {
    /// (the span's id, the parent it was given).
    adopted: Mutex<Vec<(u64, TraceContext)>>,
    /// (side, attributes, seconds).
    operations: Mutex<Vec<Recorded>>,
}

struct Recording(&'static Asked);

impl Telemetry for Recording {
    fn adopt(&self, span: &tracing::Span, parent: &TraceContext) {
        let id = span.id().map_or(0, |id| id.into_u64());
        self.0
            .adopted
            .lock()
            .expect("adopted")
            .push((id, parent.clone()));
    }

    fn operation(&self, side: Side, ended: &Ended<'_>, seconds: f64) {
        let attributes = ended
            .attributes()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        self.0
            .operations
            .lock()
            .expect("operations")
            .push((side, attributes, seconds));
    }
}

fn installed() -> (&'static Spans, &'static Asked) {
    static ONCE: std::sync::OnceLock<(&'static Spans, &'static Asked)> = std::sync::OnceLock::new();
    *ONCE.get_or_init(|| {
        let spans: &'static Spans = Box::leak(Box::default());
        let asked: &'static Asked = Box::leak(Box::default());
        tracing::subscriber::set_global_default(spans).expect("the only subscriber");
        telemetry::install(Recording(asked)).expect("the only telemetry");
        (spans, asked)
    })
}

async fn client(role: &str, sink: Arc<MemorySink>) -> RunningService<RoleClient, ClientConfig> {
    let dispatch = AuditedDispatch::new(sink).with_budget(Budget {
        max_calls: 100,
        max_denials: 100,
    });
    let governed = GovernedServer::new(
        Ops,
        Server::trusted("k8s"),
        Arc::new(Policy::from_toml_str(POLICY).expect("policy")),
        FixedRole::new(role),
        Arc::new(dispatch),
    );
    let (server_side, client_side) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = governed.serve(server_side).await {
            let _ = running.waiting().await;
        }
    });
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("telemetry-test-client", "1.0.0"),
    )
    .serve(client_side)
    .await
    .expect("connects")
}

fn call_with(tool: &str, traceparent: Option<&str>) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Some(traceparent) = traceparent {
        let mut meta = RequestMetaObject::new();
        meta.set_traceparent(traceparent);
        meta.set_tracestate("vendor=x");
        params.meta = Some(meta);
    }
    params
}

fn spans_named(spans: &Spans, name: &str) -> Vec<(u64, SpanData)> {
    spans
        .spans
        .lock()
        .expect("spans")
        .iter()
        .filter(|(_, s)| s.fields.get("otel.name").map(String::as_str) == Some(name))
        .map(|(id, s)| (*id, s.clone()))
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn a_governed_call_is_an_mcp_server_span_with_the_callers_trace_and_the_audited_call_inside()
{
    let (spans, asked) = installed();
    let sink = Arc::new(MemorySink::new());
    let operator = client("operator", sink.clone()).await;
    let peer = operator.peer();

    let listed = peer.list_tools(None).await.expect("lists");
    assert_eq!(listed.tools.len(), 2);
    peer.call_tool(call_with("list_pods", Some(TRACEPARENT)))
        .await
        .expect("runs");
    // A malformed context: a span of its own, not adopted.
    peer.call_tool(call_with(
        "list_pods",
        Some("00-nothex-00f067aa0ba902b7-01"),
    ))
    .await
    .expect("runs");
    operator.cancel().await.expect("closes");

    let viewer = client("viewer", sink.clone()).await;
    let refused = viewer
        .peer()
        .call_tool(call_with("restart_pod", None))
        .await
        .expect_err("a viewer may not restart a pod");
    assert!(
        format!("{refused:?}").contains(&REFUSED_CODE.to_string()),
        "{refused:?}"
    );
    viewer.cancel().await.expect("closes");

    // The first call: its span, named and attributed by the conventions.
    let calls = spans_named(spans, "tools/call list_pods");
    assert_eq!(calls.len(), 2, "{calls:#?}");
    let (id, call) = &calls[0];
    assert_eq!(call.name, "mcp.server");
    let field = |data: &SpanData, key: &str| data.fields.get(key).cloned();
    for (key, value) in [
        ("otel.kind", "server"),
        ("mcp.method.name", "tools/call"),
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "list_pods"),
        ("network.transport", "pipe"),
        ("capability.role", "operator"),
        ("capability.policy_version", "2026-11"),
        ("capability.verdict", "allowed"),
    ] {
        assert_eq!(field(call, key).as_deref(), Some(value), "{key}: {call:#?}");
    }
    assert!(field(call, "jsonrpc.request.id").is_some(), "{call:#?}");
    assert!(field(call, "mcp.protocol.version").is_some(), "{call:#?}");
    assert_eq!(field(call, "error.type"), None);
    // Its record: the outcome's place in the chain.
    let records = sink.records();
    let outcome = records
        .iter()
        .find(|r| r.tool == "list_pods" && r.phase == Some(Phase::Outcome))
        .expect("an outcome");
    assert_eq!(
        field(call, "capability.audit.seq"),
        Some(outcome.seq.to_string())
    );
    // The audited call runs in it.
    let executed: Vec<(u64, SpanData)> = spans
        .spans
        .lock()
        .expect("spans")
        .iter()
        .filter(|(_, s)| s.name == "execute_tool" && s.parent == Some(*id))
        .map(|(i, s)| (*i, s.clone()))
        .collect();
    assert_eq!(
        executed.len(),
        1,
        "the call's execute_tool span is the child"
    );
    // The client's trace context went to the telemetry, for this span.
    let adopted = asked.adopted.lock().expect("adopted").clone();
    assert_eq!(
        adopted.len(),
        1,
        "only the well-formed context: {adopted:?}"
    );
    assert_eq!(adopted[0].0, *id);
    assert_eq!(adopted[0].1.traceparent, TRACEPARENT);
    assert_eq!(adopted[0].1.tracestate.as_deref(), Some("vendor=x"));

    // The handshake and the listing.
    assert_eq!(spans_named(spans, "initialize").len(), 2, "one per client");
    let lists = spans_named(spans, "tools/list");
    assert_eq!(lists.len(), 1);
    assert_eq!(field(&lists[0].1, "gen_ai.tool.name"), None);

    // The refusal: the code as the error's type, the verdict.
    let refusals = spans_named(spans, "tools/call restart_pod");
    assert_eq!(refusals.len(), 1);
    let code = REFUSED_CODE.to_string();
    let refusal = &refusals[0].1;
    assert_eq!(field(refusal, "error.type").as_deref(), Some(code.as_str()));
    assert_eq!(field(refusal, "otel.status_code").as_deref(), Some("ERROR"));
    assert_eq!(
        field(refusal, "capability.verdict").as_deref(),
        Some("denied")
    );
    assert_eq!(field(refusal, "capability.role").as_deref(), Some("viewer"));

    // The durations: one per request, with the conventions' attributes.
    let operations = asked.operations.lock().expect("operations").clone();
    let of = |tool: &str| -> Vec<&Vec<(String, String)>> {
        operations
            .iter()
            .filter(|(side, a, _)| {
                *side == Side::Server && a.iter().any(|(k, v)| k == "gen_ai.tool.name" && v == tool)
            })
            .map(|(_, a, _)| a)
            .collect()
    };
    assert_eq!(of("list_pods").len(), 2);
    let refused = of("restart_pod");
    assert_eq!(refused.len(), 1);
    assert!(refused[0].contains(&("error.type".to_owned(), code.clone())));
    assert!(
        operations
            .iter()
            .all(|(_, _, seconds)| seconds.is_finite() && *seconds >= 0.0)
    );
}
