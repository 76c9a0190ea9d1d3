//! Filtering a server's tool list for one role before the model sees it, against parsing the
//! list's JSON, which every client does anyway. 1,000 tool descriptors of about 1.5 KiB each.
//!
//! Run with glibc's malloc thresholds fixed (see `scripts/bench.sh`): without it, glibc's
//! dynamic mmap threshold can double the JSON parse times inside criterion and skew every ratio.
//!
//! `cargo bench -p capability-bench --bench filtering`

use std::hint::black_box;
use std::time::{Duration, Instant};

use capability::Server;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value;

mod common;

const TOOLS: usize = 1000;

fn median_ms(mut run: impl FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..31)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn filtering(c: &mut Criterion) {
    let text = common::tools_list_text(TOOLS);
    let policy = common::example_policy();
    let server = Server::trusted("k8s");
    let parse = || -> Value { serde_json::from_str(&text).expect("valid JSON") };
    {
        let list = parse();
        let tools = common::manifests(&list, &server);
        assert_eq!(tools.len(), TOOLS, "every descriptor converts");
        let shown = policy.visible_tools("monitor", &tools).len();
        assert!(
            shown > 0 && shown < TOOLS,
            "the filter must keep some and drop some"
        );
        println!(
            "{TOOLS} descriptors, {} KiB of JSON, average {} bytes; the monitor sees {shown}",
            text.len() / 1024,
            text.len() / TOOLS
        );
    }

    let mut group = c.benchmark_group("filtering/1000-tools");
    group.throughput(Throughput::Elements(TOOLS as u64));
    group.measurement_time(Duration::from_secs(5));
    group.sample_size(30);
    group.bench_function("baseline/parse", |b| b.iter(|| black_box(parse())));
    group.bench_function("parse+filter", |b| {
        b.iter(|| {
            let list = parse();
            let tools = common::manifests(&list, &server);
            black_box(policy.visible_tools("monitor", &tools).len())
        })
    });
    let list = parse();
    let tools = common::manifests(&list, &server);
    group.bench_function("filter-only", |b| {
        b.iter(|| black_box(policy.visible_tools("monitor", black_box(&tools)).len()))
    });
    group.bench_function("convert-only", |b| {
        b.iter(|| black_box(common::manifests(black_box(&list), &server).len()))
    });
    group.finish();

    let parse_ms = median_ms(|| {
        black_box(parse());
    });
    let convert_ms = median_ms(|| {
        black_box(common::manifests(&list, &server));
    });
    let filter_ms = median_ms(|| {
        black_box(policy.visible_tools("monitor", &tools));
    });
    println!(
        "median: parse {parse_ms:.3} ms; on top of it: convert to manifests (with descriptor \
         hashes) {convert_ms:.3} ms ({:.1}%), decide and filter {filter_ms:.3} ms ({:.1}%)",
        100.0 * convert_ms / parse_ms,
        100.0 * filter_ms / parse_ms,
    );
}

criterion_group!(benches, filtering);
criterion_main!(benches);
