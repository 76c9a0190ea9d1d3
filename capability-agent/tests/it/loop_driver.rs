//! The loop driver: a normal run, hidden and unlisted tools, malformed arguments, the degrades,
//! and one audit record per tool call.

use crate::loop_support;

use std::cell::RefCell;

use capability_agent::driver::{AgentLoop, Degrade, LoopOutcome, ToolSource};
use capability_agent::{Arguments, Message, ModelErrorKind, ToolCall, Turn};
use capability_audit::{Caller, DegradeReason, Verdict};
use capability_core::authz::{Policy, ToolContext};
use capability_mcp::Server;
use serde_json::{Value, json};

use loop_support::*;

fn monitor(session: &str) -> ToolContext {
    Policy::from_toml_str(POLICY)
        .expect("policy")
        .context("monitor", session)
        .expect("role")
}

/// An executor that remembers every call.
#[derive(Default)]
struct Executor {
    calls: RefCell<Vec<(String, Value)>>,
}

impl capability_agent::driver::ToolExecutor for Executor {
    fn call(&self, name: &str, arguments: &Value) -> Result<Value, String> {
        self.calls
            .borrow_mut()
            .push((name.to_owned(), arguments.clone()));
        match name {
            "get_pod_logs" => Err("the pod has no logs".to_owned()),
            _ => Ok(json!([{"name": "checkout-7d9", "phase": "Running"}])),
        }
    }
}

const CALLER: Caller<'static> = Caller::new("watcher").step("triage");

fn results(messages: &[Message]) -> Vec<&capability_agent::ToolResult> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool(result) => Some(result),
            _ => None,
        })
        .collect()
}

#[test]
fn a_tool_call_is_run_and_its_result_fed_back_until_the_answer() {
    let (sink, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let executor = Executor::default();
    let mut model = Scripted::new([
        call("c1", "list_pods", json!({"namespace": "prod"})),
        answer("checkout is healthy"),
    ]);
    let mut messages = vec![Message::User("is checkout healthy?".into())];

    let outcome = AgentLoop::new(&dispatch).run(
        &mut model,
        &mut messages,
        &ToolSource::new(&server, &tools),
        &monitor("s-1"),
        CALLER.incident("INC-1"),
        &executor,
    );

    assert_eq!(
        outcome,
        LoopOutcome::Answer {
            text: "checkout is healthy".into(),
            iterations: 2,
            tool_calls: 1
        }
    );
    assert_eq!(model.shown, vec![vec!["list_pods", "get_pod_logs"]; 2]);
    assert_eq!(
        *executor.calls.borrow(),
        vec![("list_pods".to_owned(), json!({"namespace": "prod"}))]
    );
    // The second turn saw the call and its result.
    let second = &model.seen[1];
    assert_eq!(second.len(), 3);
    let fed = results(second);
    assert_eq!(fed.len(), 1);
    assert_eq!(fed[0].call_id, "c1");
    assert!(!fed[0].is_error);
    assert_eq!(fed[0].content[0]["phase"], "Running");
    // The caller's conversation holds everything, the answer last.
    assert_eq!(messages.len(), 4);
    assert!(matches!(&messages[3], Message::Assistant(t) if t.is_final()));

    let records = per_call(&sink);
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(
        (record.tool.as_str(), record.verdict, record.success),
        ("list_pods", Verdict::Allowed, Some(true))
    );
    assert_eq!(
        (
            record.role.as_str(),
            record.session.as_str(),
            record.agent.as_str()
        ),
        ("monitor", "s-1", "watcher")
    );
    assert_eq!(record.step.as_deref(), Some("triage"));
    assert_eq!(record.incident_id.as_deref(), Some("INC-1"));
    assert_eq!(record.policy_version.as_deref(), Some("test/1"));
}

#[test]
fn a_failing_tool_is_an_error_result_not_a_degrade() {
    let (sink, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let mut model = Scripted::new([
        call("c1", "get_pod_logs", json!({"pod": "x"})),
        answer("no logs"),
    ]);
    let mut messages = Vec::new();
    let outcome = AgentLoop::new(&dispatch).run(
        &mut model,
        &mut messages,
        &ToolSource::new(&server, &tools),
        &monitor("s-1"),
        CALLER,
        &Executor::default(),
    );
    assert_eq!(outcome.answer(), Some("no logs"));
    let fed = results(&messages);
    assert!(fed[0].is_error);
    assert_eq!(fed[0].content, json!("the pod has no logs"));
    let records = per_call(&sink);
    assert_eq!(records[0].success, Some(false));
    assert_eq!(records[0].error.as_deref(), Some("the pod has no logs"));
}

#[test]
fn a_hidden_or_unlisted_tool_is_never_run_and_recorded_as_a_denial() {
    let (sink, dispatch) = dispatch(5);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let executor = Executor::default();
    let mut model = Scripted::new([
        call("c1", "restart_pod", json!({"pod": "checkout-7d9"})),
        call("c2", "drop_database", json!({})),
        answer("gave up"),
    ]);
    let mut messages = Vec::new();
    let outcome = AgentLoop::new(&dispatch).run(
        &mut model,
        &mut messages,
        &ToolSource::new(&server, &tools),
        &monitor("s-1"),
        CALLER,
        &executor,
    );

    assert_eq!(outcome.answer(), Some("gave up"));
    assert!(executor.calls.borrow().is_empty(), "never dispatched");
    // The model was never shown either, and cannot tell a hidden tool from an unlisted one.
    assert!(model.shown.iter().flatten().all(|t| t != "restart_pod"));
    let fed = results(&messages);
    assert_eq!(fed.len(), 2);
    assert!(fed.iter().all(|r| r.is_error));
    assert_eq!(
        fed[0].content,
        json!("no tool named `restart_pod` is available")
    );
    assert_eq!(
        fed[1].content,
        json!("no tool named `drop_database` is available")
    );

    let records = per_call(&sink);
    assert_eq!(tools_of(&records), ["restart_pod", "drop_database"]);
    for record in &records {
        assert_eq!(record.verdict, Verdict::Denied);
        assert_eq!(record.role, "monitor");
        assert_eq!(record.success, None, "not run");
        assert!(!record.reasons.is_empty());
    }
}

#[test]
fn a_hidden_tool_beyond_the_denial_budget_degrades_the_loop() {
    // The default budget: the first denial degrades the session.
    let (sink, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let executor = Executor::default();
    let mut model = Scripted::new([
        call("c1", "delete_pod", json!({"pod": "checkout-7d9"})),
        answer("never reached"),
    ]);
    let mut messages = Vec::new();
    let outcome = AgentLoop::new(&dispatch).run(
        &mut model,
        &mut messages,
        &ToolSource::new(&server, &tools),
        &monitor("s-1"),
        CALLER,
        &executor,
    );
    assert!(
        matches!(
            outcome.degrade(),
            Some(Degrade::Denied {
                reason: DegradeReason::Denied { .. }
            })
        ),
        "{outcome:?}"
    );
    assert_eq!(model.turns(), 1, "no retry");
    assert!(executor.calls.borrow().is_empty());
    // Even the transcript of the degraded run does not say the tool exists.
    assert_eq!(
        results(&messages)[0].content,
        json!("no tool named `delete_pod` is available")
    );
    let records = per_call(&sink);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].verdict, Verdict::Degraded);
    assert_eq!(records[0].role, "monitor");
}

#[test]
fn malformed_arguments_are_recorded_and_never_run() {
    let (sink, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let executor = Executor::default();
    let malformed = Turn {
        text: None,
        tool_calls: vec![ToolCall {
            id: "c1".into(),
            name: "list_pods".into(),
            arguments: Arguments::Malformed {
                raw: "{\"namespace\": \"prod\", \"token\": \"hunter2\"".into(),
                error: "EOF while parsing an object".into(),
            },
        }],
    };
    let mut model = Scripted::new([malformed, answer("done")]);
    let mut messages = Vec::new();
    let outcome = AgentLoop::new(&dispatch).run(
        &mut model,
        &mut messages,
        &ToolSource::new(&server, &tools),
        &monitor("s-1"),
        CALLER,
        &executor,
    );
    assert_eq!(outcome.answer(), Some("done"));
    assert!(executor.calls.borrow().is_empty());
    let fed = results(&messages);
    assert!(fed[0].is_error);
    assert!(
        fed[0]
            .content
            .as_str()
            .is_some_and(|t| t.contains("malformed arguments"))
    );
    let records = per_call(&sink);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].success, Some(false));
    assert!(
        records[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("EOF while parsing"))
    );
    assert!(
        !records[0].to_line().contains("hunter2"),
        "the raw text is not stored"
    );
}

#[test]
fn max_iterations_exceeded_degrades_without_retry() {
    let (sink, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let executor = Executor::default();
    let mut model = Scripted::repeating(call("c", "list_pods", json!({})));
    let outcome = AgentLoop::new(&dispatch).max_iterations(3).run(
        &mut model,
        &mut Vec::new(),
        &ToolSource::new(&server, &tools),
        &monitor("s-1"),
        CALLER,
        &executor,
    );
    assert_eq!(
        outcome,
        LoopOutcome::Degraded {
            degrade: Degrade::IterationsExceeded { max: 3 },
            iterations: 3,
            tool_calls: 3
        }
    );
    assert_eq!(model.turns(), 3);
    assert_eq!(per_call(&sink).len(), 3);
}

#[test]
fn a_model_without_tool_support_degrades_before_any_turn() {
    let (sink, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let mut model = Scripted::new([answer("unused")]);
    model.tools = false;
    model.provider = "tiny-llm".into();
    let outcome = AgentLoop::new(&dispatch).run(
        &mut model,
        &mut Vec::new(),
        &ToolSource::new(&server, &tools),
        &monitor("s-1"),
        CALLER,
        &Executor::default(),
    );
    assert_eq!(
        outcome.degrade(),
        Some(&Degrade::NoToolSupport {
            provider: "tiny-llm".into()
        })
    );
    assert_eq!(model.turns(), 0);
    assert!(per_call(&sink).is_empty());
}

#[test]
fn the_call_budget_of_the_dispatch_degrades_the_loop() {
    let sink = std::sync::Arc::new(capability_audit::MemorySink::new());
    let dispatch = capability_audit::AuditedDispatch::new(sink.clone()).with_budget(
        capability_audit::Budget {
            max_calls: 2,
            max_denials: 0,
        },
    );
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let executor = Executor::default();
    let mut model = Scripted::repeating(call("c", "list_pods", json!({})));
    let outcome = AgentLoop::new(&dispatch).run(
        &mut model,
        &mut Vec::new(),
        &ToolSource::new(&server, &tools),
        &monitor("s-1"),
        CALLER,
        &executor,
    );
    assert_eq!(
        outcome.degrade(),
        Some(&Degrade::Denied {
            reason: DegradeReason::BudgetExhausted { max_calls: 2 }
        })
    );
    assert_eq!(model.turns(), 3);
    assert_eq!(executor.calls.borrow().len(), 2);
    let verdicts: Vec<Verdict> = per_call(&sink).iter().map(|r| r.verdict).collect();
    assert_eq!(
        verdicts,
        [Verdict::Allowed, Verdict::Allowed, Verdict::Degraded]
    );
}

#[test]
fn a_failing_provider_degrades_at_once() {
    let (_, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let mut model = Scripted::failing("ollama");
    let outcome = AgentLoop::new(&dispatch).run(
        &mut model,
        &mut Vec::new(),
        &ToolSource::new(&server, &tools),
        &monitor("s-1"),
        CALLER,
        &Executor::default(),
    );
    match outcome.degrade() {
        Some(Degrade::ProviderFailing { provider, error }) => {
            assert_eq!(provider, "ollama");
            assert_eq!(error.kind, ModelErrorKind::Transport);
        }
        other => panic!("expected ProviderFailing, got {other:?}"),
    }
    assert_eq!(model.turns(), 1, "no retry");
}

#[test]
fn a_tool_list_that_cannot_be_read_degrades_before_any_turn() {
    let (_, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = vec![json!({"description": "no name"})];
    let mut model = Scripted::new([answer("unused")]);
    let outcome = AgentLoop::new(&dispatch).run(
        &mut model,
        &mut Vec::new(),
        &ToolSource::new(&server, &tools),
        &monitor("s-1"),
        CALLER,
        &Executor::default(),
    );
    assert!(
        matches!(outcome.degrade(), Some(Degrade::InvalidTools { .. })),
        "{outcome:?}"
    );
    assert_eq!(model.turns(), 0);
}

#[test]
fn every_tool_call_has_exactly_one_record_with_the_role() {
    let (sink, dispatch) = dispatch(10);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let long_name = "x y ".repeat(100);
    let calls = |specs: &[(&str, Option<Value>)]| Turn {
        text: None,
        tool_calls: specs
            .iter()
            .enumerate()
            .map(|(i, (name, args))| ToolCall {
                id: format!("c{i}"),
                name: (*name).to_owned(),
                arguments: match args {
                    Some(v) => Arguments::Json(v.clone()),
                    None => Arguments::Malformed {
                        raw: "not json".into(),
                        error: "expected value".into(),
                    },
                },
            })
            .collect(),
    };
    let script = [
        calls(&[
            ("list_pods", Some(json!({}))),
            ("restart_pod", Some(json!({"pod": "a"}))),
            ("get_pod_logs", None),
        ]),
        calls(&[
            ("nope", None),
            (&long_name, Some(json!({}))),
            ("", Some(json!({}))),
            ("get_pod_logs", Some(json!({"pod": "a"}))),
        ]),
        answer("done"),
    ];
    let issued: usize = script.iter().map(|t| t.tool_calls.len()).sum();
    let mut model = Scripted::new(script);
    let mut messages = Vec::new();
    let outcome = AgentLoop::new(&dispatch).run(
        &mut model,
        &mut messages,
        &ToolSource::new(&server, &tools),
        &monitor("s-7"),
        CALLER,
        &Executor::default(),
    );
    assert_eq!(outcome.answer(), Some("done"));
    assert_eq!(outcome.tool_calls() as usize, issued);
    let records = per_call(&sink);
    assert_eq!(records.len(), issued, "one record per tool call");
    assert!(
        records
            .iter()
            .all(|r| r.role == "monitor" && r.session == "s-7")
    );
    assert_eq!(
        &tools_of(&records)[..4],
        ["list_pods", "restart_pod", "get_pod_logs", "nope"]
    );
    // Every call got one result, in order, with its id.
    let fed = results(&messages);
    let ids: Vec<&str> = fed.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["c0", "c1", "c2", "c0", "c1", "c2", "c3"]);
    // A name no manifest can carry is echoed back shortened, never panicking.
    assert!(fed[4].content.as_str().is_some_and(|t| t.len() < 200));
}
