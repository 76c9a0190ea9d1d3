//! The dispatcher is fail-closed by itself, and every call it runs leaves a record: a sink that
//! cannot write stops calls whatever its `ready()` says; a tool that panics, or a call whose
//! future is dropped mid-way, still leaves its record.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use capability::audit::{
    AuditError, AuditRecord, AuditSink, AuditedDispatch, Caller, DigestKey, MemorySink,
    OnAuditFailure, Outcome, Verdict,
};
use serde_json::json;

mod common;
use common::{list_pods, monitor};

fn caller() -> Caller<'static> {
    Caller::new("watcher").step("triage")
}

/// A sink of someone else's: it keeps the default `ready()` (always ready) and its `append` fails
/// while `down` is set.
struct Flaky {
    down: AtomicBool,
    inner: MemorySink,
    key: DigestKey,
}

impl Flaky {
    fn new() -> Flaky {
        Flaky {
            down: AtomicBool::new(false),
            inner: MemorySink::new(),
            key: DigestKey::generate().expect("randomness"),
        }
    }
}

impl AuditSink for Flaky {
    fn append(&self, record: AuditRecord) -> Result<AuditRecord, AuditError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(AuditError::Store {
                store: "flaky".into(),
                message: "connection refused".into(),
            });
        }
        self.inner.append(record)
    }

    fn digest_key(&self) -> Result<&DigestKey, AuditError> {
        Ok(&self.key)
    }
}

#[test]
fn a_custom_sink_with_the_default_ready_does_not_make_the_dispatcher_fail_open() {
    let sink = Arc::new(Flaky::new());
    let dispatch = AuditedDispatch::new(sink.clone());
    let ctx = monitor("s");
    let ran = AtomicUsize::new(0);
    let call = || -> Outcome<u8, String> {
        dispatch.call(&ctx, caller(), &list_pods(), &json!({}), || {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok(1)
        })
    };
    sink.down.store(true, Ordering::SeqCst);
    // The first call ran before anything failed: its record is the failed append.
    assert!(call().is_done());
    for _ in 0..3 {
        let Outcome::AuditFailed(error) = call() else {
            panic!("a call ran while its record could not be written")
        };
        assert!(error.to_string().contains("connection refused"), "{error}");
    }
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the tool ran without a record"
    );
    assert_eq!(dispatch.lost_records(), 0);

    // The sink is back: the first call is still refused, but its (denial) record is written,
    // which shows that records can be written again; the next call runs.
    sink.down.store(false, Ordering::SeqCst);
    assert!(matches!(call(), Outcome::AuditFailed(_)));
    assert!(call().is_done());
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    let verdicts: Vec<Verdict> = sink.inner.records().iter().map(|r| r.verdict).collect();
    assert_eq!(verdicts, [Verdict::AuditFailed, Verdict::Allowed]);
}

#[test]
fn allow_and_count_still_runs_and_counts_with_a_custom_sink() {
    let sink = Arc::new(Flaky::new());
    sink.down.store(true, Ordering::SeqCst);
    let dispatch =
        AuditedDispatch::new(sink.clone()).on_audit_failure(OnAuditFailure::AllowAndCount);
    for _ in 0..3 {
        let out: Outcome<u8, String> =
            dispatch.call(&monitor("s"), caller(), &list_pods(), &json!({}), || Ok(1));
        assert!(out.is_done());
    }
    assert_eq!(dispatch.lost_records(), 3);
}

#[test]
fn a_tool_that_panics_after_acting_leaves_a_record_and_the_panic_goes_on() {
    let sink = Arc::new(MemorySink::new());
    let dispatch = AuditedDispatch::new(sink.clone());
    let acted = AtomicBool::new(false);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _: Outcome<u8, String> = dispatch.call(
            &monitor("s"),
            caller(),
            &list_pods(),
            &json!({"ns": "prod"}),
            || {
                acted.store(true, Ordering::SeqCst);
                panic!("the tool blew up after acting")
            },
        );
    }));
    let payload = caught.expect_err("the panic reaches the caller");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("the tool blew up after acting"),
        "the panic is the tool's own, unchanged"
    );
    assert!(acted.load(Ordering::SeqCst));
    let records = sink.records();
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record.verdict, Verdict::Allowed);
    assert_eq!(record.success, Some(false));
    assert!(record.latency_us.is_some());
    let error = record.error.as_deref().expect("an error");
    assert!(error.contains("panicked"), "{error}");
    assert_eq!(record.output_digest, None);
}

#[test]
fn a_call_async_future_dropped_mid_call_leaves_a_record() {
    let sink = Arc::new(MemorySink::new());
    let dispatch = AuditedDispatch::new(sink.clone());
    let acted = AtomicBool::new(false);
    let ctx = monitor("s");
    let tool = list_pods();
    let input = json!({});
    {
        let call = dispatch.call_async(&ctx, caller(), &tool, &input, async {
            acted.store(true, Ordering::SeqCst);
            // Acted, and now waits for something that never comes.
            std::future::pending::<()>().await;
            Ok::<u8, String>(1)
        });
        let mut call = pin!(call);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(call.as_mut().poll(&mut cx).is_pending());
        assert!(acted.load(Ordering::SeqCst), "the tool is mid-call");
        assert!(sink.records().is_empty(), "no record yet: the call is on");
    } // dropped here
    let records = sink.records();
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record.verdict, Verdict::Allowed);
    assert_eq!(record.success, Some(false));
    assert!(record.latency_us.is_some());
    let error = record.error.as_deref().expect("an error");
    assert!(error.contains("cancelled"), "{error}");
}

#[test]
fn a_call_async_that_completes_leaves_exactly_one_record() {
    let sink = Arc::new(MemorySink::new());
    let dispatch = AuditedDispatch::new(sink.clone());
    let ctx = monitor("s");
    let tool = list_pods();
    let input = json!({});
    let call = dispatch.call_async(&ctx, caller(), &tool, &input, async { Ok::<u8, String>(7) });
    let mut call = pin!(call);
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(out) = call.as_mut().poll(&mut cx) else {
        panic!("ready at once")
    };
    assert!(matches!(out, Outcome::Done(7)));
    let records = sink.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].success, Some(true));
}

#[test]
fn the_incident_is_recorded_and_an_id_too_long_to_store_is_refused() {
    use capability::audit::MAX_INCIDENT_ID_CHARS;
    let sink = Arc::new(MemorySink::new());
    let dispatch = AuditedDispatch::new(sink.clone());
    let ran = AtomicUsize::new(0);
    let call = |caller: Caller<'_>| -> Outcome<u8, String> {
        dispatch.call(&monitor("s"), caller, &list_pods(), &json!({}), || {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok(1)
        })
    };
    assert!(call(caller().incident("INC-2026-0042")).is_done());
    // Exactly 64 characters (not bytes: `é` is two bytes) fit.
    let longest = "é".repeat(MAX_INCIDENT_ID_CHARS);
    assert!(call(caller().incident(&longest)).is_done());
    assert_eq!(ran.load(Ordering::SeqCst), 2);

    let too_long = "I".repeat(MAX_INCIDENT_ID_CHARS + 1);
    for (incident, why) in [
        (too_long.as_str(), "65 characters long"),
        ("", "empty"),
        ("INC-1\nverdict: allowed", "control character"),
    ] {
        let Outcome::AuditFailed(error) = call(caller().incident(incident)) else {
            panic!("{incident:?} must be refused")
        };
        assert!(error.to_string().contains(why), "{error}");
    }
    assert_eq!(ran.load(Ordering::SeqCst), 2, "a refused call does not run");

    let records = sink.records();
    assert_eq!(records.len(), 5);
    assert_eq!(records[0].incident_id.as_deref(), Some("INC-2026-0042"));
    assert_eq!(records[0].step.as_deref(), Some("triage"));
    assert_eq!(records[1].incident_id.as_deref(), Some(longest.as_str()));
    for record in &records[2..] {
        assert_eq!(record.verdict, Verdict::AuditFailed);
        assert_eq!(record.incident_id, None, "never stored cut short");
        assert!(
            record.reasons[0].contains("incident id"),
            "{:?}",
            record.reasons
        );
    }
    // Refused calls are not counted against the session's budget, nor do they stop the next.
    assert!(!dispatch.is_degraded("s"));
    assert!(call(caller()).is_done());
}
