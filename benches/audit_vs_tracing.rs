//! The per-record cost of the JSON Lines audit sink against the ecosystem's way of writing the
//! same fields to a file: one `tracing` event formatted by `tracing-subscriber`'s JSON formatter
//! into a file, measured in the same run. Both write each record to the file as it is made (one
//! `write` per record, no buffering), so both leave the same bytes on disk after a kill.
//!
//! The sink does more per record than the formatter: canonical JSON (sorted keys, RFC 8785
//! escaping), the SHA-256 hash chaining it to the previous record, and the chain's bookkeeping.
//!
//! `cargo bench -p capability-bench --bench audit_vs_tracing`

use std::fs::File;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use capability::audit::{AuditRecord, AuditSink, FlushPolicy, JsonlSink, Verdict};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;

fn record() -> AuditRecord {
    AuditRecord {
        writer: String::new(),
        seq: 0,
        time: "2026-11-30T12:00:00.000Z".to_owned(),
        agent: "watcher".to_owned(),
        call_id: Some("call_00000000000000000000001".to_owned()),
        phase: Some(capability::audit::Phase::Outcome),
        method: None,
        principal: None,
        role: "monitor".to_owned(),
        session: "incident-4711/monitor".to_owned(),
        step: Some("triage".to_owned()),
        incident_id: Some("INC-2026-0042".to_owned()),
        provider: Some("k8s".to_owned()),
        tool: "list_pods".to_owned(),
        descriptor_hash: "9f2c".repeat(16),
        policy_version: Some("2026-11-01".to_owned()),
        verdict: Verdict::Allowed,
        reasons: Vec::new(),
        input: json!({ "namespace": "checkout", "label_selector": "app=api,tier=web" }),
        input_digest: format!("hmac-sha256:{}", "ab".repeat(32)),
        input_size: 58,
        output_digest: Some(format!("hmac-sha256:{}", "cd".repeat(32))),
        output_size: Some(25),
        latency_us: Some(412),
        success: Some(true),
        error: None,
        prev: String::new(),
        hash: String::new(),
    }
}

/// The same fields as one `tracing` event.
fn emit(r: &AuditRecord) {
    tracing::info!(
        target: "audit",
        time = %r.time,
        agent = %r.agent,
        role = %r.role,
        session = %r.session,
        step = r.step.as_deref(),
        incident_id = r.incident_id.as_deref(),
        provider = r.provider.as_deref(),
        tool = %r.tool,
        descriptor_hash = %r.descriptor_hash,
        policy_version = r.policy_version.as_deref(),
        verdict = "allowed",
        reasons = ?r.reasons,
        input = %r.input,
        input_digest = %r.input_digest,
        input_size = r.input_size,
        output_digest = r.output_digest.as_deref(),
        output_size = r.output_size,
        latency_us = r.latency_us,
        success = r.success,
        "tool call"
    );
}

/// The median over 31 samples of the time per call of `run`, given a fresh input from `make`
/// each time (made outside the timed part).
fn median_ns<T>(mut make: impl FnMut() -> T, mut run: impl FnMut(T)) -> f64 {
    let mut samples: Vec<f64> = (0..31)
        .map(|_| {
            let inputs: Vec<T> = (0..500).map(|_| make()).collect();
            let start = Instant::now();
            for input in inputs {
                run(input);
            }
            start.elapsed().as_nanos() as f64 / 500.0
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn compare(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("capability-bench-vs-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let sink = JsonlSink::open(dir.join("sink.jsonl"), FlushPolicy::EveryRecord).expect("open");
    let file = File::create(dir.join("tracing.jsonl")).expect("create");
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer(Mutex::new(file))
        .with_max_level(tracing::Level::INFO)
        .finish();
    let template = record();
    // The dispatcher builds the record either way; the sink takes it by value, the event
    // borrows its fields. Building (cloning) it is not timed.
    let append = |record: AuditRecord| {
        black_box(sink.append(black_box(record)).is_ok());
    };
    let event = |record: &AuditRecord| emit(black_box(record));

    tracing::subscriber::with_default(subscriber, || {
        let mut group = c.benchmark_group("audit/jsonl-vs-tracing");
        group.measurement_time(Duration::from_secs(3));
        group.bench_function("jsonl-sink/append", |b| {
            b.iter_batched(|| template.clone(), append, BatchSize::SmallInput)
        });
        group.bench_function("tracing-subscriber/json-event", |b| {
            b.iter(|| event(&template))
        });
        group.finish();

        let sink_ns = median_ns(|| template.clone(), append);
        let event_ns = median_ns(|| (), |()| event(&template));
        println!(
            "per record (median): JSON Lines sink {sink_ns:.0} ns, tracing-subscriber JSON event \
             {event_ns:.0} ns: the sink costs {:.2}x the event",
            sink_ns / event_ns
        );
    });
    drop(sink);
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, compare);
criterion_main!(benches);
