//! The agent loop of ADR-105 over the fleet's Kubernetes tools, with a scripted model (no
//! network): `alert → agent loop → model tool_use → MCP tool_result → final decision`.
//!
//! 1. A normal run: the monitor role is shown only the read-only tools, calls one, gets its
//!    result and answers.
//! 2. A forbidden call: the model asks for `restart_pod`, which it was never shown. The call is
//!    not run, recorded as a denial, and (the session's budget tolerating no denial) the loop
//!    degrades: the caller falls back to its existing path.
//! 3. A degrade at `max_iterations`: the model never stops calling tools.
//! 4. A shadow run: read-only tools only; the result is attached to the primary decision as
//!    metadata, with its confidence delta clamped to [-0.15, 0]. An operator role cannot start
//!    one.
//!
//! 5. The ghost-loop guards: the same alert delivered twice is answered the second time from
//!    the stable cache (no model turn, no tool call), and a second replica that receives it
//!    while the first still runs does not start a loop of its own (the incident's lease). Here
//!    both replicas share in-memory stores; across processes they share
//!    `capability_store::Store::leases()` and `loop_cache()` (SQLite, PostgreSQL).
//!
//! Every tool call leaves one audit record with the role; they are printed at the end.
//!
//! ```text
//! cargo run --example agent_loop
//! ```

use std::collections::VecDeque;
use std::process::ExitCode;
use std::sync::Arc;

use capability::audit::{AuditedDispatch, Budget, Caller, DigestKey, MemorySink};
use capability::authz::{Policy, ToolContext};
use capability::mcp::McpManifest;
use capability::{CapabilityManifest, Server};
use capability_agent::driver::{AgentLoop, LoopOutcome, ToolSource};
use capability_agent::guard::{Guarded, LoopGuard, MemoryCache, MemoryLeases};
use capability_agent::shadow::run_shadow;
use capability_agent::{
    Arguments, Message, Model, ModelError, ModelErrorKind, ToolCall, ToolSpec, Turn,
};
use serde_json::{Map, Value, json};

/// A model that plays back a script, and says which tools it was shown.
struct Scripted {
    script: VecDeque<Turn>,
    repeat: Option<Turn>,
}

impl Scripted {
    fn new(script: impl IntoIterator<Item = Turn>) -> Self {
        Scripted {
            script: script.into_iter().collect(),
            repeat: None,
        }
    }

    fn forever(turn: Turn) -> Self {
        Scripted {
            script: VecDeque::new(),
            repeat: Some(turn),
        }
    }
}

impl Model for Scripted {
    fn provider(&self) -> &str {
        "scripted"
    }

    fn supports_tools(&self) -> bool {
        true
    }

    fn turn(&mut self, _: &[Message], tools: &[ToolSpec]) -> Result<Turn, ModelError> {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        println!("    model turn, shown: {}", names.join(", "));
        self.script
            .pop_front()
            .or_else(|| self.repeat.clone())
            .ok_or_else(|| ModelError::new(ModelErrorKind::Transport, "the script is over"))
    }
}

fn call(id: &str, name: &str, arguments: Value) -> Turn {
    Turn {
        text: None,
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: Arguments::Json(arguments),
        }],
    }
}

fn answer(text: &str) -> Turn {
    Turn {
        text: Some(text.into()),
        tool_calls: Vec::new(),
    }
}

/// The fleet's Kubernetes tools (see `examples/fleet.rs`), as the `k8s` MCP server lists them.
fn k8s_tools() -> Result<Vec<Value>, capability::ManifestError> {
    let k8s = |name: &str| CapabilityManifest::builder(name).provider("k8s");
    let manifests = [
        k8s("list_pods")
            .read_only(true)
            .idempotent(true)
            .scope("k8s:read"),
        k8s("get_pod_logs").read_only(true).scope("k8s:read"),
        k8s("describe_deployment")
            .read_only(true)
            .idempotent(true)
            .scope("k8s:read"),
        k8s("restart_pod").destructive(true).scope("k8s:write"),
        k8s("scale_deployment")
            .destructive(false)
            .idempotent(true)
            .scope("k8s:write"),
        k8s("delete_pod").destructive(true).scope("k8s:delete"),
    ];
    manifests
        .into_iter()
        .map(|builder| builder.build().map(|m| m.to_mcp_tool()))
        .collect()
}

/// The tools' side of the server: canned answers.
fn execute(name: &str, arguments: &Value) -> Result<Value, String> {
    match name {
        "list_pods" => Ok(json!([
            {"name": "checkout-7d9", "phase": "Running", "restarts": 14},
            {"name": "cart-5f1", "phase": "Running", "restarts": 0},
        ])),
        "get_pod_logs" => Ok(json!(format!(
            "{}: java.lang.OutOfMemoryError: Java heap space",
            arguments["pod"].as_str().unwrap_or("?")
        ))),
        other => Err(format!("{other} is not served in this example")),
    }
}

fn report(title: &str, outcome: &LoopOutcome) {
    match outcome {
        LoopOutcome::Answer {
            text,
            iterations,
            tool_calls,
        } => println!("  => answer after {iterations} turns, {tool_calls} tool calls: {text}"),
        LoopOutcome::Degraded {
            degrade,
            iterations,
            tool_calls,
        } => println!(
            "  => DEGRADE after {iterations} turns, {tool_calls} tool calls: {degrade}\n     \
             {title}: fall back to the pre-gathered evidence, rules and playbooks"
        ),
    }
}

/// Alertmanager delivers `KubePodCrashLooping` three times: to replica A, to replica B while A
/// still runs, and to A again after it answered.
fn ghost_loop_guards(
    dispatch: &AuditedDispatch,
    source: &ToolSource<'_>,
    monitor: &ToolContext,
) -> Result<(), Box<dyn std::error::Error>> {
    let (leases, cache) = (Arc::new(MemoryLeases::new()), Arc::new(MemoryCache::new()));
    // Replicas that share a cache share its sealing key.
    let key = DigestKey::generate()?;
    let replica_a = LoopGuard::new(leases.clone(), cache.clone(), key.clone()).holder("replica-a");
    let replica_b = LoopGuard::new(leases, cache, key).holder("replica-b");
    let fingerprint = "alertname=KubePodCrashLooping,pod=checkout-7d9";
    let caller = Caller::new("watcher")
        .step("triage")
        .incident("INC-2026-0043");
    let agent = AgentLoop::new(dispatch).max_iterations(4);
    let mut turns = 0;

    let first = replica_a.run(dispatch, fingerprint, monitor, caller, || {
        let mut model = Scripted::new([
            call(
                "c1",
                "get_pod_logs",
                json!({"namespace": "prod", "pod": "checkout-7d9"}),
            ),
            answer("checkout-7d9 runs out of heap: raise its memory limit"),
        ]);
        // The same alert reaches replica B while A's loop runs.
        match replica_b.run(dispatch, fingerprint, monitor, caller, || {
            unreachable!("B does not start a second loop")
        }) {
            Ok(Guarded::InFlight { holder, .. }) => println!(
                "    replica-b: the incident's loop runs on {holder}: no loop here, fall back to \
                 the pre-gathered path"
            ),
            other => println!("    replica-b: unexpected {other:?}"),
        }
        let mut messages = vec![Message::User(
            "ALERT KubePodCrashLooping checkout-7d9".into(),
        )];
        let outcome = agent.run(&mut model, &mut messages, source, monitor, caller, &execute);
        turns += outcome.iterations();
        outcome
    })?;
    if let Guarded::Ran { outcome, calls, .. } = &first {
        report("replica-a", outcome);
        if let Some(range) = calls {
            println!(
                "    its records: #{}..=#{} of the trail",
                range.first_seq, range.last_seq
            );
        }
    }
    let repeat = replica_a.run(dispatch, fingerprint, monitor, caller, || {
        unreachable!("the repeat is answered from the cache")
    })?;
    if let Guarded::Cached(hit) = &repeat {
        println!(
            "    the repeat: answered from the cache ({} model turns in all, none for it): {}",
            turns,
            hit.answer().unwrap_or_default()
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let policy = Policy::from_toml_str(include_str!("policy.toml"))?;
    let role = |name: &str, session: &str| -> Result<ToolContext, String> {
        policy
            .context(name, session)
            .ok_or_else(|| format!("no role `{name}` in the policy"))
    };
    let server = Server::trusted("k8s");
    let tools = k8s_tools()?;
    let source = ToolSource::new(&server, &tools);
    let sink = Arc::new(MemorySink::new());
    let dispatch = AuditedDispatch::new(sink.clone()).with_budget(Budget {
        max_calls: 25,
        max_denials: 0,
    });
    let agent = AgentLoop::new(&dispatch).max_iterations(4);
    let alert = || {
        vec![Message::User(
            "ALERT KubePodCrashLooping checkout-7d9 (prod)".into(),
        )]
    };
    let caller = Caller::new("watcher")
        .step("triage")
        .incident("INC-2026-0042");

    println!("1. a normal run (role monitor)");
    let mut model = Scripted::new([
        call(
            "c1",
            "get_pod_logs",
            json!({"namespace": "prod", "pod": "checkout-7d9"}),
        ),
        answer("checkout-7d9 runs out of heap: raise its memory limit"),
    ]);
    let outcome = agent.run(
        &mut model,
        &mut alert(),
        &source,
        &role("monitor", "s-normal")?,
        caller,
        &execute,
    );
    report("normal run", &outcome);

    println!("\n2. a forbidden tool call (role monitor asks for restart_pod)");
    let mut messages = alert();
    let mut model = Scripted::new([
        call(
            "c1",
            "restart_pod",
            json!({"namespace": "prod", "pod": "checkout-7d9"}),
        ),
        answer("restarted"),
    ]);
    let outcome = agent.run(
        &mut model,
        &mut messages,
        &source,
        &role("monitor", "s-forbidden")?,
        caller,
        &execute,
    );
    if let Some(Message::Tool(result)) = messages.last() {
        println!("    the model was answered: {}", result.content);
    }
    report("forbidden call", &outcome);

    println!("\n3. a degrade at max_iterations (4)");
    let mut model = Scripted::forever(call("c", "list_pods", json!({"namespace": "prod"})));
    let outcome = agent.run(
        &mut model,
        &mut alert(),
        &source,
        &role("monitor", "s-loop")?,
        caller,
        &execute,
    );
    report("max_iterations", &outcome);

    println!("\n4. a shadow run (role auditor), attached to the primary decision");
    let mut primary = Map::new();
    primary.insert("decision".into(), json!("raise_memory_limit"));
    primary.insert("confidence".into(), json!(0.82));
    let mut model = Scripted::new([
        call("c1", "list_pods", json!({"namespace": "prod"})),
        answer(
            "```json\n{\"root_cause_check\": \"confirmed\", \"evidence_used\": [\"list_pods\"], \
             \"confidence_delta\": 0.1, \"missing_evidence\": [\"heap metrics\"], \
             \"next_step\": \"compare the heap limit with the working set\"}\n```",
        ),
    ]);
    let shadow = run_shadow(
        &agent,
        &mut model,
        &mut alert(),
        &source,
        &role("auditor", "s-shadow")?,
        Caller::new("shadow-advisor").step("shadow"),
        &execute,
    )?;
    shadow.attach(&mut primary);
    println!("  => primary decision with the shadow's metadata (its +0.1 became 0):");
    println!(
        "     {}",
        serde_json::to_string_pretty(&primary)?.replace('\n', "\n     ")
    );
    let refused = run_shadow(
        &agent,
        &mut Scripted::new([]),
        &mut alert(),
        &source,
        &role("operator", "s-shadow-2")?,
        Caller::new("shadow-advisor"),
        &execute,
    );
    if let Err(error) = refused {
        println!("  => an operator cannot run in shadow: {error}");
    }

    println!("\n5. the ghost-loop guards: one loop per incident, and a stable cache");
    ghost_loop_guards(&dispatch, &source, &role("monitor", "s-guarded")?)?;

    println!("\nthe audit trail (one record per tool call, with the role):");
    for record in sink.records() {
        println!(
            "  #{} {:<11} {:<9} {:<13} {:<8?} {}",
            record.seq,
            record.session,
            record.role,
            record.tool,
            record.verdict,
            record
                .reasons
                .iter()
                .map(|r| r.message())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(())
}
