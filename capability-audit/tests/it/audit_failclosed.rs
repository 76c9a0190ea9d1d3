//! The dispatcher is fail-closed by itself, and every call it runs is on record before it runs:
//! its intent is written first, and its outcome after, even when the tool panics or the call's
//! future is dropped mid-way. A sink that fails, however it fails (down for a while, every
//! other append), can refuse calls but never let one run without its intent in the trail.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use capability::audit::{
    AuditError, AuditRecord, AuditSink, AuditedDispatch, Caller, DigestKey, MemorySink,
    OnAuditFailure, Outcome, Phase, Verdict,
};
use serde_json::json;

use crate::common;
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
    // No first-call gap: the intent cannot be written, so no call runs.
    for _ in 0..3 {
        let Outcome::AuditFailed(error) = call() else {
            panic!("a call ran while its intent could not be written")
        };
        assert!(error.to_string().contains("connection refused"), "{error}");
    }
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "the tool ran without a record"
    );
    assert_eq!(dispatch.lost_records(), 0);
    assert_eq!(dispatch.kept_records(), 3, "the refusals' records, kept");

    // The sink is back: the records kept are written first, then the call's intent, and it
    // runs.
    sink.down.store(false, Ordering::SeqCst);
    assert!(call().is_done());
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(dispatch.kept_records(), 0);
    let records = sink.inner.records();
    let verdicts: Vec<Verdict> = records.iter().map(|r| r.verdict).collect();
    assert_eq!(
        verdicts,
        [
            Verdict::AuditFailed,
            Verdict::AuditFailed,
            Verdict::AuditFailed,
            Verdict::Allowed,
            Verdict::Allowed
        ]
    );
    common::intents_have_outcomes(&records);
}

/// A sink of someone else's that fails every other append, whatever is appended, until it is
/// mended.
struct Flapping {
    appends: AtomicUsize,
    mended: AtomicBool,
    inner: MemorySink,
    key: DigestKey,
}

impl AuditSink for Flapping {
    fn append(&self, record: AuditRecord) -> Result<AuditRecord, AuditError> {
        if !self.mended.load(Ordering::SeqCst)
            && self.appends.fetch_add(1, Ordering::SeqCst) % 2 == 1
        {
            return Err(AuditError::Store {
                store: "flapping".into(),
                message: "every other append fails".into(),
            });
        }
        self.inner.append(record)
    }

    fn digest_key(&self) -> Result<&DigestKey, AuditError> {
        Ok(&self.key)
    }
}

#[test]
fn a_sink_failing_every_other_append_never_lets_a_call_run_unrecorded() {
    let sink = Arc::new(Flapping {
        appends: AtomicUsize::new(0),
        mended: AtomicBool::new(false),
        inner: MemorySink::new(),
        key: DigestKey::generate().expect("randomness"),
    });
    let dispatch = AuditedDispatch::new(sink.clone()).with_budget(capability::audit::Budget {
        max_calls: 1_000,
        max_denials: 1_000,
    });
    let ctx = monitor("s");
    let (ran, unrecorded) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let mut outcomes = [0usize; 2];
    for i in 0..200u32 {
        let out: Outcome<u32, String> =
            dispatch.call(&ctx, caller(), &list_pods(), &json!({ "i": i }), || {
                ran.fetch_add(1, Ordering::SeqCst);
                // At this moment the trail must already hold this call's intent.
                let records = sink.inner.records();
                let intent = records.iter().rev().find(|r| r.input == json!({ "i": i }));
                if intent.is_none_or(|r| r.phase != Some(Phase::Intent)) {
                    unrecorded.fetch_add(1, Ordering::SeqCst);
                }
                Ok(i)
            });
        outcomes[usize::from(!out.is_done())] += 1;
    }
    assert_eq!(
        unrecorded.load(Ordering::SeqCst),
        0,
        "a call ran before its intent"
    );
    let ran = ran.load(Ordering::SeqCst);
    assert!(
        ran > 0 && outcomes[1] > 0,
        "{outcomes:?}: some ran, some were refused"
    );
    assert_eq!(ran, outcomes[0]);
    // Every call that ran has its intent and, once the kept records are written, its outcome.
    sink.mended.store(true, Ordering::SeqCst);
    let last: Outcome<u32, String> =
        dispatch.call(&ctx, caller(), &list_pods(), &json!("last"), || Ok(0));
    assert!(last.is_done());
    assert_eq!(dispatch.kept_records(), 0);
    let records = sink.inner.records();
    let intents = records
        .iter()
        .filter(|r| r.phase == Some(Phase::Intent))
        .count();
    let outcomes = records
        .iter()
        .filter(|r| r.phase == Some(Phase::Outcome))
        .count();
    assert!(
        intents >= ran && intents == outcomes,
        "{intents} intents, {outcomes} outcomes"
    );
    common::intents_have_outcomes(&records);
    assert!(
        capability::audit::verify_chains(&records, &[], None).is_intact(),
        "the chain holds whatever failed"
    );
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
    assert_eq!(
        dispatch.lost_records(),
        6,
        "an intent and an outcome per call"
    );
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
    assert_eq!(records.len(), 2, "{records:?}");
    common::intents_have_outcomes(&records);
    let record = &records[1];
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
        let records = sink.records();
        assert_eq!(records.len(), 1, "only the intent: the call is on");
        assert_eq!(records[0].phase, Some(Phase::Intent));
    } // dropped here
    let records = sink.records();
    assert_eq!(records.len(), 2, "{records:?}");
    common::intents_have_outcomes(&records);
    let record = &records[1];
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
    assert_eq!(records.len(), 2);
    common::intents_have_outcomes(&records);
    assert_eq!(records[1].success, Some(true));
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
        let said = error.to_string();
        assert!(
            said.starts_with("the call cannot be recorded: the incident id ") && said.contains(why),
            "{said}"
        );
    }
    assert_eq!(ran.load(Ordering::SeqCst), 2, "a refused call does not run");

    let records = common::calls(sink.records());
    assert_eq!(records.len(), 5);
    assert_eq!(records[0].incident_id.as_deref(), Some("INC-2026-0042"));
    assert_eq!(records[0].step.as_deref(), Some("triage"));
    assert_eq!(records[1].incident_id.as_deref(), Some(longest.as_str()));
    for record in &records[2..] {
        assert_eq!(record.verdict, Verdict::AuditFailed);
        assert_eq!(record.incident_id, None, "never stored cut short");
        assert!(
            record.reasons[0].message().contains("incident id"),
            "{:?}",
            record.reasons
        );
    }
    // Refused calls are not counted against the session's budget, nor do they stop the next.
    assert!(!dispatch.is_degraded("s"));
    assert!(call(caller()).is_done());
}
