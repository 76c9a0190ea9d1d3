//! Descriptor hashing: canonicalising (RFC 8785) and hashing one typical MCP tool descriptor of
//! about 1.5 KiB, against SHA-256 of the already-canonical bytes.
//!
//! `cargo bench -p capability-bench --bench hashing`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod common;

fn median_ns(mut run: impl FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..51)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..2000 {
                run();
            }
            start.elapsed().as_nanos() as f64 / 2000.0
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn hashing(c: &mut Criterion) {
    let mut rng = common::Rng(42);
    let tool = common::mcp_tool(7, &mut rng);
    // What the hash covers, already canonical: the baseline hashes exactly these bytes.
    let mut covered = tool.clone();
    if let Some(object) = covered.as_object_mut() {
        object.retain(|k, _| capability::mcp::MCP_DESCRIPTOR_FIELDS.contains(&k.as_str()));
    }
    let canonical = capability::json::to_canonical_json(&covered);
    assert_eq!(
        capability::mcp::mcp_descriptor_hash(&tool),
        capability_rules::sha256_hex(canonical.as_bytes()),
        "the two contenders must hash the same bytes"
    );
    println!("descriptor: {} bytes canonical", canonical.len());

    let mut group = c.benchmark_group("hashing/mcp-descriptor");
    group.throughput(Throughput::Bytes(canonical.len() as u64));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("baseline/sha256-of-canonical-bytes", |b| {
        b.iter(|| capability_rules::sha256_hex(black_box(canonical.as_bytes())))
    });
    group.bench_function("canonicalise+sha256", |b| {
        b.iter(|| capability::mcp::mcp_descriptor_hash(black_box(&tool)))
    });
    group.finish();

    let base = median_ns(|| {
        black_box(capability_rules::sha256_hex(black_box(
            canonical.as_bytes(),
        )));
    });
    let full = median_ns(|| {
        black_box(capability::mcp::mcp_descriptor_hash(black_box(&tool)));
    });
    println!(
        "median: sha256 {base:.0} ns, canonicalise+sha256 {full:.0} ns: {:.2}x (target 2.5x)",
        full / base
    );
}

criterion_group!(benches, hashing);
criterion_main!(benches);
