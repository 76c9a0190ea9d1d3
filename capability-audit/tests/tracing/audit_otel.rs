//! Each audited call is a `tracing` span in OpenTelemetry's terms: named `execute_tool {tool}`
//! (through `otel.name`), with the GenAI attributes and ours under `capability.`. In a test
//! binary of its own: tracing caches each call site's interest globally.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use capability::audit::{AuditedDispatch, Budget, Caller, MemorySink, Outcome};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};

use crate::common;
use common::{list_pods, monitor, restart_pod};

#[derive(Clone, Debug, Default)]
struct SpanData {
    name: &'static str,
    metadata: Option<&'static tracing::Metadata<'static>>,
    target: String,
    fields: BTreeMap<String, String>,
}

/// Keeps every span with its fields, and which span each event was in.
#[derive(Default)]
struct Spans {
    next: AtomicU64,
    spans: Mutex<Vec<SpanData>>,
    stack: Mutex<Vec<u64>>,
    /// (message, the span it was in).
    events: Mutex<Vec<(String, Option<u64>)>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);
impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl tracing::Subscriber for Spans {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut data = SpanData {
            name: attrs.metadata().name(),
            metadata: Some(attrs.metadata()),
            target: attrs.metadata().target().to_owned(),
            ..SpanData::default()
        };
        attrs.record(&mut Fields(&mut data.fields));
        let mut spans = self.spans.lock().expect("lock");
        spans.push(data);
        self.next.store(spans.len() as u64, Ordering::SeqCst);
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().expect("lock");
        let data = &mut spans[id.into_u64() as usize - 1];
        values.record(&mut Fields(&mut data.fields));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let message = fields.remove("message").unwrap_or_default();
        let current = self.stack.lock().expect("lock").last().copied();
        self.events.lock().expect("lock").push((message, current));
    }
    fn enter(&self, id: &Id) {
        self.stack.lock().expect("lock").push(id.into_u64());
    }
    fn exit(&self, _: &Id) {
        self.stack.lock().expect("lock").pop();
    }
    fn current_span(&self) -> tracing_core::span::Current {
        let current = self.stack.lock().expect("lock").last().copied();
        let spans = self.spans.lock().expect("lock");
        match current.and_then(|id| Some((id, spans.get(id as usize - 1)?.metadata?))) {
            Some((id, metadata)) => tracing_core::span::Current::new(Id::from_u64(id), metadata),
            None => tracing_core::span::Current::none(),
        }
    }
}

fn field<'a>(span: &'a SpanData, name: &str) -> Option<&'a str> {
    span.fields.get(name).map(String::as_str)
}

#[test]
fn each_call_is_an_execute_tool_span_with_the_gen_ai_attributes() {
    let spans = Arc::new(Spans::default());
    let sink = Arc::new(MemorySink::new());
    tracing::subscriber::with_default(spans.clone(), || {
        let dispatch = AuditedDispatch::new(sink.clone())
            .with_policy_version("v7")
            .with_budget(Budget {
                max_calls: 10,
                max_denials: 5,
            });
        let ctx = monitor("s-1");
        let caller = Caller::new("watcher")
            .step("triage")
            .incident("INC-2026-0042");
        let ok: Outcome<u8, String> =
            dispatch.call(&ctx, caller, &list_pods(), &json!({"ns": "prod"}), || {
                tracing::info!("inside the tool");
                Ok(1)
            });
        assert!(ok.is_done());
        let failed: Outcome<u8, String> =
            dispatch.call(&ctx, caller, &list_pods(), &json!({}), || {
                Err("apiserver timeout".to_owned())
            });
        assert!(matches!(failed, Outcome::Failed(_)));
        let denied: Outcome<u8, String> =
            dispatch.call(&ctx, caller, &restart_pod(), &json!({}), || Ok(1));
        assert!(matches!(denied, Outcome::Denied(_)));
    });
    let all = spans.spans.lock().expect("lock").clone();
    let calls: Vec<&SpanData> = all.iter().filter(|s| s.name == "execute_tool").collect();
    assert_eq!(calls.len(), 3, "{all:?}");

    let descriptor = list_pods().descriptor_hash().to_owned();
    for (span, tool, verdict, error_type, seq) in [
        // The seq of the call's last record: the outcome of a call that ran (its intent is
        // the one before).
        (calls[0], "list_pods", "allowed", None, "2"),
        (calls[1], "list_pods", "allowed", Some("tool_error"), "4"),
        (calls[2], "restart_pod", "denied", Some("denied"), "5"),
    ] {
        assert_eq!(span.target, "capability::audit");
        let expected_name = format!("execute_tool {tool}");
        assert_eq!(
            field(span, "otel.name"),
            Some(expected_name.as_str()),
            "{span:?}"
        );
        assert_eq!(field(span, "gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(field(span, "gen_ai.tool.name"), Some(tool));
        assert_eq!(field(span, "error.type"), error_type, "{span:?}");
        assert_eq!(
            field(span, "otel.status_code"),
            error_type.map(|_| "ERROR"),
            "{span:?}"
        );
        assert_eq!(field(span, "capability.verdict"), Some(verdict), "{span:?}");
        assert_eq!(field(span, "capability.agent"), Some("watcher"));
        assert_eq!(field(span, "capability.role"), Some("monitor"));
        assert_eq!(field(span, "capability.session"), Some("s-1"));
        assert_eq!(field(span, "capability.step"), Some("triage"));
        assert_eq!(field(span, "capability.incident_id"), Some("INC-2026-0042"));
        assert_eq!(field(span, "capability.provider"), Some("k8s"));
        assert_eq!(field(span, "capability.policy_version"), Some("v7"));
        assert_eq!(field(span, "capability.audit.seq"), Some(seq), "{span:?}");
        // Nothing of the input on the span.
        assert!(!format!("{span:?}").contains("prod"), "{span:?}");
    }
    assert_eq!(
        field(calls[0], "capability.descriptor_hash"),
        Some(descriptor.as_str())
    );
    // Each call has an id of its own.
    let ids: Vec<&str> = calls
        .iter()
        .map(|s| field(s, "gen_ai.tool.call.id").expect("a call id"))
        .collect();
    assert!(
        ids.iter()
            .all(|id| id.starts_with("call_") && id.len() > 10),
        "{ids:?}"
    );
    assert!(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "{ids:?}"
    );

    // The tool's own event, and every record's event, are inside the call's span.
    let events = spans.events.lock().expect("lock").clone();
    let span_of = |message: &str| {
        events
            .iter()
            .filter(|(m, _)| m == message)
            .map(|(_, span)| *span)
            .collect::<Vec<_>>()
    };
    let index = |span: &SpanData| {
        all.iter()
            .position(|s| std::ptr::eq(s, span))
            .map(|i| i as u64 + 1)
    };
    assert_eq!(span_of("inside the tool"), [index(calls[0])]);
    // An intent and an outcome for each call that ran, one record for the denied one.
    assert_eq!(
        span_of("tool call"),
        [
            index(calls[0]),
            index(calls[0]),
            index(calls[1]),
            index(calls[1]),
            index(calls[2])
        ]
    );
}

#[test]
fn a_panicking_tool_marks_its_span() {
    let spans = Arc::new(Spans::default());
    let sink = Arc::new(MemorySink::new());
    tracing::subscriber::with_default(spans.clone(), || {
        let dispatch = AuditedDispatch::new(sink.clone());
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _: Outcome<u8, String> = dispatch.call(
                &monitor("s"),
                Caller::new("watcher"),
                &list_pods(),
                &json!({}),
                || panic!("boom"),
            );
        }));
    });
    let all = spans.spans.lock().expect("lock").clone();
    let call = all
        .iter()
        .find(|s| s.name == "execute_tool")
        .expect("a span");
    assert_eq!(field(call, "error.type"), Some("panic"), "{call:?}");
    assert_eq!(field(call, "capability.audit.seq"), Some("2"), "{call:?}");
    assert_eq!(
        sink.records().len(),
        2,
        "the intent, and the outcome of the panic"
    );
}

/// An audited call made inside another one (a tool whose code calls a second tool through the
/// same dispatch, under another role) does not write onto the spans of the call it is made in:
/// the `mcp.server` span of the client's request keeps the outer call's role, verdict and
/// record, and so does the outer call's own span.
#[test]
fn a_nested_call_does_not_overwrite_the_request_it_is_made_in() {
    let spans = Arc::new(Spans::default());
    let sink = Arc::new(MemorySink::new());
    tracing::subscriber::with_default(spans.clone(), || {
        let dispatch = AuditedDispatch::new(sink.clone())
            .with_policy_version("v7")
            .with_budget(Budget {
                max_calls: 10,
                max_denials: 5,
            });
        let request = tracing::info_span!(
            "mcp.server",
            capability.role = tracing::field::Empty,
            capability.principal = tracing::field::Empty,
            capability.policy_version = tracing::field::Empty,
            capability.verdict = tracing::field::Empty,
            capability.audit.seq = tracing::field::Empty,
        );
        request.in_scope(|| {
            let outer: Outcome<u8, String> = dispatch.call(
                &monitor("s-outer"),
                Caller::new("watcher"),
                &list_pods(),
                &json!({}),
                || {
                    // Inside the outer tool: a mutating call under another role, refused.
                    let intruder = capability::authz::ToolContext::new(
                        "intruder",
                        "s-inner",
                        capability::authz::Ceiling::ReadOnly,
                    );
                    let inner: Outcome<u8, String> = dispatch.call(
                        &intruder,
                        Caller::new("inner"),
                        &restart_pod(),
                        &json!({}),
                        || Ok(2),
                    );
                    assert!(matches!(inner, Outcome::Denied(_)), "{inner:?}");
                    Ok(1)
                },
            );
            assert!(outer.is_done());
        });
    });
    let all = spans.spans.lock().expect("lock").clone();
    let request = all.iter().find(|s| s.name == "mcp.server").expect("a span");
    let calls: Vec<&SpanData> = all.iter().filter(|s| s.name == "execute_tool").collect();
    assert_eq!(calls.len(), 2, "{all:?}");
    // Records: the outer intent (1), the inner refusal (2), the outer outcome (3).
    let records = sink.records();
    assert_eq!(
        records
            .iter()
            .map(|r| (r.seq, r.role.as_str(), r.tool.as_str()))
            .collect::<Vec<_>>(),
        [
            (1, "monitor", "list_pods"),
            (2, "intruder", "restart_pod"),
            (3, "monitor", "list_pods")
        ]
    );
    for (span, role, verdict, seq) in [
        (request, "monitor", "allowed", "3"),
        (calls[0], "monitor", "allowed", "3"),
        (calls[1], "intruder", "denied", "2"),
    ] {
        assert_eq!(field(span, "capability.role"), Some(role), "{span:?}");
        assert_eq!(field(span, "capability.verdict"), Some(verdict), "{span:?}");
        assert_eq!(field(span, "capability.audit.seq"), Some(seq), "{span:?}");
    }
}
