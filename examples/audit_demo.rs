//! A small fleet run through the audited dispatch: allowed calls, denied calls, a failing tool,
//! and a session that degrades. Every call leaves one hash-chained record in the store given:
//! a SQLite database (a path), PostgreSQL (`postgres://...`), or a JSON Lines file (`.jsonl`).
//!
//! The trail's digests (the database connection string, which the tool marks sensitive, and
//! every input and output digest) are HMAC-SHA-256 under a secret digest key: give a key file
//! (64 hex digits) to make them correlate across runs; without one, each run uses a random key.
//! With `--checkpoint-key` (a secret key from `capability keygen`), the writer signs
//! checkpoints, and `audit verify --key` then detects a cut-off tail or a recomputed chain.
//!
//! ```text
//! capability keygen --out audit.key
//! cargo run --example audit_demo -- state.db --checkpoint-key audit.key
//! cargo run -p capability-cli -- audit verify state.db --key audit.key.pub
//! cargo run -p capability-cli -- audit stats state.db
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use capability::audit::{
    AuditSink, AuditedDispatch, Budget, Caller, CheckpointEvery, CheckpointSigner, DigestKey,
    FlushPolicy, JsonlSink, Outcome,
};
use capability::gate::SecretKey;
use capability::{Capability, Policy};
use capability_store::{SinkOptions, TargetKind, target_kind};
use serde_json::json;

/// List the pods of a namespace.
#[derive(Capability)]
#[capability(read_only, idempotent, provider = "k8s", scopes = ["k8s:read"])]
struct ListPods;

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive, provider = "k8s", scopes = ["k8s:write"])]
struct RestartPod;

/// Delete a pod.
#[derive(Capability)]
#[capability(destructive, provider = "k8s", scopes = ["k8s:delete"])]
struct DeletePod;

/// Run an instant PromQL query.
#[derive(Capability)]
#[capability(read_only, idempotent, open_world = false, provider = "prometheus", scopes = ["metrics:read"])]
struct Query;

/// Run a `SELECT` on the read replica.
#[derive(Capability)]
#[capability(read_only, provider = "database", scopes = ["db:read"], sensitive = ["connection"])]
#[allow(dead_code)]
struct RunSelect {
    sql: String,
    connection: String,
}

const USAGE: &str = "usage: cargo run --example audit_demo -- <state.db | postgres://... | audit.jsonl> \
[<digest key file>] [--checkpoint-key <secret key file>]";

/// The command line: the store, and optionally the two keys.
struct Args {
    target: String,
    digest_key: Option<DigestKey>,
    signer: Option<Arc<dyn CheckpointSigner>>,
}

fn read(file: &str) -> Result<String, String> {
    std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))
}

fn args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut target, mut digest_key, mut signer) = (None, None, None);
    while let Some(arg) = args.next() {
        if arg == "--checkpoint-key" {
            let file = args.next().ok_or(USAGE)?;
            let key = SecretKey::from_text(&read(&file)?).map_err(|e| format!("{file}: {e}"))?;
            signer = Some(Arc::new(key) as Arc<dyn CheckpointSigner>);
        } else if target.is_none() {
            target = Some(arg);
        } else if digest_key.is_none() {
            digest_key =
                Some(DigestKey::from_hex(&read(&arg)?).map_err(|e| format!("{arg}: {e}"))?);
        } else {
            return Err(USAGE.to_owned());
        }
    }
    Ok(Args {
        target: target.ok_or(USAGE)?,
        digest_key,
        signer,
    })
}

/// The sink the target names: a JSON Lines file, or one writer of a (migrated) database.
fn sink(args: Args) -> Result<Arc<dyn AuditSink>, String> {
    let checkpoints = args
        .signer
        .map(|signer| (signer, CheckpointEvery::default()));
    if target_kind(&args.target) == TargetKind::Jsonl {
        let mut sink =
            JsonlSink::open(&args.target, FlushPolicy::EveryRecord).map_err(|e| e.to_string())?;
        // Without a key file, the sink's own random key: digests of this run only.
        if let Some(key) = args.digest_key {
            sink = sink.with_digest_key(key);
        }
        if let Some((signer, every)) = checkpoints {
            sink = sink.with_checkpoints(signer, every);
        }
        return Ok(Arc::new(sink));
    }
    let store = capability_store::open(&args.target).map_err(|e| e.to_string())?;
    store.migrate().map_err(|e| e.to_string())?;
    let mut options = SinkOptions::writer(capability_store::row::new_writer_id());
    options.digest_key = args.digest_key;
    options.checkpoints = checkpoints;
    store.audit_sink(options).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let target = args.target.clone();
    let policy_path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/policy.toml");
    let policy = match Policy::from_toml_file(policy_path) {
        Ok(policy) => policy,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let sink = match sink(args) {
        Ok(sink) => sink,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(1);
        }
    };
    let dispatch = AuditedDispatch::new(sink.clone())
        .with_budget(Budget {
            max_calls: 10,
            max_denials: 1,
        })
        .with_policy_version(policy.version().unwrap_or("unversioned"));

    let Some(operator) = policy.context("operator", "incident-4711/operator") else {
        eprintln!("examples/policy.toml has no operator role");
        return ExitCode::from(2);
    };
    let Some(monitor) = policy.context("monitor", "incident-4711/monitor") else {
        eprintln!("examples/policy.toml has no monitor role");
        return ExitCode::from(2);
    };
    let Some(analyst) = policy.context("analyst", "incident-4711/analyst") else {
        eprintln!("examples/policy.toml has no analyst role");
        return ExitCode::from(2);
    };
    let ops = Caller::new("ops-bot")
        .step("remediate")
        .incident("INC-2026-0042");
    let watcher = Caller::new("watcher")
        .step("triage")
        .incident("INC-2026-0042");
    let analyst_caller = Caller::new("analyst")
        .step("root-cause")
        .incident("INC-2026-0042");

    let mut lines = Vec::new();
    let mut show =
        |who: &str, tool: &str, text: String| lines.push(format!("{who:<9} {tool:<12} {text}"));
    let describe = |out: Outcome<serde_json::Value, String>| match out {
        Outcome::Done(value) => format!("ran: {value}"),
        Outcome::Failed(error) => format!("failed: {error}"),
        Outcome::Denied(denial) => format!("denied: {denial}"),
        Outcome::Degrade(reason) => format!("degrade: {reason}"),
        Outcome::AuditFailed(error) => format!("not run, audit failed: {error}"),
    };

    // The monitor reads, then tries to restart a pod (denied) and to delete one (denied again:
    // over its budget of one denial, so its loop degrades and stays degraded).
    show(
        "monitor",
        "list_pods",
        describe(dispatch.call_tool::<ListPods, _, _>(
            &monitor,
            watcher,
            &json!({"namespace": "checkout"}),
            || Ok(json!(["api-0", "api-1", "api-2"])),
        )),
    );
    show(
        "monitor",
        "query",
        describe(dispatch.call_tool::<Query, _, _>(
            &monitor,
            watcher,
            &json!({"query": "rate(http_errors_total[5m])"}),
            || Ok(json!(0.42)),
        )),
    );
    show(
        "monitor",
        "restart_pod",
        describe(dispatch.call_tool::<RestartPod, _, _>(
            &monitor,
            watcher,
            &json!({"pod": "api-1"}),
            || Ok(json!("restarted")),
        )),
    );
    show(
        "monitor",
        "delete_pod",
        describe(dispatch.call_tool::<DeletePod, _, _>(
            &monitor,
            watcher,
            &json!({"pod": "api-1"}),
            || Ok(json!("deleted")),
        )),
    );
    show(
        "monitor",
        "list_pods",
        describe(dispatch.call_tool::<ListPods, _, _>(
            &monitor,
            watcher,
            &json!({"namespace": "checkout"}),
            || Ok(json!([])),
        )),
    );

    // The analyst queries the database (its connection string is stored as a keyed digest);
    // one query fails.
    show("analyst", "run_select", describe(dispatch.call_tool::<RunSelect, _, _>(&analyst, analyst_caller, &json!({"sql": "SELECT count(*) FROM orders WHERE status = 'failed'", "connection": "postgres://reader:s3cret@replica/shop"}), || Ok(json!(1284)))));
    show("analyst", "run_select", describe(dispatch.call_tool::<RunSelect, _, _>(&analyst, analyst_caller, &json!({"sql": "SELECT * FROM ordres", "connection": "postgres://reader:s3cret@replica/shop"}), || Err::<serde_json::Value, _>("relation \"ordres\" does not exist".to_owned()))));

    // The operator restarts the pod: allowed.
    show(
        "operator",
        "restart_pod",
        describe(dispatch.call_tool::<RestartPod, _, _>(
            &operator,
            ops,
            &json!({"pod": "api-1"}),
            || Ok(json!("restarted")),
        )),
    );

    for line in lines {
        println!("{line}");
    }
    // Shutdown: what is pending is written, and the final checkpoint signed.
    if let Err(error) = sink.close() {
        eprintln!("{error}");
        return ExitCode::from(1);
    }
    println!("\naudit trail: {target}");
    ExitCode::SUCCESS
}
