//! Shadow mode: read-only tools only, the clamp, the parse paths, and metadata as the only way
//! out.

use crate::loop_support;

use capability_agent::driver::{AgentLoop, ToolSource};
use capability_agent::shadow::{
    METADATA_KEY, ParseStatus, ShadowError, ShadowResult, clamp_confidence_delta, run_shadow,
};
use capability_audit::{Caller, Verdict};
use capability_core::authz::{Policy, ToolContext};
use capability_mcp::Server;
use serde_json::{Map, Value, json};

use loop_support::*;

fn role(name: &str) -> ToolContext {
    Policy::from_toml_str(POLICY)
        .expect("policy")
        .context(name, "shadow-1")
        .expect("role")
}

fn ok(_: &str, _: &Value) -> Result<Value, String> {
    Ok(json!({"lines": ["OOMKilled"]}))
}

#[test]
fn the_confidence_delta_is_clamped_to_minus_0_15_and_0() {
    assert_eq!(clamp_confidence_delta(0.3), Some(0.0));
    assert_eq!(clamp_confidence_delta(0.0), Some(0.0));
    assert!(clamp_confidence_delta(-0.0).is_some_and(|d| d.is_sign_positive()));
    assert_eq!(clamp_confidence_delta(-0.1), Some(-0.1));
    assert_eq!(clamp_confidence_delta(-0.15), Some(-0.15));
    assert_eq!(clamp_confidence_delta(-0.5), Some(-0.15));
    assert_eq!(clamp_confidence_delta(f64::NEG_INFINITY), Some(-0.15));
    assert_eq!(clamp_confidence_delta(f64::INFINITY), Some(0.0));
    assert_eq!(clamp_confidence_delta(f64::NAN), None);
    for (text, expected) in [
        (r#"{"confidence_delta": 0.4}"#, Some(0.0)),
        (r#"{"confidence_delta": -0.9}"#, Some(-0.15)),
        (r#"{"confidence_delta": -0.05}"#, Some(-0.05)),
        (r#"{"confidence_delta": 1e308}"#, Some(0.0)),
    ] {
        assert_eq!(
            ShadowResult::parse(text).confidence_delta(),
            expected,
            "{text}"
        );
    }
}

#[test]
fn the_final_text_is_read_bare_fenced_or_not_at_all() {
    let full = r#"{"root_cause_check": "confirmed", "evidence_used": ["logs", "metrics"],
        "confidence_delta": -0.05, "missing_evidence": ["traces"], "next_step": "check memory limits"}"#;
    let bare = ShadowResult::parse(full);
    assert_eq!(bare.parse_status(), ParseStatus::Parsed);
    assert_eq!(bare.root_cause_check(), Some("confirmed"));
    assert_eq!(bare.evidence_used(), ["logs", "metrics"]);
    assert_eq!(bare.missing_evidence(), ["traces"]);
    assert_eq!(bare.next_step(), Some("check memory limits"));
    assert_eq!(bare.confidence_delta(), Some(-0.05));

    let fenced = ShadowResult::parse(&format!(
        "Here is my review:\n```json\n{full}\n```\nThanks."
    ));
    assert_eq!(fenced, bare);
    let unlabelled = ShadowResult::parse(&format!("```\n{full}\n```"));
    assert_eq!(unlabelled, bare);
    let in_prose = ShadowResult::parse(&format!("My verdict: {full} -- done"));
    assert_eq!(in_prose, bare);

    for text in [
        "",
        "The root cause looks right to me.",
        "```json\n{not json}\n```",
        "[1, 2, 3]",
        r#"{"unrelated": true}"#,
        "{{{{",
        "```",
        "}{",
    ] {
        let result = ShadowResult::parse(text);
        assert_eq!(result.parse_status(), ParseStatus::Unparsed, "{text:?}");
        assert_eq!(result.root_cause_check(), None);
    }

    let partial = ShadowResult::parse(
        r#"{"root_cause_check": 3, "evidence_used": ["logs", 7], "confidence_delta": "-0.1",
            "next_step": "scale down"}"#,
    );
    assert_eq!(partial.parse_status(), ParseStatus::Partial);
    assert_eq!(partial.root_cause_check(), None);
    assert_eq!(partial.evidence_used(), ["logs"]);
    assert_eq!(partial.confidence_delta(), None);
    assert_eq!(partial.next_step(), Some("scale down"));
}

#[test]
fn long_answers_are_cut() {
    let text = json!({
        "next_step": "x".repeat(10_000),
        "evidence_used": vec!["e"; 1000],
    })
    .to_string();
    let result = ShadowResult::parse(&text);
    assert_eq!(result.next_step().map(|s| s.chars().count()), Some(1000));
    assert_eq!(result.evidence_used().len(), 32);
}

#[test]
fn only_metadata_comes_out_and_the_primary_is_left_alone() {
    let result = ShadowResult::parse(
        r#"{"root_cause_check": "refuted", "confidence_delta": 0.5,
            "decision": "restart_pod", "confidence": 0.99, "action": "delete"}"#,
    );
    let mut primary = Map::new();
    primary.insert("decision".into(), json!("scale_up"));
    primary.insert("confidence".into(), json!(0.8));
    let before = primary.clone();

    result.attach(&mut primary);

    assert_eq!(primary.len(), before.len() + 1);
    for (key, value) in &before {
        assert_eq!(primary.get(key), Some(value), "{key} untouched");
    }
    let shadow = primary[METADATA_KEY].as_object().expect("an object");
    let mut keys: Vec<&str> = shadow.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "confidence_delta",
            "evidence_used",
            "missing_evidence",
            "next_step",
            "parse_status",
            "root_cause_check"
        ]
    );
    assert_eq!(
        shadow["confidence_delta"],
        json!(0.0),
        "a positive delta becomes 0"
    );
    assert_eq!(shadow["parse_status"], json!("parsed"));
}

#[test]
fn a_shadow_run_over_read_only_tools_ends_in_metadata() {
    let (sink, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let mut model = Scripted::new([
        call("c1", "get_pod_logs", json!({"pod": "checkout-7d9"})),
        answer(
            "```json\n{\"root_cause_check\": \"confirmed\", \"evidence_used\": [\"get_pod_logs\"], \
             \"confidence_delta\": 0.2, \"missing_evidence\": [], \"next_step\": \"raise the memory limit\"}\n```",
        ),
    ]);
    let result = run_shadow(
        &AgentLoop::new(&dispatch),
        &mut model,
        &mut vec![],
        &ToolSource::new(&server, &tools),
        &role("monitor"),
        Caller::new("shadow-advisor").step("shadow"),
        &ok,
    )
    .expect("a read-only role");
    assert_eq!(result.parse_status(), ParseStatus::Parsed);
    assert_eq!(result.root_cause_check(), Some("confirmed"));
    assert_eq!(result.confidence_delta(), Some(0.0));
    let records = per_call(&sink);
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].role.as_str(), records[0].verdict),
        ("monitor", Verdict::Allowed)
    );
    assert_eq!(records[0].step.as_deref(), Some("shadow"));
}

#[test]
fn unparsable_output_and_degrades_are_results_not_errors() {
    let (_, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let run = |model: &mut Scripted| {
        run_shadow(
            &AgentLoop::new(&dispatch).max_iterations(2),
            model,
            &mut vec![],
            &ToolSource::new(&server, &tools),
            &role("monitor"),
            Caller::new("shadow-advisor"),
            &ok,
        )
    };
    let unparsed = run(&mut Scripted::new([answer("Looks fine to me!")])).expect("runs");
    assert_eq!(unparsed.parse_status(), ParseStatus::Unparsed);
    assert_eq!(unparsed.into_metadata()["parse_status"], json!("unparsed"));

    let degraded = run(&mut Scripted::repeating(call("c", "list_pods", json!({})))).expect("runs");
    assert_eq!(degraded.parse_status(), ParseStatus::Degraded);
    let metadata = degraded.into_metadata();
    assert_eq!(metadata["parse_status"], json!("degraded"));
    assert!(
        metadata["degrade"]
            .as_str()
            .is_some_and(|d| d.contains("2 model turns"))
    );
}

#[test]
fn a_role_that_would_see_a_mutating_tool_cannot_start_a_shadow_run() {
    let (sink, dispatch) = dispatch(0);
    let server = Server::trusted("k8s");
    let tools = k8s_tools();
    let mut model = Scripted::new([answer("{}")]);
    let refused = run_shadow(
        &AgentLoop::new(&dispatch),
        &mut model,
        &mut vec![],
        &ToolSource::new(&server, &tools),
        &role("operator"),
        Caller::new("shadow-advisor"),
        &ok,
    );
    assert_eq!(
        refused,
        Err(ShadowError::NotReadOnly {
            tools: vec!["restart_pod".into(), "delete_pod".into()]
        })
    );
    assert_eq!(model.turns(), 0);
    assert!(per_call(&sink).is_empty());
}
