//! Per-decision cost of our policy decision against cedar-policy, on the same 4 x 60 role x tool
//! matrix, in the same run. Each iteration decides all 240 pairs; per decision = time / 240
//! (criterion prints it as elements/s).
//!
//! Run: `cargo bench --manifest-path benches/cedar/Cargo.toml`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use capability_cedar_bench::Fixture;
use criterion::{Criterion, Throughput};

/// One contender: decides every pair of the matrix, returns how many were allowed.
type Contender<'a> = (&'static str, Box<dyn Fn() -> usize + 'a>);

fn main() {
    let fixture = Fixture::load();
    // Refuse to time contenders that do not give the same answers.
    let answers = fixture
        .check_agreement()
        .unwrap_or_else(|problems| panic!("the contenders disagree, not timing them:\n{problems}"));
    let allowed = answers.iter().filter(|a| a.decide).count();
    let pairs = fixture.pair_count();
    println!(
        "matrix: {} roles x {} tools = {pairs} pairs ({allowed} allowed, {} denied); \
         all five contenders agree on every pair",
        fixture.roles.len(),
        fixture.tools.len(),
        pairs - allowed,
    );

    let index = fixture.index();
    let index_pairs = fixture.index_pairs(&index);
    let decide_pairs = fixture.decide_pairs();
    let plain_pairs: Vec<(usize, usize)> = fixture.pairs().collect();
    let authorizer = &fixture.authorizer;

    let contenders: Vec<Contender<'_>> = vec![
        (
            "baseline/bitmask",
            Box::new(|| {
                plain_pairs
                    .iter()
                    .filter(|&&(r, t)| fixture.bitmask.is_allowed(black_box(r), black_box(t)))
                    .count()
            }),
        ),
        (
            "capability/index",
            Box::new(|| {
                index_pairs
                    .iter()
                    .filter(|&&(r, t)| index.is_allowed(black_box(r), black_box(t)))
                    .count()
            }),
        ),
        (
            "capability/decide",
            Box::new(|| {
                decide_pairs
                    .iter()
                    .filter(|&&(role, tool)| {
                        fixture
                            .policy
                            .decide(black_box(role), black_box(tool))
                            .is_allowed()
                    })
                    .count()
            }),
        ),
        (
            "cedar/data-driven",
            Box::new(|| {
                fixture
                    .requests
                    .iter()
                    .filter(|request| {
                        fixture
                            .data_driven
                            .is_allowed(authorizer, black_box(request))
                    })
                    .count()
            }),
        ),
        (
            "cedar/per-role",
            Box::new(|| {
                fixture
                    .requests
                    .iter()
                    .filter(|request| fixture.per_role.is_allowed(authorizer, black_box(request)))
                    .count()
            }),
        ),
    ];
    for (name, run) in &contenders {
        assert_eq!(
            run(),
            allowed,
            "{name} counts the allowed pairs differently"
        );
    }

    let mut criterion = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(50)
        .configure_from_args();
    {
        let mut group = criterion.benchmark_group("decision");
        group.throughput(Throughput::Elements(pairs as u64));
        for (name, run) in &contenders {
            group.bench_function(*name, |b| b.iter(run));
        }
        group.finish();
    }
    criterion.final_summary();

    let quick = std::env::args().any(|a| a == "--test" || a == "--list");
    if !quick {
        ratios(&contenders, pairs);
    }
}

/// Median nanoseconds per decision of each contender, from a short loop of our own (31
/// batches of about 20 ms each), and the ratios the issue asks about.
fn ratios(contenders: &[Contender<'_>], pairs: usize) {
    let mut medians = Vec::new();
    for (name, run) in contenders {
        // Calibrate: how many whole-matrix passes fill about 20 ms.
        let start = Instant::now();
        let mut passes = 0u64;
        while start.elapsed() < Duration::from_millis(100) {
            black_box(run());
            passes += 1;
        }
        let per_batch = (passes / 5).max(1);
        let mut samples: Vec<f64> = (0..31)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..per_batch {
                    black_box(run());
                }
                start.elapsed().as_nanos() as f64 / (per_batch as f64 * pairs as f64)
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        medians.push((*name, samples[samples.len() / 2]));
    }
    let ns = |name: &str| {
        medians
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, ns)| *ns)
            .expect("a contender")
    };
    println!("\nmedian ns per decision (own Instant loop, 31 batches):");
    for (name, median) in &medians {
        println!("  {name:<20} {median:>10.2} ns");
    }
    let (cedar_name, cedar) = ["cedar/data-driven", "cedar/per-role"]
        .into_iter()
        .map(|n| (n, ns(n)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("two Cedar forms");
    let index = ns("capability/index");
    let decide = ns("capability/decide");
    let floor = ns("baseline/bitmask");
    println!("ratios (Cedar's best form here is {cedar_name}):");
    println!("  Cedar best / capability index  = {:>8.1}x", cedar / index);
    println!(
        "  Cedar best / capability decide = {:>8.1}x",
        cedar / decide
    );
    println!(
        "  capability index / bit-mask     = {:>8.1}x",
        index / floor
    );
    println!(
        "  capability decide / index       = {:>8.1}x",
        decide / index
    );
    println!(
        "  target (index at least 200x faster than Cedar's best form): {}",
        if cedar / index >= 200.0 {
            "met"
        } else {
            "NOT met"
        }
    );
}
