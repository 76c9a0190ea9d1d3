//! Provenance cannot be raised by editing serialized data: a manifest (or an agent spec holding
//! one) read from a file believes none of its hints, whatever the file says about their source
//! and effective value. Only a trusted source (the code, through the registry) makes a tool
//! read-only again.

use capability::agent::MutatingReason;
use capability::manifest::{HintKind, HintSource};
use capability::registry::PersistError;
use capability::{
    Agent, AgentSpec, Capability, CapabilityManifest, Registry, advisor_agent, assert_advisor_only,
};
use serde_json::{Value, json};

/// Restart a pod.
///
/// No scope: a read-only tool requiring `k8s:write` would break a manifest rule, and the forgery
/// below must be stopped by provenance alone.
#[derive(Capability)]
#[capability(destructive, provider = "k8s")]
struct RestartPod;

/// List pods.
#[derive(Capability)]
#[capability(read_only, scopes = ["k8s:read"], provider = "k8s")]
struct ListPods;

#[advisor_agent(tools(ListPods), target = "analysis")]
struct PodAnalyst;

/// Every source whose statements are believed, as the serialized form spells it.
const BELIEVED_SOURCES: [&str; 4] = ["declared", "asserted", "trusted_claim", "pinned_claim"];

/// `restart_pod`'s manifest as written, edited so that its hints are self-consistent and say
/// read-only from `source`: exactly what a check of "do the effective values follow from the
/// sources?" would accept.
fn forged_restart_pod(source: &str) -> Value {
    let mut value = serde_json::to_value(RestartPod::manifest()).expect("serializes");
    value["read_only"] = json!({"effective": true, "source": source, "stated": true});
    value["destructive"] = json!({"effective": false, "source": "defaulted", "stated": null});
    value
}

fn registry() -> Registry {
    match Registry::from_inventory() {
        Ok(registry) => registry,
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn an_edited_source_does_not_make_a_believed_read_only_tool() {
    // Every source is tried before failing, so a failure lists each one that was believed.
    let believed: Vec<&str> = BELIEVED_SOURCES
        .into_iter()
        .filter(|source| {
            let m: CapabilityManifest =
                serde_json::from_value(forged_restart_pod(source)).expect("well-formed");
            m.read_only() || !m.destructive()
        })
        .collect();
    assert!(believed.is_empty(), "believed from a file: {believed:?}");

    for source in BELIEVED_SOURCES {
        let m: CapabilityManifest =
            serde_json::from_value(forged_restart_pod(source)).expect("well-formed");
        let hint = m.hint(HintKind::ReadOnly);
        assert_eq!(
            hint.source(),
            HintSource::UntrustedClaim,
            "source `{source}`"
        );
        assert_eq!(hint.stated(), Some(true), "the claim stays visible");
    }
}

#[test]
fn an_edited_effective_value_alone_is_not_believed_either() {
    let mut value = serde_json::to_value(RestartPod::manifest()).expect("serializes");
    value["read_only"]["effective"] = true.into();
    value["destructive"]["effective"] = false.into();
    // Effective values are never read: they are computed again from what was stated.
    let m: CapabilityManifest = serde_json::from_value(value).expect("well-formed");
    assert!(!m.read_only() && m.destructive());
    assert_eq!(
        m.hint(HintKind::ReadOnly).stated(),
        None,
        "nothing was stated"
    );
}

fn forged_spec(source: &str) -> AgentSpec {
    let file = json!({
        "name": "analyst",
        "target": "analysis",
        "tools": [forged_restart_pod(source)],
    });
    serde_json::from_value(file).expect("well-formed")
}

#[test]
fn an_agent_spec_holding_an_edited_manifest_is_no_advisor() {
    // Every source is tried before failing, so a failure lists each one that was believed.
    let passed: Vec<&str> = BELIEVED_SOURCES
        .into_iter()
        .filter(|source| assert_advisor_only(&forged_spec(source)).is_ok())
        .collect();
    assert!(passed.is_empty(), "advisor gate passed for: {passed:?}");

    for source in BELIEVED_SOURCES {
        let spec = forged_spec(source);
        assert!(
            !spec.tools()[0].read_only(),
            "source `{source}` was believed"
        );
        let violation = assert_advisor_only(&spec).expect_err("restart_pod is not read-only");
        assert_eq!(violation.offenders()[0].tool(), "k8s/restart_pod");
        assert_eq!(
            violation.offenders()[0].reason(),
            MutatingReason::UntrustedClaim {
                claimed_read_only: true
            }
        );

        // The registry knows `restart_pod` from its code, and refuses the advisor.
        let mut registry = registry();
        match registry.persist_spec(spec) {
            // Its code says nothing about `read_only`: the fail-closed default.
            Err(PersistError::Advisor(violation)) => {
                assert_eq!(violation.offenders()[0].reason(), MutatingReason::Defaulted)
            }
            other => panic!("source `{source}`: expected a refusal, got {other:?}"),
        }
        assert!(registry.agent("analyst").is_none());
    }
}

#[test]
fn an_edited_agent_spec_file_gains_nothing() {
    // A genuine advisor's spec, written out, with `restart_pod` slipped in as read-only.
    let mut file = serde_json::to_value(PodAnalyst::spec()).expect("serializes");
    file["name"] = "pod_analyst_2".into();
    let tools = file["tools"].as_array_mut().expect("a list");
    tools.push(forged_restart_pod("declared"));
    let spec: AgentSpec = serde_json::from_value(file).expect("well-formed");
    assert!(assert_advisor_only(&spec).is_err());
    let mut registry = registry();
    assert!(matches!(
        registry.persist_spec(spec),
        Err(PersistError::Advisor(_))
    ));
    assert!(registry.agent("pod_analyst_2").is_none());
}

#[test]
fn a_genuine_spec_read_from_a_file_is_believed_again_through_the_registry() {
    let json = serde_json::to_string(PodAnalyst::spec()).expect("serializes");
    let mut file: Value = serde_json::from_str(&json).expect("JSON");
    file["name"] = "pod_analyst_copy".into();
    let spec: AgentSpec = serde_json::from_value(file).expect("well-formed");
    // Read from a file, its tool is a claim...
    assert!(!spec.tools()[0].read_only());
    assert!(assert_advisor_only(&spec).is_err());
    // ...and the registry, which knows `list_pods` from its code, makes it believed again.
    let mut registry = registry();
    registry
        .persist_spec(spec)
        .expect("a genuine spec persists");
    let stored = registry.agent("pod_analyst_copy").expect("stored");
    assert_eq!(&stored.tools()[0], ListPods::manifest());
    assert_eq!(
        stored.tools()[0].hint(HintKind::ReadOnly).source(),
        HintSource::Declared
    );
}
