//! Every audit record is also a `tracing` event. In a test binary of its own: tracing caches
//! each call site's interest globally, so events from other tests' threads, hit before this
//! test's subscriber is installed, could switch the call site off for it.

use std::sync::{Arc, Mutex};

use capability::Capability;
use capability::audit::{
    AuditError, AuditRecord, AuditSink, AuditedDispatch, Caller, DigestKey, FlushPolicy, JsonlSink,
    MemorySink, Outcome,
};
use capability::authz::{Ceiling, ToolContext};
use serde_json::json;
use tracing::field::{Field, Visit};

use crate::common;
use common::{list_pods, monitor, restart_pod};

const CALLER: Caller<'static> = Caller::new("watcher").step("triage");

/// Collects the events of `capability::audit` (or of every target), field by field.
#[derive(Default)]
struct Collector {
    all_targets: bool,
    events: Mutex<Vec<Vec<(String, String)>>>,
}
struct Fields(Vec<(String, String)>);
impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
}
impl tracing::Subscriber for Collector {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if self.all_targets || event.metadata().target() == "capability::audit" {
            let mut fields = Fields(Vec::new());
            event.record(&mut fields);
            self.events.lock().expect("lock").push(fields.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn each_record_is_also_a_tracing_event() {
    let collector = Arc::new(Collector::default());
    let sink = Arc::new(MemorySink::new());
    tracing::subscriber::with_default(collector.clone(), || {
        let dispatch = AuditedDispatch::new(sink.clone());
        let ctx = monitor("traced");
        let _: Outcome<u8, String> =
            dispatch.call(&ctx, CALLER, &list_pods(), &json!({}), || Ok(1));
        let _: Outcome<u8, String> =
            dispatch.call(&ctx, CALLER, &restart_pod(), &json!({}), || Ok(1));
    });
    let events = collector.events.lock().expect("lock").clone();
    assert_eq!(
        events.len(),
        3,
        "one event per record: an intent, an outcome, a refusal"
    );
    let get = |event: &[(String, String)], name: &str| {
        event
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    for name in [
        "agent",
        "role",
        "session",
        "tool",
        "descriptor_hash",
        "verdict",
        "input_digest",
    ] {
        assert!(
            get(&events[0], name).is_some(),
            "field {name} missing: {:?}",
            events[0]
        );
    }
    assert_eq!(get(&events[0], "tool").as_deref(), Some("list_pods"));
    assert_eq!(get(&events[0], "seq").as_deref(), Some("1"));
    assert_eq!(get(&events[1], "seq").as_deref(), Some("2"));
    assert_eq!(get(&events[2], "seq").as_deref(), Some("3"));
    let phase =
        |event: &[(String, String)]| get(event, "phase").map(|p| p.trim_matches('"').to_owned());
    assert_eq!(phase(&events[0]).as_deref(), Some("intent"));
    assert_eq!(phase(&events[1]).as_deref(), Some("outcome"));
    assert_eq!(get(&events[0], "call_id"), get(&events[1], "call_id"));
    assert_eq!(get(&events[0], "verdict").as_deref(), Some("Allowed"));
    assert_eq!(get(&events[2], "verdict").as_deref(), Some("Denied"));
}

/// Log in to the console.
#[derive(Capability)]
#[capability(destructive = false, provider = "console", scopes = ["console:login"])]
#[capability(sensitive = ["password"])]
#[allow(dead_code)]
struct Login {
    user: String,
    password: String,
}

/// A sink whose writes fail: its error event is traced too.
struct Failing(DigestKey);

impl AuditSink for Failing {
    fn append(&self, _: AuditRecord) -> Result<AuditRecord, AuditError> {
        Err(AuditError::Io {
            path: "trail".into(),
            message: "disk full".into(),
        })
    }

    fn digest_key(&self) -> Result<&DigestKey, AuditError> {
        Ok(&self.0)
    }
}

#[test]
fn neither_the_digest_key_nor_a_sensitive_value_is_traced() {
    const KEY_HEX: &str = "9c1e5a7b3d2f4e6a8b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a";
    const PASSWORD: &str = "hunter2";
    let key = || DigestKey::from_hex(KEY_HEX).expect("a valid key");
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit_tracing");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("keyed.jsonl");
    let _ = std::fs::remove_file(&path);

    let collector = Arc::new(Collector {
        all_targets: true,
        ..Collector::default()
    });
    tracing::subscriber::with_default(collector.clone(), || {
        let ctx =
            ToolContext::new("operator", "s", Ceiling::Unrestricted).with_scopes(["console:login"]);
        let input = json!({ "user": "ada", "password": PASSWORD });
        let sinks: [Arc<dyn AuditSink>; 3] = [
            Arc::new(MemorySink::new().with_digest_key(key())),
            Arc::new(
                JsonlSink::open(&path, FlushPolicy::EveryRecord)
                    .expect("open")
                    .with_digest_key(key()),
            ),
            Arc::new(Failing(key())),
        ];
        for sink in sinks {
            let dispatch = AuditedDispatch::new(sink);
            let _: Outcome<bool, String> =
                dispatch.call_tool::<Login, _, _>(&ctx, CALLER, &input, || Ok(true));
            // A denied call is traced too.
            let _: Outcome<bool, String> =
                dispatch.call_tool::<Login, _, _>(&monitor("m"), CALLER, &input, || Ok(true));
        }
    });
    let events = collector.events.lock().expect("lock").clone();
    // Three records from each writable sink (an intent and an outcome, a refusal), and the
    // failing sink's errors.
    let written = events
        .iter()
        .filter(|e| e.iter().any(|(k, _)| k == "input_digest"))
        .count();
    assert_eq!(written, 6, "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| e.iter().any(|(_, v)| v.contains("disk full"))),
        "{events:?}"
    );
    let traced = format!("{events:?}");
    assert!(traced.contains("hmac-sha256:"), "{traced}");
    for secret in [
        KEY_HEX,
        &KEY_HEX.to_uppercase(),
        &KEY_HEX[..8],
        &KEY_HEX[56..],
        PASSWORD,
    ] {
        assert!(!traced.contains(secret), "{secret} traced: {traced}");
    }
}
