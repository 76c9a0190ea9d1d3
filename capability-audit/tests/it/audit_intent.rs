//! Every call on record before it runs, tried from outside: a tool process killed with SIGKILL
//! in the middle of a call leaves its intent (and `verify` says so); a second writer of a JSON
//! Lines trail, or a trail planted as a symbolic link, is refused at open; an input nested ten
//! thousand levels deep is refused with a reason instead of overflowing the stack.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capability::audit::{
    AuditedDispatch, Caller, FlushPolicy, JsonlSink, MemorySink, Outcome, Phase, Verdict,
    verify_jsonl,
};
use capability::authz::{Ceiling, DenyReason, ToolContext};
use serde_json::{Value, json};

use crate::common;
use common::{list_pods, monitor, restart_pod};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-intent");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

const CHILD: &str = "CAPABILITY_INTENT_CHILD";

#[cfg(unix)]
#[test]
fn a_tool_killed_with_sigkill_mid_call_leaves_its_intent() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let trail = scratch("killed-mid-call.jsonl");
    let marker = trail.with_extension("acting");
    let _ = std::fs::remove_file(&marker);
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "audit_intent::mid_call_child",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD, &trail)
        .env("CAPABILITY_INTENT_MARKER", &marker)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn the tool process");
    // The tool has started acting (it wrote the marker): kill the process without warning.
    let start = Instant::now();
    while !marker.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the tool never ran"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    let report = verify_jsonl(&trail).expect("readable");
    assert!(report.is_intact(), "{report:?}");
    // The call that finished, its intent and outcome; then the intent of the one killed.
    assert_eq!(report.records, 3);
    assert_eq!(report.unfinished.len(), 1, "{:?}", report.unfinished);
    let open = &report.unfinished[0];
    assert_eq!((open.seq, open.tool.as_str()), (3, "restart_pod"));
    assert!(
        open.to_string().contains("started, no outcome recorded"),
        "{open}"
    );
}

#[cfg(unix)]
#[test]
#[ignore = "run by a_tool_killed_with_sigkill_mid_call_leaves_its_intent as a child process"]
fn mid_call_child() {
    let (Some(trail), Some(marker)) = (
        std::env::var_os(CHILD),
        std::env::var_os("CAPABILITY_INTENT_MARKER"),
    ) else {
        return;
    };
    let sink = Arc::new(JsonlSink::open(&trail, FlushPolicy::EveryRecord).expect("open"));
    let dispatch = AuditedDispatch::new(sink);
    let operator = ToolContext::new("operator", "s", Ceiling::Unrestricted)
        .with_scopes(["k8s:read", "k8s:write"]);
    let caller = Caller::new("ops-bot");
    let done: Outcome<u8, String> =
        dispatch.call(&operator, caller, &list_pods(), &json!({}), || Ok(1));
    assert!(done.is_done());
    let _: Outcome<u8, String> = dispatch.call(
        &operator,
        caller,
        &restart_pod(),
        &json!({"pod": "api-0"}),
        || {
            // The mutation happens; the process dies before the tool returns.
            std::fs::write(&marker, "acting").expect("marker");
            // Never waited out: the test has this process killed.
            std::thread::sleep(Duration::from_secs(120));
            Ok(2)
        },
    );
}

#[test]
fn a_second_writer_of_a_trail_is_refused_naming_it() {
    let trail = scratch("one-writer.jsonl");
    let first = JsonlSink::open(&trail, FlushPolicy::EveryRecord).expect("the first writer");
    let error = JsonlSink::open(&trail, FlushPolicy::EveryRecord).expect_err("a second one");
    let message = error.to_string();
    assert!(
        message.contains(&trail.display().to_string()) && message.contains("another writer"),
        "{message}"
    );
    drop(first);
    // Free again once the first writer closed. (A process spawned by another test at this
    // moment shares the lock until it execs: hence the short wait.)
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Err(error) = JsonlSink::open(&trail, FlushPolicy::EveryRecord) {
        assert!(Instant::now() < deadline, "still refused: {error}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(unix)]
#[test]
fn a_trail_planted_as_a_symbolic_link_is_refused_and_its_target_untouched() {
    let target = scratch("precious.txt");
    std::fs::write(&target, "precious\n").expect("write");
    let trail = scratch("planted.jsonl");
    std::os::unix::fs::symlink(&target, &trail).expect("symlink");
    let error = JsonlSink::open(&trail, FlushPolicy::EveryRecord).expect_err("refused");
    assert!(error.to_string().contains("symbolic link"), "{error}");
    assert_eq!(
        std::fs::read_to_string(&target).expect("read"),
        "precious\n"
    );
}

/// A value `levels` arrays deep, built without recursion.
fn deep(levels: usize) -> Value {
    let mut value = json!("bottom");
    for _ in 0..levels {
        value = Value::Array(vec![value]);
    }
    value
}

/// Takes a deep value apart level by level (serde_json drops one by recursion).
fn dismantle(mut value: Value) {
    loop {
        value = match value {
            Value::Array(mut items) => items.pop().unwrap_or(Value::Null),
            Value::Object(mut map) => map.remove("query").unwrap_or(Value::Null),
            _ => return,
        };
    }
}

#[test]
fn an_input_ten_thousand_levels_deep_is_refused_not_overflowed() {
    let sink = Arc::new(MemorySink::new());
    let dispatch = AuditedDispatch::new(sink.clone());
    // Built without `json!`, which would serialize the value by recursion.
    let query = |levels| Value::Object([("query".to_owned(), deep(levels))].into_iter().collect());
    let input = query(10_000);
    let mut ran = false;
    let out: Outcome<u8, String> = dispatch.call(
        &monitor("s"),
        Caller::new("a"),
        &list_pods(),
        &input,
        || {
            ran = true;
            Ok(1)
        },
    );
    let Outcome::Denied(denial) = out else {
        panic!("must be refused")
    };
    assert!(!ran, "the tool never saw it");
    assert!(
        matches!(&denial.reasons()[0], DenyReason::Undecidable { why } if why.contains("128 levels")),
        "{denial}"
    );
    let records = sink.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].verdict, Verdict::Denied);
    assert_eq!(records[0].input, Value::Null, "the input is not kept");
    assert_eq!(records[0].phase, None);
    // The same input at the limit runs.
    let fine = query(100);
    let out: Outcome<u8, String> =
        dispatch.call(&monitor("s"), Caller::new("a"), &list_pods(), &fine, || {
            Ok(2)
        });
    assert!(out.is_done());
    assert_eq!(sink.records()[1].phase, Some(Phase::Intent));
    dismantle(input);
    dismantle(fine);
}

#[test]
fn an_output_nested_too_deep_is_recorded_without_its_digest() {
    let sink = Arc::new(MemorySink::new());
    let dispatch = AuditedDispatch::new(sink.clone());
    let out: Outcome<Value, String> = dispatch.call(
        &monitor("s"),
        Caller::new("a"),
        &list_pods(),
        &json!({}),
        || Ok(deep(10_000)),
    );
    let Outcome::Done(output) = out else {
        panic!("the tool ran")
    };
    dismantle(output);
    let outcome = &sink.records()[1];
    assert_eq!(outcome.success, Some(true));
    assert_eq!(outcome.output_digest, None);
    assert!(
        outcome.reasons[0]
            .message()
            .contains("the output is not digested"),
        "{:?}",
        outcome.reasons
    );
}

/// `start` and `Started`: the intent before the call runs, the outcome where the result is
/// heard (another thread), the same as `call` would write it; dropped unfinished, cancelled.
#[test]
fn a_call_started_here_and_finished_on_another_thread_is_recorded_as_call_records_it() {
    use capability::audit::{Request, Started};
    use capability::authz::Action;
    fn sendable<T: Send + 'static>() {}
    sendable::<Started>();

    let sink = Arc::new(MemorySink::new());
    let dispatch = Arc::new(AuditedDispatch::new(sink.clone()));
    let input = json!({"namespace": "prod"});
    let tool = list_pods();
    let request = Request::mcp("tools/call", Action::CallTool(&tool), &input);
    let Ok(started) = dispatch.start::<(), String>(&monitor("s"), Caller::new("a"), &request)
    else {
        panic!("allowed")
    };
    assert_eq!(
        sink.records().len(),
        1,
        "the intent alone, before the call runs"
    );
    assert_eq!(sink.records()[0].phase, Some(Phase::Intent));
    let out = std::thread::spawn(move || started.finish(Ok::<_, String>(json!(["api-0"]))))
        .join()
        .expect("the thread");
    assert!(matches!(out, Outcome::Done(_)));
    // The same call through `call`, for the digest its outcome would have.
    let twin: Outcome<Value, String> =
        dispatch.call(&monitor("s"), Caller::new("a"), &tool, &input, || {
            Ok(json!(["api-0"]))
        });
    assert!(twin.is_done());
    let records = sink.records();
    assert_eq!(records.len(), 4);
    let (intent, outcome, twin) = (&records[0], &records[1], &records[3]);
    assert_eq!(outcome.phase, Some(Phase::Outcome));
    assert_eq!(outcome.call_id, intent.call_id);
    assert_eq!(outcome.success, Some(true));
    assert!(outcome.output_digest.is_some());
    assert_eq!(outcome.output_digest, twin.output_digest);
    assert_eq!(outcome.output_size, twin.output_size);

    // Dropped before it finished: its outcome says it was cancelled.
    let Ok(started) = dispatch.start::<(), String>(&monitor("s"), Caller::new("a"), &request)
    else {
        panic!("allowed")
    };
    drop(started);
    let records = sink.records();
    let last = &records[records.len() - 1];
    assert_eq!(last.phase, Some(Phase::Outcome));
    assert_eq!(last.call_id, records[records.len() - 2].call_id);
    assert_eq!(last.success, Some(false));
    assert!(
        last.error
            .as_deref()
            .is_some_and(|e| e.contains("cancelled")),
        "{:?}",
        last.error
    );

    // A call that may not run is not started: its refusal is on record, nothing else.
    let restart = restart_pod();
    let denied = Request::mcp("tools/call", Action::CallTool(&restart), &input);
    let before = sink.records().len();
    let refused = dispatch.start::<(), String>(&monitor("s"), Caller::new("a"), &denied);
    assert!(matches!(refused, Err(Outcome::Denied(_))), "{refused:?}");
    let records = sink.records();
    assert_eq!(records.len(), before + 1);
    assert_eq!(records[before].verdict, Verdict::Denied);
    assert_eq!(records[before].phase, None);
}
