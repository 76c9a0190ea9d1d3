//! Proofs on a writer's tree of 1,000,000 records (`capability_audit::tlog`): making and
//! verifying an inclusion proof and a consistency proof, and checking a proof file whole (the
//! checkpoint's Ed25519 signature, then the inclusion). The goal: under 1 ms each.
//!
//! `cargo bench -p capability-audit --bench tlog`

use std::hint::black_box;
use std::time::Instant;

use capability::audit::tlog::{
    TlogProof, Tree, TreeHead, leaf_hash, verify_consistency, verify_inclusion,
};
use capability::gate::SecretKey;
use capability_testkit::Rng;
use criterion::{Criterion, criterion_group, criterion_main};

const LEAVES: u64 = 1_000_000;

fn leaf(i: u64) -> Vec<u8> {
    // About the size of a record's line.
    format!(
        "{{\"seq\":{},\"tool\":\"list_pods\",\"pad\":\"{}\"}}",
        i + 1,
        "x".repeat(300)
    )
    .into_bytes()
}

fn tlog(c: &mut Criterion) {
    let start = Instant::now();
    let mut tree = Tree::new();
    for i in 0..LEAVES {
        tree.push(&leaf(i));
    }
    eprintln!("tree of {LEAVES} records built in {:.2?}", start.elapsed());
    let root = tree.root(LEAVES).expect("root");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);

    c.bench_function("tlog/inclusion_proof (1M leaves)", |b| {
        b.iter(|| tree.inclusion_proof(black_box(rng.next() % LEAVES), LEAVES))
    });
    let index = 765_432;
    let proof = tree.inclusion_proof(index, LEAVES).expect("proof");
    let leaf_hash = leaf_hash(&leaf(index));
    c.bench_function("tlog/verify_inclusion (1M leaves)", |b| {
        b.iter(|| verify_inclusion(black_box(index), LEAVES, &leaf_hash, &proof, &root))
    });

    c.bench_function("tlog/consistency_proof (old random, new 1M)", |b| {
        b.iter(|| tree.consistency_proof(black_box(1 + rng.next() % (LEAVES - 1)), LEAVES))
    });
    let old = 654_321;
    let old_root = tree.root(old).expect("old root");
    let consistency = tree.consistency_proof(old, LEAVES).expect("proof");
    c.bench_function("tlog/verify_consistency (654,321 -> 1M)", |b| {
        b.iter(|| verify_consistency(black_box(old), LEAVES, &old_root, &root, &consistency))
    });

    // A proof file checked whole: parse, the checkpoint's signature, the inclusion.
    let key = SecretKey::generate().expect("key");
    let head = TreeHead {
        origin: "capability/replica-1".into(),
        size: LEAVES,
        root,
    };
    let file = TlogProof {
        extra: Some(leaf(index)),
        index,
        proof,
        checkpoint: head.sign(&key).expect("signed"),
    }
    .to_text();
    let public = key.public_key();
    c.bench_function("tlog/check proof file (parse + Ed25519 + inclusion)", |b| {
        b.iter(|| {
            let parsed = TlogProof::parse(black_box(&file)).expect("parses");
            let extra = parsed.extra.clone().unwrap_or_default();
            parsed.verify(&extra, &public)
        })
    });
}

criterion_group!(benches, tlog);
criterion_main!(benches);
