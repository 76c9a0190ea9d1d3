//! Every audit record is also a `tracing` event. In a test binary of its own: tracing caches
//! each call site's interest globally, so events from other tests' threads, hit before this
//! test's subscriber is installed, could switch the call site off for it.

use std::sync::Arc;

use capability::audit::{AuditedDispatch, Caller, MemorySink, Outcome};
use serde_json::json;

mod common;
use common::{list_pods, monitor, restart_pod};

const CALLER: Caller<'static> = Caller {
    agent: "watcher",
    step: Some("triage"),
};

#[test]
fn each_record_is_also_a_tracing_event() {
    use std::sync::Mutex;
    use tracing::field::{Field, Visit};

    /// Collects the events of `capability::audit`, field by field.
    #[derive(Default)]
    struct Collector(Mutex<Vec<Vec<(String, String)>>>);
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
            if event.metadata().target() == "capability::audit" {
                let mut fields = Fields(Vec::new());
                event.record(&mut fields);
                self.0.lock().expect("lock").push(fields.0);
            }
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

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
    let events = collector.0.lock().expect("lock").clone();
    assert_eq!(events.len(), 2, "one event per record");
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
    assert_eq!(get(&events[0], "verdict").as_deref(), Some("Allowed"));
    assert_eq!(get(&events[1], "verdict").as_deref(), Some("Degraded"));
}
