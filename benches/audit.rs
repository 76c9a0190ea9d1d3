//! The cost of auditing a tool call: `AuditedDispatch::call` with the in-memory sink and with
//! the JSON Lines file sink (flushing every record, and every 64 records), against an unaudited
//! call that is only authorized (`ToolContext::authorize`) and run.
//!
//! `cargo bench -p capability-bench --bench audit`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capability::CapabilityManifest;
use capability::audit::{
    AuditedDispatch, Budget, Caller, FlushPolicy, JsonlSink, MemorySink, Outcome,
};
use capability::authz::{Ceiling, ToolContext};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

fn tool() -> CapabilityManifest {
    match CapabilityManifest::builder("list_pods")
        .provider("k8s")
        .read_only(true)
        .scope("k8s:read")
        .build()
    {
        Ok(tool) => tool,
        Err(error) => panic!("{error}"),
    }
}

fn unlimited(dispatch: AuditedDispatch) -> AuditedDispatch {
    dispatch.with_budget(Budget {
        max_calls: u32::MAX,
        max_denials: u32::MAX,
    })
}

fn median_ns(mut run: impl FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..31)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..500 {
                run();
            }
            start.elapsed().as_nanos() as f64 / 500.0
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn audit(c: &mut Criterion) {
    let tool = tool();
    let ctx = ToolContext::new("monitor", "bench", Ceiling::ReadOnly).with_scopes(["k8s:read"]);
    let caller = Caller::new("bench").step("loop");
    let input = json!({ "namespace": "checkout", "label_selector": "app=api,tier=web" });
    let run = || Ok::<_, String>(json!(["api-0", "api-1", "api-2"]));
    let dir = std::env::temp_dir().join(format!("capability-bench-audit-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);

    let memory = unlimited(AuditedDispatch::new(Arc::new(MemorySink::new())));
    let file_each = unlimited(AuditedDispatch::new(Arc::new(
        JsonlSink::open(dir.join("each.jsonl"), FlushPolicy::EveryRecord).expect("open"),
    )));
    let file_64 = unlimited(AuditedDispatch::new(Arc::new(
        JsonlSink::open(dir.join("every64.jsonl"), FlushPolicy::Every(64)).expect("open"),
    )));
    let unaudited = || {
        if ctx.authorize(black_box(&tool)).is_ok() {
            black_box(run()).ok();
        }
    };
    let audited = |d: &AuditedDispatch| {
        let out: Outcome<_, String> = d.call(&ctx, caller, &tool, black_box(&input), run);
        black_box(out.is_done());
    };

    let mut group = c.benchmark_group("audit/per-call");
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("baseline/authorize+run", |b| b.iter(unaudited));
    group.bench_function("memory-sink", |b| b.iter(|| audited(&memory)));
    group.bench_function("file-sink/every-record", |b| b.iter(|| audited(&file_each)));
    group.bench_function("file-sink/every-64", |b| b.iter(|| audited(&file_64)));
    group.finish();

    let base = median_ns(unaudited);
    let mem = median_ns(|| audited(&memory));
    let each = median_ns(|| audited(&file_each));
    let every = median_ns(|| audited(&file_64));
    println!(
        "per call (median): unaudited {base:.0} ns; audited: memory {mem:.0} ns ({:.1}x), file \
         flushing every record {each:.0} ns ({:.1}x), file flushing every 64 {every:.0} ns ({:.1}x)",
        mem / base,
        each / base,
        every / base
    );
    drop((memory, file_each, file_64));
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, audit);
criterion_main!(benches);
