//! Property (seeded): over random roles, servers and tool lists, the tools a model is shown are
//! exactly the role's visible set, never one more (also in the request each provider's wire
//! format would send), and no call of another tool is ever run.

use crate::loop_support;

use std::cell::RefCell;
use std::collections::BTreeSet;

use capability_agent::driver::{AgentLoop, ToolSource};
use capability_agent::{Arguments, ToolCall, Turn};
use capability_audit::{Caller, Verdict};
use capability_core::authz::{Authorize, Ceiling, Policy, ToolContext};
use capability_mcp::{Server, Visibility};
use capability_testkit::Rng;
use serde_json::{Value, json};

use loop_support::*;

const NAMES: &[&str] = &[
    "list_pods",
    "get_pod_logs",
    "restart_pod",
    "delete_pod",
    "query_metrics",
    "exec_shell",
    "read_file",
    "write_file",
];

fn random_tool(rng: &mut Rng) -> Value {
    let name = NAMES[rng.below(NAMES.len())];
    let mut annotations = serde_json::Map::new();
    for hint in [
        "readOnlyHint",
        "destructiveHint",
        "idempotentHint",
        "openWorldHint",
    ] {
        if rng.chance(60) {
            annotations.insert(hint.into(), json!(rng.chance(50)));
        }
    }
    json!({
        "name": name,
        "description": format!("{name}, variant {}", rng.below(3)),
        "inputSchema": {"type": "object"},
        "annotations": annotations,
    })
}

/// A decider: a role of the policy (or an unknown one), or a bare context.
fn random_decider(rng: &mut Rng, session: &str) -> ToolContext {
    let policy = Policy::from_toml_str(POLICY).expect("policy");
    match rng.below(5) {
        0 => policy.context("operator", session),
        1 => policy.context("monitor", session),
        2 => policy.context("logs", session),
        3 => policy.context("ghost", session),
        _ => None,
    }
    .unwrap_or_else(|| {
        let ceiling = [
            Ceiling::ReadOnly,
            Ceiling::NonDestructive,
            Ceiling::Unrestricted,
        ][rng.below(3)];
        ToolContext::new("bare", session, ceiling)
    })
}

#[test]
fn the_model_is_shown_exactly_the_visible_set_and_nothing_else_runs() {
    for seed in 1..=300u64 {
        let mut rng = Rng::seeded(seed);
        let server = if rng.chance(50) {
            Server::trusted("k8s")
        } else {
            Server::untrusted("k8s")
        };
        let tools: Vec<Value> = (0..rng.below(7)).map(|_| random_tool(&mut rng)).collect();
        let session = format!("s-{seed}");
        let decider = random_decider(&mut rng, &session);

        // What the role may see, by the one visibility function, and checked against the
        // decision itself: allowed and listed once.
        let visibility = Visibility::of(&server, &tools, None, &decider).expect("valid tools");
        let expected: BTreeSet<String> =
            visibility.visible().map(|m| m.name().to_owned()).collect();
        for manifest in visibility.visible() {
            assert!(decider.decide(manifest).is_allowed(), "seed {seed}");
            let listed = tools
                .iter()
                .filter(|t| t["name"] == manifest.name())
                .count();
            assert_eq!(listed, 1, "seed {seed}: a duplicate name is never visible");
        }

        // The model calls random tools, shown or not, over a few turns.
        let script: Vec<Turn> = (0..1 + rng.below(3))
            .map(|turn| Turn {
                text: None,
                tool_calls: (0..1 + rng.below(3))
                    .map(|i| ToolCall {
                        id: format!("t{turn}c{i}"),
                        name: NAMES[rng.below(NAMES.len())].to_owned(),
                        arguments: Arguments::Json(json!({})),
                    })
                    .collect(),
            })
            .chain([answer("done")])
            .collect();
        let issued: usize = script.iter().map(|t| t.tool_calls.len()).sum();
        let mut model = Scripted::new(script);
        let ran = RefCell::new(Vec::<String>::new());
        let executor = |name: &str, _: &Value| -> Result<Value, String> {
            ran.borrow_mut().push(name.to_owned());
            Ok(json!("ok"))
        };
        let (sink, dispatch) = dispatch(100);
        let outcome = AgentLoop::new(&dispatch).run(
            &mut model,
            &mut Vec::new(),
            &ToolSource::new(&server, &tools),
            &decider,
            Caller::new("prop"),
            &executor,
        );

        assert_eq!(outcome.answer(), Some("done"), "seed {seed}: {outcome:?}");
        for shown in &model.shown {
            let shown: BTreeSet<String> = shown.iter().cloned().collect();
            assert_eq!(shown, expected, "seed {seed}: exactly the visible set");
        }
        // And as each provider receives it: the request's `tools` are exactly the visible set.
        for requests in &model.requests {
            for (format, request) in ["anthropic", "openai", "ollama"].iter().zip(requests) {
                let names: BTreeSet<String> = request["tools"]
                    .as_array()
                    .map(|tools| {
                        tools
                            .iter()
                            .filter_map(|t| {
                                t.get("name")
                                    .or_else(|| t["function"].get("name"))
                                    .and_then(Value::as_str)
                                    .map(str::to_owned)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                assert_eq!(names, expected, "seed {seed}: the {format} request's tools");
                let serialized = request["tools"].to_string();
                for hidden in NAMES.iter().filter(|n| !expected.contains(**n)) {
                    assert!(
                        !serialized.contains(&format!("\"{hidden}\"")),
                        "seed {seed}: hidden `{hidden}` in the {format} request's tools"
                    );
                }
            }
        }
        for name in ran.borrow().iter() {
            assert!(
                expected.contains(name),
                "seed {seed}: `{name}` ran but was not shown"
            );
        }
        let records = per_call(&sink);
        assert_eq!(records.len(), issued, "seed {seed}: one record per call");
        for record in &records {
            assert_eq!(record.role, decider.principal(), "seed {seed}");
            if !expected.contains(&record.tool) {
                assert_eq!(record.verdict, Verdict::Denied, "seed {seed}: {record:?}");
            }
        }
    }
}
