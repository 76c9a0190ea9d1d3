//! Agents assembled at run time: their shape, the advisor-only gate and `persist_spec`.

use capability::agent::MutatingReason;
use capability::manifest::Assertion;
use capability::mcp::McpManifest;
use capability::registry::{PersistError, RegisterError};
use capability::{
    AgentSpec, Capability, CapabilityManifest, Registry, Server, Target, assert_advisor_only,
};
use serde_json::json;

use super::registry;

fn built(name: &str, read_only: Option<bool>) -> CapabilityManifest {
    let builder = CapabilityManifest::builder(name).provider("tools");
    let builder = match read_only {
        Some(value) => builder.read_only(value),
        None => builder,
    };
    builder.build().expect("valid")
}

fn mcp(name: &str, read_only: bool, server: &Server) -> CapabilityManifest {
    let tool = json!({
        "name": name,
        "inputSchema": { "type": "object" },
        "annotations": { "readOnlyHint": read_only }
    });
    CapabilityManifest::from_mcp_tool(&tool, server).expect("valid")
}

#[test]
fn spec_builder_checks_the_shape_only() {
    let error = AgentSpec::builder("bad name")
        .tool(built("a", Some(true)))
        .tool(built("a", Some(true)))
        .build()
        .expect_err("three problems");
    assert_eq!(error.problems().len(), 3, "{error}");
    let text = error.to_string();
    assert!(
        text.contains("agent name `bad name` is not valid"),
        "{text}"
    );
    assert!(text.contains("no target"), "{text}");
    assert!(text.contains("tool `tools/a` is bound twice"), "{text}");

    // Same name from two providers is two tools.
    let other = CapabilityManifest::builder("a")
        .provider("elsewhere")
        .build()
        .expect("valid");
    let spec = AgentSpec::builder("analyst")
        .target(Target::Analysis)
        .tool(built("a", Some(true)))
        .tool(other)
        .build()
        .expect("the shape is fine; the advisor rule is not checked here");
    assert_eq!(spec.tools().len(), 2);
    assert!(assert_advisor_only(&spec).is_err());
}

#[test]
fn gate_names_every_offending_tool_and_why() {
    let untrusted = Server::untrusted("browser");
    let trusted = Server::trusted("files");
    let asserted = built("screenshot", Some(true)).with_assertion(&Assertion {
        read_only: Some(false),
        ..Assertion::default()
    });
    let spec = AgentSpec::builder("researcher")
        .target(Target::Research)
        .tool(built("query", Some(true)))
        .tool(built("restart", Some(false)))
        .tool(built("tag", None))
        .tool(mcp("snapshot", true, &untrusted))
        .tool(mcp("delete", false, &trusted))
        .tool(mcp("list", true, &trusted))
        .tool(asserted)
        .build()
        .expect("shape ok");
    let violation = assert_advisor_only(&spec).expect_err("five offenders");
    let offenders: Vec<(&str, MutatingReason)> = violation
        .offenders()
        .iter()
        .map(|o| (o.tool(), o.reason()))
        .collect();
    assert_eq!(
        offenders,
        [
            ("tools/restart", MutatingReason::DeclaredMutating),
            ("tools/tag", MutatingReason::Defaulted),
            (
                "browser/snapshot",
                MutatingReason::UntrustedClaim {
                    claimed_read_only: true
                }
            ),
            ("files/delete", MutatingReason::ClaimedMutating),
            ("tools/screenshot", MutatingReason::AssertedMutating),
        ]
    );
    assert_eq!(
        violation.to_string(),
        "advisor agent `researcher` (research) binds 5 tools that are not read-only:\n  \
         - `tools/restart`: declared mutating\n  \
         - `tools/tag`: nothing says it is read-only, so it counts as mutating (the MCP default)\n  \
         - `browser/snapshot`: its server claims read-only, but the server is untrusted \
         (an operator can assert the tool read-only)\n  \
         - `files/delete`: its trusted server says it is not read-only\n  \
         - `tools/screenshot`: asserted mutating by an operator"
    );
}

#[test]
fn every_advisor_target_is_gated_and_operators_are_not() {
    for target in [Target::Research, Target::Selection, Target::Analysis] {
        let spec = AgentSpec::builder("a")
            .target(target)
            .tool(built("write", Some(false)))
            .build()
            .expect("shape ok");
        assert!(assert_advisor_only(&spec).is_err(), "{target}");
    }
    let spec = AgentSpec::builder("ops")
        .target(Target::Operator)
        .tool(built("write", Some(false)))
        .build()
        .expect("shape ok");
    assert_eq!(assert_advisor_only(&spec), Ok(()));
}

#[test]
fn persist_spec_runs_the_gate_and_never_stores_a_violation() {
    let mut registry = Registry::default();
    let screenshot = mcp("take_screenshot", true, &Server::untrusted("browser"));
    for tool in [
        built("query", Some(true)),
        built("restart", Some(false)),
        screenshot.clone(),
    ] {
        registry.register_tool(tool).expect("a new name");
    }
    let bad = AgentSpec::builder("analyst")
        .target(Target::Analysis)
        .tool(built("query", Some(true)))
        .tool(screenshot)
        .build()
        .expect("shape ok");
    match registry.persist_spec(bad) {
        Err(PersistError::Advisor(violation)) => {
            assert_eq!(violation.offenders().len(), 1);
            assert_eq!(violation.offenders()[0].tool(), "browser/take_screenshot");
        }
        other => panic!("expected the advisor gate to refuse, got {other:?}"),
    }
    assert!(registry.agent("analyst").is_none());
    assert_eq!(registry.agents().len(), 0);

    let good = AgentSpec::builder("analyst")
        .target(Target::Analysis)
        .tool(built("query", Some(true)))
        .build()
        .expect("shape ok");
    registry.persist_spec(good.clone()).expect("stored");
    assert_eq!(registry.agent("analyst"), Some(&good));
    assert_eq!(
        registry.agent_origin("analyst"),
        Some(capability::registry::RUNTIME_ORIGIN)
    );

    let ops = AgentSpec::builder("ops")
        .target(Target::Operator)
        .tool(built("restart", Some(false)))
        .build()
        .expect("shape ok");
    registry
        .persist_spec(ops)
        .expect("operators may bind mutating tools");
    let names: Vec<&str> = registry.agents().map(|a| a.name()).collect();
    assert_eq!(names, ["analyst", "ops"]);

    let again = registry.persist_spec(good);
    assert_eq!(
        again,
        Err(PersistError::DuplicateAgent {
            name: "analyst".into(),
            origin: capability::registry::RUNTIME_ORIGIN.into()
        })
    );
}

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive, scopes = ["k8s:write"], provider = "k8s")]
struct RestartPod;

/// List pods.
#[derive(Capability)]
#[capability(read_only, idempotent, scopes = ["k8s:read"], provider = "k8s")]
struct ListPods;

#[test]
fn persist_spec_takes_each_tool_from_the_registry_not_from_the_spec() {
    let mut registry = registry();
    // A manifest built under `restart_pod`'s name that says read-only: not the registered tool.
    let forged = CapabilityManifest::builder("restart_pod")
        .provider("k8s")
        .read_only(true)
        .build()
        .expect("valid on its own");
    let spec = AgentSpec::builder("analyst")
        .target(Target::Analysis)
        .tool(ListPods::manifest().clone())
        .tool(forged.clone())
        .build()
        .expect("shape ok");
    assert_eq!(
        assert_advisor_only(&spec),
        Ok(()),
        "alone, the spec looks fine"
    );
    match registry.persist_spec(spec) {
        Err(PersistError::DescriptorMismatch {
            agent,
            tool,
            registered,
            given,
        }) => {
            assert_eq!(
                (agent.as_str(), tool.as_str()),
                ("analyst", "k8s/restart_pod")
            );
            assert_eq!(registered, RestartPod::manifest().descriptor_hash());
            assert_eq!(given, forged.descriptor_hash());
        }
        other => panic!("expected a descriptor mismatch, got {other:?}"),
    }
    assert!(registry.agent("analyst").is_none());

    // The same forgery with the registered tool's hash (edited in its serialized form): the
    // registry's manifest is what the advisor rule checks, and it is destructive.
    let mut value = serde_json::to_value(RestartPod::manifest()).expect("serializes");
    value["read_only"] = json!({"effective": true, "source": "declared", "stated": true});
    value["destructive"] = json!({"effective": false, "source": "declared", "stated": false});
    let edited: CapabilityManifest = serde_json::from_value(value).expect("well-formed");
    let spec = AgentSpec::builder("analyst")
        .target(Target::Analysis)
        .tool(edited)
        .build()
        .expect("shape ok");
    match registry.persist_spec(spec) {
        Err(PersistError::Advisor(violation)) => {
            assert_eq!(violation.offenders()[0].tool(), "k8s/restart_pod");
            assert_eq!(violation.offenders()[0].reason(), MutatingReason::Defaulted);
        }
        other => panic!("expected the advisor gate to refuse, got {other:?}"),
    }
    assert!(registry.agent("analyst").is_none());

    // A genuine spec persists, holding the registry's manifests.
    let spec = AgentSpec::builder("analyst")
        .target(Target::Analysis)
        .tool(ListPods::manifest().clone())
        .build()
        .expect("shape ok");
    registry
        .persist_spec(spec)
        .expect("a genuine advisor persists");
    let stored = registry.agent("analyst").expect("stored");
    assert_eq!(stored.tools(), [ListPods::manifest().clone()]);
}

#[test]
fn persist_spec_refuses_a_tool_the_registry_does_not_know() {
    let mut registry = registry();
    let unknown = built("query", Some(true));
    for target in [Target::Analysis, Target::Operator] {
        let spec = AgentSpec::builder("someone")
            .target(target)
            .tool(unknown.clone())
            .build()
            .expect("shape ok");
        let refused = registry.persist_spec(spec).expect_err("unknown tool");
        assert_eq!(
            refused,
            PersistError::UnknownTool {
                agent: "someone".into(),
                tool: "tools/query".into()
            }
        );
        assert_eq!(
            refused.to_string(),
            "agent `someone` binds `tools/query`, which the registry does not know; \
             register the tool first (`Registry::register_tool`)"
        );
    }

    // A registered name from another provider is another tool.
    let elsewhere = CapabilityManifest::builder("list_pods")
        .provider("elsewhere")
        .read_only(true)
        .build()
        .expect("valid");
    let spec = AgentSpec::builder("someone")
        .target(Target::Analysis)
        .tool(elsewhere)
        .build()
        .expect("shape ok");
    assert!(matches!(
        registry.persist_spec(spec),
        Err(PersistError::UnknownTool { tool, .. }) if tool == "elsewhere/list_pods"
    ));
    // Only the agents this binary declares: nothing refused was stored.
    let agents: Vec<&str> = registry.agents().map(|a| a.name()).collect();
    assert_eq!(agents, ["directory-admin", "directory_analyst"]);

    // Registered at run time, it is known.
    registry.register_tool(unknown.clone()).expect("a new name");
    let spec = AgentSpec::builder("someone")
        .target(Target::Analysis)
        .tool(unknown)
        .build()
        .expect("shape ok");
    registry.persist_spec(spec).expect("now known");
}

#[test]
fn register_tool_refuses_a_name_already_taken() {
    let mut registry = registry();
    let clash = CapabilityManifest::builder("restart_pod")
        .provider("other")
        .build()
        .expect("valid");
    let refused = registry.register_tool(clash).expect_err("name taken");
    assert_eq!(
        refused,
        RegisterError::DuplicateTool {
            name: "restart_pod".into(),
            origin: "registry::gate".into()
        }
    );
    assert!(
        refused
            .to_string()
            .contains("`restart_pod` is already registered")
    );
    assert_eq!(registry.tool("restart_pod"), Some(RestartPod::manifest()));

    registry
        .register_tool(built("fresh", None))
        .expect("a new name");
    assert_eq!(
        registry.tool_origin("fresh"),
        Some(capability::registry::RUNTIME_ORIGIN)
    );
    let names: Vec<&str> = registry.tools().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "count_sessions",
            "delete_user",
            "fresh",
            "list_pods",
            "list_users",
            "lock_user",
            "restart_pod"
        ],
        "still sorted"
    );
}

#[test]
fn a_deserialized_spec_gets_the_builder_checks() {
    let tool = serde_json::to_value(ListPods::manifest()).expect("serializes");
    let read = |file: serde_json::Value| serde_json::from_value::<AgentSpec>(file);

    let twice = read(json!({"name": "analyst", "target": "analysis", "tools": [tool, tool]}));
    let error = twice.expect_err("a tool bound twice").to_string();
    assert!(
        error.contains("tool `k8s/list_pods` is bound twice"),
        "{error}"
    );

    let bad_name = read(json!({"name": "bad name", "target": "analysis", "tools": [tool]}));
    let error = bad_name.expect_err("a bad name").to_string();
    assert!(
        error.contains("agent name `bad name` is not valid"),
        "{error}"
    );

    let no_target = read(json!({"name": "analyst", "tools": [tool]}));
    let error = no_target.expect_err("no target").to_string();
    assert!(error.contains("no target"), "{error}");

    let extra = read(json!({"name": "analyst", "target": "analysis", "tools": [], "admin": true}));
    let error = extra.expect_err("an unknown field").to_string();
    assert!(error.contains("unknown field `admin`"), "{error}");

    let fine = read(json!({"name": "analyst", "target": "analysis", "tools": [tool]}));
    let spec = fine.expect("a well-formed spec");
    assert_eq!(spec.name(), "analyst");
    assert_eq!(spec.tools()[0].name(), "list_pods");
}
