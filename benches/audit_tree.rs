//! What the tree each writer keeps beside its records costs a record (`capability_audit::tlog`:
//! its frontier's leaf hash and merges per record, a signed tree checkpoint beside each chain
//! checkpoint): a writer signing checkpoints (every 1,000 records or 10 s) with its tree,
//! against the same writer with the chain and its checkpoints alone, on the JSON Lines sink
//! (one `write` per record) and SQLite (a durable commit per record). Rounds are interleaved
//! (each sink of a pair right after the other, the order swapped every round) and each figure
//! is the median of the rounds' means.
//!
//! The chain alone is the same sink whose writer id cannot name a log (it holds a space): it
//! keeps no tree and signs only chain checkpoints, so the two differ by the tree alone.
//!
//! `cargo bench -p capability-bench --bench audit_tree`

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capability::audit::{
    AuditRecord, AuditSink, CheckpointEvery, CheckpointSigner, FlushPolicy, JsonlSink,
};
use capability::gate::SecretKey;
use capability_store::sqlite::SqliteStore;
use capability_store::{SinkOptions, Store};
use serde_json::json;

const ROUNDS: usize = 9;

/// A sink's name, the sink with the chain alone, the same with the tree, records a round.
type Pair<'a> = (&'a str, Arc<dyn AuditSink>, Arc<dyn AuditSink>, u64);
const TREE: &str = "bench-tree";
const CHAIN: &str = "bench chain";

/// A record as the dispatcher makes a call's outcome (about 700 bytes of canonical JSON).
fn record(i: u64) -> AuditRecord {
    serde_json::from_value(json!({
        "seq": 0, "time": "2026-12-05T02:00:00.000Z", "agent": "bench", "role": "monitor",
        "session": "s-1", "step": "loop", "provider": "k8s", "tool": "list_pods",
        "call_id": format!("call-{i}"), "phase": "outcome", "method": "tools/call",
        "descriptor_hash": "ab".repeat(32), "policy_version": "v7", "verdict": "allowed",
        "reasons": [], "input": {"namespace": "checkout", "label_selector": "app=api,tier=web"},
        "input_digest": format!("hmac-sha256:{}", "cd".repeat(32)), "input_size": 52,
        "output_digest": format!("hmac-sha256:{}", "ef".repeat(32)), "output_size": 24,
        "latency_us": 120, "success": true, "error": null, "prev": "", "hash": ""
    }))
    .unwrap_or_else(|e| panic!("{e}"))
}

fn main() {
    // `cargo test --benches` runs this without `--bench`: nothing to time then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-tree-bench");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let signer: Arc<dyn CheckpointSigner> =
        Arc::new(SecretKey::generate().unwrap_or_else(|e| panic!("{e}")));
    let every = CheckpointEvery {
        records: 1_000,
        interval: Duration::from_secs(10),
    };
    let jsonl = |writer: &str, file: &str| -> Arc<dyn AuditSink> {
        Arc::new(
            JsonlSink::open(dir.join(file), FlushPolicy::EveryRecord)
                .and_then(|s| s.with_writer(writer))
                .unwrap_or_else(|e| panic!("{e}"))
                .with_checkpoints(signer.clone(), every),
        )
    };
    let store = SqliteStore::open(dir.join("state.db")).unwrap_or_else(|e| panic!("{e}"));
    store.migrate().unwrap_or_else(|e| panic!("{e}"));
    let sqlite = |writer: &str| -> Arc<dyn AuditSink> {
        let mut options = SinkOptions::writer(writer);
        options.checkpoints = Some((signer.clone(), every));
        store.audit_sink(options).unwrap_or_else(|e| panic!("{e}"))
    };
    let pairs: [Pair; 2] = [
        (
            "JSON Lines",
            jsonl(CHAIN, "chain.jsonl"),
            jsonl(TREE, "tree.jsonl"),
            20_000,
        ),
        ("SQLite", sqlite(CHAIN), sqlite(TREE), 500),
    ];
    // Mean ns per record over `n` appends (the records made before the clock starts).
    let time = |sink: &dyn AuditSink, n: u64| {
        let records: Vec<AuditRecord> = (0..n).map(record).collect();
        let start = Instant::now();
        for r in records {
            black_box(sink.append(r).unwrap_or_else(|e| panic!("{e}")));
        }
        start.elapsed().as_nanos() as f64 / n as f64
    };
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (name, chain, tree, n) in &pairs {
        // Warm up both (the file's first blocks, SQLite's pages).
        time(chain.as_ref(), n / 10);
        time(tree.as_ref(), n / 10);
        let (mut alone, mut with, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let (a, t) = if round % 2 == 0 {
                let a = time(chain.as_ref(), *n);
                (a, time(tree.as_ref(), *n))
            } else {
                let t = time(tree.as_ref(), *n);
                (time(chain.as_ref(), *n), t)
            };
            alone.push(a);
            with.push(t);
            ratios.push(t / a);
        }
        let (a, t, r) = (median(&mut alone), median(&mut with), median(&mut ratios));
        let (lo, hi) = (ratios[0], ratios[ratios.len() - 1]);
        println!(
            "audit_tree: {name}: per record, median of {ROUNDS} interleaved rounds of {n}: \
             chain alone {:.2} us | with the tree {:.2} us | {r:.3}x (rounds {lo:.3}x to \
             {hi:.3}x)",
            a / 1e3,
            t / 1e3
        );
    }
    for (_, chain, tree, _) in &pairs {
        let _ = chain.close();
        let _ = tree.close();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
