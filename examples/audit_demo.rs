//! A small fleet run through the audited dispatch: allowed calls, denied calls, a failing tool,
//! and a session that degrades. Every call leaves one hash-chained record in a JSON Lines file.
//!
//! The trail's digests (the database connection string, which the tool marks sensitive, and
//! every input and output digest) are HMAC-SHA-256 under a secret digest key: give a key file
//! (64 hex digits) to make them correlate across runs; without one, each run uses a random key.
//! Verifying the trail needs no key.
//!
//! ```text
//! openssl rand -hex 32 > digest.key
//! cargo run --example audit_demo -- audit.jsonl digest.key
//! cargo run -p capability-cli -- audit verify audit.jsonl
//! cargo run -p capability-cli -- audit stats audit.jsonl
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use capability::audit::{
    AuditedDispatch, Budget, Caller, DigestKey, FlushPolicy, JsonlSink, Outcome,
};
use capability::{Capability, Policy};
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

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: cargo run --example audit_demo -- <audit.jsonl> [<digest key file>]");
        return ExitCode::from(2);
    };
    let key = match std::env::args_os().nth(2).map(|file| {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.to_string_lossy()))?;
        DigestKey::from_hex(&text).map_err(|e| format!("{}: {e}", file.to_string_lossy()))
    }) {
        None => None,
        Some(Ok(key)) => Some(key),
        Some(Err(error)) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let policy_path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/policy.toml");
    let policy = match Policy::from_toml_file(policy_path) {
        Ok(policy) => policy,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let sink = match JsonlSink::open(&path, FlushPolicy::EveryRecord) {
        // Without a key file, the sink's own random key: digests of this run only.
        Ok(sink) => Arc::new(match key {
            Some(key) => sink.with_digest_key(key),
            None => sink,
        }),
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(1);
        }
    };
    let dispatch = AuditedDispatch::new(sink)
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
    let ops = Caller::new("ops-bot").step("remediate");
    let watcher = Caller::new("watcher").step("triage");
    let analyst_caller = Caller::new("analyst").step("root-cause");

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
    println!("\naudit trail: {}", std::path::Path::new(&path).display());
    ExitCode::SUCCESS
}
