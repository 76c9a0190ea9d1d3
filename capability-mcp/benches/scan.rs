//! The scan of tool descriptors against parsing them: 1,000 MCP tool objects (the reference
//! servers' recorded tool lists, cycled and renamed, with the ten poisoned descriptors of the
//! scan's corpus among them), parsed from one JSON text with `serde_json::from_str`, and
//! scanned (`ToolScan::of` on each, then `scan_fleet` with the fleet's rules too), in one run.
//! The goal was a scan at most a tenth of parsing. It is not met, and cannot be by a scan of
//! the parsed values: visiting every string once, doing nothing with it, is itself about a tenth
//! of parsing (measured here as a third baseline). Measured (2026-12-05): parse 2.09-2.14 ms,
//! visit 0.23 ms, the per-tool scan 2.18-2.25 ms (about 1.05 times parsing; 1.35 times before
//! that day's changes), `scan_fleet` 3.43-3.46 ms (about 1.6 times); see `docs/scan.md`.
//!
//! `cargo bench -p capability-mcp --bench scan`

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use capability_mcp::scan::{ToolScan, scan_fleet};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value;

/// How many descriptors.
const COUNT: usize = 1000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: PathBuf) -> Value {
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// 1,000 descriptors as one JSON array: honest ones cycled (each renamed, so no two are the
/// same), one poisoned descriptor of the corpus in every hundred.
fn descriptors() -> String {
    let honest: Vec<Value> = ["everything", "filesystem", "memory", "git", "time"]
        .iter()
        .flat_map(|server| {
            let list = read(root().join(format!("tests/fixtures/mcp/server-{server}.tools.json")));
            list["tools"].as_array().cloned().unwrap_or_default()
        })
        .collect();
    let mut poisoned: Vec<Value> = Vec::new();
    let dir = root().join("tests/fixtures/scan/poisoned");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    for file in files {
        let case = read(file);
        for server in case["servers"].as_array().into_iter().flatten() {
            poisoned.extend(server["tools"].as_array().into_iter().flatten().cloned());
        }
    }
    assert!(!honest.is_empty() && !poisoned.is_empty(), "the fixtures");
    let tools: Vec<Value> = (0..COUNT)
        .map(|i| {
            let mut tool = if i % 100 == 99 {
                poisoned[(i / 100) % poisoned.len()].clone()
            } else {
                honest[i % honest.len()].clone()
            };
            if let Some(name) = tool["name"].as_str() {
                tool["name"] = Value::String(format!("{name}_{i}"));
            }
            tool
        })
        .collect();
    serde_json::to_string(&tools).unwrap_or_default()
}

fn median_ns(mut run: impl FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..31)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..10 {
                run();
            }
            start.elapsed().as_nanos() as f64 / 10.0
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn parse(text: &str) -> Vec<Value> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(tools)) => tools,
        other => panic!("not an array: {other:?}"),
    }
}

/// The least any scan of the parsed descriptors costs: a visit of every string and member
/// name, reading each one's bytes once.
fn visit(value: &Value) -> usize {
    match value {
        Value::String(text) => text.bytes().map(usize::from).sum(),
        Value::Array(items) => items.iter().map(visit).sum(),
        Value::Object(members) => members
            .iter()
            .map(|(k, v)| k.bytes().map(usize::from).sum::<usize>() + visit(v))
            .sum(),
        _ => 0,
    }
}

fn scan_each(tools: &[Value]) -> usize {
    tools.iter().map(|t| ToolScan::of(t).findings().len()).sum()
}

fn scan_as_fleet(tools: &[Value]) -> usize {
    // Ten servers of a hundred tools each.
    let servers: Vec<(String, &[Value])> = tools
        .chunks(COUNT / 10)
        .enumerate()
        .map(|(i, chunk)| (format!("server{i}"), chunk))
        .collect();
    scan_fleet(servers.iter().map(|(s, t)| (s.as_str(), *t))).len()
}

fn scan(c: &mut Criterion) {
    let text = descriptors();
    let tools = parse(&text);
    let hard = tools
        .iter()
        .filter(|t| ToolScan::of(t).is_flagged())
        .count();
    println!(
        "{} descriptors, {} bytes of JSON, {hard} flagged hard",
        tools.len(),
        text.len()
    );

    let mut group = c.benchmark_group("scan/1000-descriptors");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("baseline/serde_json::from_str", |b| {
        b.iter(|| parse(black_box(&text)))
    });
    group.bench_function("baseline/visit every string", |b| {
        b.iter(|| tools.iter().map(visit).sum::<usize>())
    });
    group.bench_function("ToolScan::of each", |b| {
        b.iter(|| scan_each(black_box(&tools)))
    });
    group.bench_function("scan_fleet (ten servers)", |b| {
        b.iter(|| scan_as_fleet(black_box(&tools)))
    });
    group.finish();

    let parsing = median_ns(|| {
        black_box(parse(black_box(&text)));
    });
    let scanning = median_ns(|| {
        black_box(scan_each(black_box(&tools)));
    });
    let fleet = median_ns(|| {
        black_box(scan_as_fleet(black_box(&tools)));
    });
    let visiting = median_ns(|| {
        black_box(black_box(&tools).iter().map(visit).sum::<usize>());
    });
    let share = |ns: f64| 100.0 * ns / parsing;
    println!(
        "median: parse {:.2} ms; visit every string {:.2} ms ({:.0}% of parsing); scan {:.2} ms \
         ({:.0}%); scan_fleet {:.2} ms ({:.0}%). Goal: 10%",
        parsing / 1e6,
        visiting / 1e6,
        share(visiting),
        scanning / 1e6,
        share(scanning),
        fleet / 1e6,
        share(fleet)
    );
}

criterion_group!(benches, scan);
criterion_main!(benches);
