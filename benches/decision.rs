//! The decision on every tool call: `Policy::decide` (uncompiled) and `PolicyIndex::is_allowed`
//! (compiled), on a 60-tool x 4-role matrix, against a hand-written bit-mask check on the same
//! data as the floor. (The comparison with Cedar is in `benches/cedar/`.)
//!
//! Run: `cargo bench -p capability-bench --bench decision`

use std::hint::black_box;
use std::time::{Duration, Instant};

use capability::authz::{DenyReason, Effect, PolicyIndex, RoleId};
use capability::{CapabilityManifest, Policy};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod common;

/// The floor: what a hand-written check on precomputed masks costs.
struct Bitmask {
    role_effects: Vec<u8>,
    role_closed: Vec<bool>,
    role_scopes: Vec<u64>,
    role_admits: Vec<u64>,
    tool_effect: Vec<u8>,
    tool_open: Vec<bool>,
    tool_scopes: Vec<u64>,
}

impl Bitmask {
    fn new(
        policy: &Policy,
        index: &PolicyIndex<'_>,
        names: &[&str],
        roles: &[RoleId],
        tools: &[CapabilityManifest],
    ) -> Self {
        let mut scopes: Vec<&str> = tools
            .iter()
            .flat_map(|t| t.required_scopes())
            .map(String::as_str)
            .collect();
        scopes.sort_unstable();
        scopes.dedup();
        assert!(scopes.len() <= 64, "the baseline holds scopes in one word");
        let mask = |list: &[String]| {
            list.iter()
                .filter_map(|s| scopes.binary_search(&s.as_str()).ok())
                .fold(0u64, |m, i| m | 1 << i)
        };
        let effect_bit = |e: Effect| match e {
            Effect::Read => 1u8,
            Effect::Write => 2,
            Effect::DestructiveWrite => 4,
        };
        let mut b = Bitmask {
            role_effects: Vec::new(),
            role_closed: Vec::new(),
            role_scopes: Vec::new(),
            role_admits: Vec::new(),
            tool_effect: Vec::new(),
            tool_open: Vec::new(),
            tool_scopes: Vec::new(),
        };
        for tool in tools {
            let m = policy.effective_manifest(tool);
            b.tool_effect
                .push(effect_bit(Effect::of(m.read_only(), m.destructive())));
            b.tool_open.push(m.open_world());
            b.tool_scopes.push(mask(m.required_scopes()));
        }
        for (name, role) in names.iter().zip(roles) {
            let ctx = policy.context(name, "bench").expect("role exists");
            let effects = [Effect::Read, Effect::Write, Effect::DestructiveWrite]
                .into_iter()
                .filter(|e| ctx.ceiling().permits(*e))
                .fold(0u8, |m, e| m | effect_bit(e));
            b.role_effects.push(effects);
            // No role of the example policy is closed-world only.
            b.role_closed.push(false);
            b.role_scopes.push(mask(ctx.scopes()));
            // Patterns, resolved up front, as a policy engine with a pattern index would.
            let admits = (0..tools.len())
                .filter(|&t| {
                    !index.decide(*role, t).reasons().iter().any(|r| {
                        matches!(
                            r,
                            DenyReason::NotAllowed | DenyReason::DeniedByPattern { .. }
                        )
                    })
                })
                .fold(0u64, |m, t| m | 1 << t);
            b.role_admits.push(admits);
        }
        b
    }

    #[inline]
    fn allowed(&self, role: usize, tool: usize) -> bool {
        self.role_admits[role] >> tool & 1 == 1
            && self.role_effects[role] & self.tool_effect[tool] != 0
            && !(self.role_closed[role] && self.tool_open[tool])
            && self.tool_scopes[tool] & !self.role_scopes[role] == 0
    }
}

fn median_ns_per_decision(pairs: usize, mut run: impl FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..41)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..200 {
                run();
            }
            start.elapsed().as_nanos() as f64 / (200 * pairs) as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn decision(c: &mut Criterion) {
    let policy = common::example_policy();
    let tools = common::tools(60);
    let role_names: Vec<&str> = policy.roles().collect();
    let index = policy.index(&tools);
    let roles: Vec<RoleId> = role_names
        .iter()
        .map(|r| index.role(r).expect("role exists"))
        .collect();
    let floor = Bitmask::new(&policy, &index, &role_names, &roles, &tools);
    let pairs = roles.len() * tools.len();

    // Refuse to time contenders that disagree.
    let mut allowed = 0;
    for (r, &role) in roles.iter().enumerate() {
        for (t, tool) in tools.iter().enumerate() {
            let reference = policy.decide(role_names[r], tool).is_allowed();
            assert_eq!(index.is_allowed(role, t), reference);
            assert_eq!(floor.allowed(r, t), reference);
            allowed += usize::from(reference);
        }
    }
    assert!(
        allowed > 0 && allowed < pairs,
        "a matrix of one answer measures nothing"
    );

    let mut group = c.benchmark_group("decision/60x4");
    group.throughput(Throughput::Elements(pairs as u64));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("baseline/bitmask", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for r in 0..roles.len() {
                for t in 0..tools.len() {
                    n += usize::from(floor.allowed(black_box(r), black_box(t)));
                }
            }
            n
        })
    });
    group.bench_function("capability/index", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for &role in &roles {
                for t in 0..tools.len() {
                    n += usize::from(index.is_allowed(black_box(role), black_box(t)));
                }
            }
            n
        })
    });
    group.bench_function("capability/decide", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for role in &role_names {
                for tool in &tools {
                    n += usize::from(policy.decide(black_box(role), black_box(tool)).is_allowed());
                }
            }
            n
        })
    });
    group.finish();

    // Ratios measured in this same run, per decision.
    let floor_ns = median_ns_per_decision(pairs, || {
        for r in 0..roles.len() {
            for t in 0..tools.len() {
                black_box(floor.allowed(black_box(r), black_box(t)));
            }
        }
    });
    let index_ns = median_ns_per_decision(pairs, || {
        for &role in &roles {
            for t in 0..tools.len() {
                black_box(index.is_allowed(black_box(role), black_box(t)));
            }
        }
    });
    let decide_ns = median_ns_per_decision(pairs, || {
        for role in &role_names {
            for tool in &tools {
                black_box(policy.decide(black_box(role), black_box(tool)));
            }
        }
    });
    println!(
        "per decision (median): bitmask {floor_ns:.2} ns, index {index_ns:.2} ns ({:.1}x the \
         floor), decide {decide_ns:.1} ns ({:.1}x the floor)",
        index_ns / floor_ns,
        decide_ns / floor_ns
    );
}

criterion_group!(benches, decision);
criterion_main!(benches);
