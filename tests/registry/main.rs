//! The registry across two crates: tools from `toolkit`, tools and agents from this test crate
//! (here and in `gate`). One binary of its own, apart from `tests/it`: its tests assert on the
//! whole process-wide inventory, which every `#[derive(Capability)]` linked into a binary joins.

mod gate;

use capability::{Agent, Capability, Registry, Target, advisor_agent, agent};

/// Count the sessions of a user.
#[derive(Capability)]
#[capability(read_only, idempotent, provider = "directory", scopes = ["sessions:read"])]
struct CountSessions;

/// Lock a user out.
#[derive(Capability)]
#[capability(destructive = false, provider = "directory", scopes = ["users:write"])]
struct LockUser;

#[advisor_agent(tools(toolkit::ListUsers, CountSessions), target = "analysis")]
struct DirectoryAnalyst;

#[agent(
    tools(LockUser, toolkit::DeleteUser, toolkit::ListUsers),
    name = "directory-admin"
)]
struct DirectoryAdmin;

fn registry() -> Registry {
    match Registry::from_inventory() {
        Ok(registry) => registry,
        Err(error) => panic!("the registry was refused:\n{error}"),
    }
}

#[test]
fn collects_tools_from_both_crates_sorted_by_name() {
    let registry = registry();
    let names: Vec<&str> = registry.tools().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "count_sessions",
            "delete_user",
            "list_pods",
            "list_users",
            "lock_user",
            "restart_pod"
        ]
    );
    assert_eq!(registry.tools().len(), 6);
    assert_eq!(registry.tool_origin("list_users"), Some("toolkit"));
    assert_eq!(registry.tool_origin("delete_user"), Some("toolkit"));
    assert_eq!(registry.tool_origin("count_sessions"), Some("registry"));
    assert_eq!(registry.tool_origin("list_pods"), Some("registry::gate"));
    assert_eq!(
        registry.tool("list_users").map(|t| t.input_schema_id()),
        Some("toolkit::ListUsers")
    );
    assert!(registry.tool("list_users").is_some_and(|t| t.read_only()));
    assert!(
        registry
            .tool("delete_user")
            .is_some_and(|t| t.destructive())
    );
    assert!(registry.tool("no_such_tool").is_none());
}

#[test]
fn collects_agents_sorted_by_name_with_tools_in_declaration_order() {
    let registry = registry();
    let names: Vec<&str> = registry.agents().map(|a| a.name()).collect();
    assert_eq!(names, ["directory-admin", "directory_analyst"]);

    let analyst = registry.agent("directory_analyst").expect("registered");
    assert_eq!(analyst.target(), Target::Analysis);
    assert!(analyst.is_advisor());
    let tools: Vec<&str> = analyst.tools().iter().map(|t| t.name()).collect();
    assert_eq!(tools, ["list_users", "count_sessions"]);
    assert_eq!(analyst, DirectoryAnalyst::spec());

    let admin = registry.agent("directory-admin").expect("registered");
    assert_eq!(admin.target(), Target::Operator);
    let tools: Vec<&str> = admin.tools().iter().map(|t| t.name()).collect();
    assert_eq!(tools, ["lock_user", "delete_user", "list_users"]);
    let mutating: Vec<&str> = admin.mutating_tools().map(|t| t.name()).collect();
    assert_eq!(mutating, ["lock_user", "delete_user"]);
    assert_eq!(registry.agent_origin("directory-admin"), Some("registry"));
    assert!(std::ptr::eq(admin, DirectoryAdmin::spec()));
}

/// The listing is in a defined order (by name), whatever order the linker gave the inventory:
/// each build of a registry lists the same tools and agents, sorted, each tool with its hash.
#[test]
fn listing_is_deterministic() {
    let listing = |registry: &Registry| {
        let tools: Vec<(String, String)> = registry
            .tools()
            .map(|t| (t.name().to_owned(), t.descriptor_hash().to_owned()))
            .collect();
        let agents: Vec<String> = registry.agents().map(|a| a.name().to_owned()).collect();
        (tools, agents)
    };
    let (tools, agents) = listing(&registry());
    assert!(
        tools.len() >= 3 && agents.len() >= 2,
        "{tools:?} {agents:?}"
    );
    let names: Vec<&str> = tools.iter().map(|(name, _)| name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "tools listed by name");
    let mut sorted_agents = agents.clone();
    sorted_agents.sort_unstable();
    assert_eq!(agents, sorted_agents, "agents listed by name");
    for (name, hash) in &tools {
        assert!(
            hash.starts_with("sha256:") || hash.len() == 64,
            "{name}: a descriptor hash, not {hash}"
        );
    }
    for _ in 0..10 {
        assert_eq!(listing(&registry()), (tools.clone(), agents.clone()));
    }
}

#[test]
fn agent_specs_round_trip_through_serde_and_the_registry() {
    let spec = DirectoryAdmin::spec();
    let json = serde_json::to_string(spec).expect("serializes");
    assert!(json.contains(r#""target":"operator""#), "{json}");
    let back: capability::AgentSpec = serde_json::from_str(&json).expect("deserializes");
    assert_eq!((back.name(), back.target()), (spec.name(), spec.target()));
    let names = |s: &capability::AgentSpec| -> Vec<(String, String)> {
        s.tools()
            .iter()
            .map(|t| (t.qualified_name(), t.descriptor_hash().to_owned()))
            .collect()
    };
    assert_eq!(
        names(&back),
        names(spec),
        "the same tools, in the same order"
    );
    // Read from a file, its tools are claims; the registry gives back the manifests it knows.
    assert!(back.tools().iter().all(|t| !t.read_only()));
    let mut registry = registry();
    let renamed = capability::AgentSpec::builder("directory-admin-2")
        .target(back.target())
        .tools(back.tools().iter().cloned())
        .build()
        .expect("shape ok");
    registry.persist_spec(renamed).expect("every tool is known");
    let stored = registry.agent("directory-admin-2").expect("stored");
    assert_eq!(stored.tools(), spec.tools());
}
