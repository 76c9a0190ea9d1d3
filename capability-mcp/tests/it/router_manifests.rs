//! `#[tool_capabilities]` on a real rmcp `#[tool_router]`: every tool rmcp lists has a manifest
//! with the same name, description and hints (MCP defaults for what is absent), the manifests
//! are in the inventory, and the generated types bind to agents.

use capability::tool_capabilities;
use capability::{Agent, Capability, CapabilityManifest, Registry, advisor_agent, agent};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct PodRef {
    /// The pod.
    name: String,
}

struct OpsServer;

/// A `meta` of the author's own, which the manifest's is added to. It also forges the
/// manifest's key, claiming no scopes and another hash: the manifest's value replaces it.
fn team_meta() -> rmcp::model::MetaObject {
    let mut meta = rmcp::model::MetaObject::new();
    meta.0.insert("team".to_owned(), "sre".into());
    meta.0.insert(
        "dev.capability/manifest".to_owned(),
        serde_json::json!({"scopes": [], "descriptorHash": "forged"}),
    );
    meta
}

#[tool_capabilities]
#[tool_router]
impl OpsServer {
    /// List the pods
    ///
    ///   of the cluster.
    #[tool(annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false))]
    #[capability(scopes = ["k8s:read", "k8s:read"], provider = "k8s")]
    fn list_pods(&self) -> String {
        "web-1".to_owned()
    }

    /// A doc comment rmcp ignores, because `description` is given.
    #[tool(
        name = "pod-logs",
        description = "Read a pod's logs.",
        annotations(read_only_hint)
    )]
    async fn logs(&self, Parameters(pod): Parameters<PodRef>) -> String {
        pod.name
    }

    /// Restart a pod.
    #[tool(annotations(destructive_hint = true))]
    #[capability(scopes = ["k8s:write"])]
    fn restart_pod(&self, Parameters(pod): Parameters<PodRef>) -> String {
        pod.name
    }

    // No annotations at all: the MCP defaults (mutating, destructive, open world).
    #[tool]
    fn scale(&self) -> String {
        "scaled".to_owned()
    }

    #[tool(annotations(title = "Cordon", destructive_hint = "false"))]
    fn cordon(&self) -> String {
        "cordoned".to_owned()
    }

    /// rmcp drops this doc comment, because another attribute follows it; so does the manifest.
    #[allow(clippy::unused_self)]
    #[tool(annotations(read_only_hint = true), meta = team_meta())]
    fn version(&self) -> String {
        "1".to_owned()
    }

    /// Not a tool: left alone.
    #[allow(dead_code)]
    fn helper(&self) -> u8 {
        1
    }
}

#[tool_capabilities(module = other_tools)]
#[tool_router(router = other_router)]
impl OpsServer {
    /// Ping.
    #[tool(annotations(read_only_hint = true))]
    fn ping(&self) -> String {
        "pong".to_owned()
    }
}

#[advisor_agent(tools(
    ops_server_tools::ListPods,
    ops_server_tools::PodLogs,
    other_tools::Ping
))]
struct Viewer;

#[agent(tools(
    ops_server_tools::ListPods,
    ops_server_tools::RestartPod,
    ops_server_tools::Scale
))]
struct Operator;

/// The hints rmcp publishes, resolved with the MCP defaults.
fn published(tool: &rmcp::model::Tool) -> [bool; 4] {
    let a = tool.annotations.clone().unwrap_or_default();
    let read_only = a.read_only_hint.unwrap_or(false);
    [
        read_only,
        // MCP: destructiveHint is meaningful only when the tool is not read-only.
        !read_only && a.destructive_hint.unwrap_or(true),
        a.idempotent_hint.unwrap_or(false),
        a.open_world_hint.unwrap_or(true),
    ]
}

fn hints(m: &CapabilityManifest) -> [bool; 4] {
    [
        m.read_only(),
        m.destructive(),
        m.idempotent(),
        m.open_world(),
    ]
}

#[test]
fn every_listed_tool_has_a_manifest_that_agrees_with_rmcp() {
    let registry = Registry::from_inventory().expect("the inventory is consistent");
    let mut listed = OpsServer::tool_router().list_all();
    listed.extend(OpsServer::other_router().list_all());
    assert_eq!(listed.len(), 7);
    for tool in &listed {
        let manifest = registry
            .tool(&tool.name)
            .unwrap_or_else(|| panic!("no manifest for `{}`", tool.name));
        assert_eq!(hints(manifest), published(tool), "hints of `{}`", tool.name);
        assert_eq!(
            manifest.description(),
            tool.description.as_deref(),
            "description of `{}`",
            tool.name
        );
    }
}

#[test]
fn listed_tools_carry_the_manifests_scopes_and_hash_in_meta() {
    use capability::mcp::export::{MANIFEST_META_KEY, manifest_meta};
    use capability::mcp::{McpManifest, Server};

    let registry = Registry::from_inventory().expect("the inventory is consistent");
    let mut listed = OpsServer::tool_router().list_all();
    listed.extend(OpsServer::other_router().list_all());
    for tool in &listed {
        let manifest = registry.tool(&tool.name).expect("a manifest");
        let meta = tool
            .meta
            .as_ref()
            .unwrap_or_else(|| panic!("`{}` is listed without `_meta`", tool.name));
        assert_eq!(
            meta.0.get(MANIFEST_META_KEY),
            Some(&manifest_meta(manifest)),
            "`_meta` of `{}`",
            tool.name
        );
    }
    let version = listed.iter().find(|t| t.name == "version").expect("listed");
    let meta = version.meta.as_ref().expect("meta");
    assert_eq!(
        meta.0.get("team"),
        Some(&serde_json::json!("sre")),
        "the author's meta stays"
    );

    // Read back from the wire, even from an untrusted server: the scopes a tool requires.
    let restart = listed
        .iter()
        .find(|t| t.name == "restart_pod")
        .expect("listed");
    let json = serde_json::to_value(restart).expect("a tool serializes");
    assert_eq!(
        json["_meta"][MANIFEST_META_KEY]["scopes"],
        serde_json::json!(["k8s:write"])
    );
    let imported =
        CapabilityManifest::from_mcp_tool(&json, &Server::untrusted("ops")).expect("imports");
    assert_eq!(imported.required_scopes(), ["k8s:write".to_owned()]);
}

#[test]
fn generated_types_carry_the_manifests() {
    use ops_server_tools::{Cordon, ListPods, PodLogs, RestartPod, Scale};
    let list = ListPods::manifest();
    assert_eq!(list.name(), "list_pods");
    assert_eq!(list.description(), Some("List the pods\nof the cluster."));
    assert_eq!(hints(list), [true, false, true, false]);
    assert_eq!(list.required_scopes(), ["k8s:read"]);
    assert_eq!(list.provider(), Some("k8s"));
    const { assert!(ListPods::READ_ONLY && PodLogs::READ_ONLY && !RestartPod::READ_ONLY) };

    let logs = PodLogs::manifest();
    assert_eq!(logs.name(), "pod-logs");
    assert_eq!(logs.description(), Some("Read a pod's logs."));

    assert_eq!(hints(RestartPod::manifest()), [false, true, false, true]);
    assert_eq!(RestartPod::manifest().required_scopes(), ["k8s:write"]);
    assert_eq!(hints(Scale::manifest()), [false, true, false, true]);
    assert_eq!(Scale::manifest().description(), None);
    assert_eq!(hints(Cordon::manifest()), [false, false, false, true]);
    assert_eq!(other_tools::Ping::manifest().name(), "ping");
    assert_eq!(ops_server_tools::Version::manifest().description(), None);
}

#[test]
fn the_descriptor_hash_covers_the_parameters_and_differs_per_tool() {
    let hashes: Vec<&str> = [
        ops_server_tools::ListPods::manifest(),
        ops_server_tools::PodLogs::manifest(),
        ops_server_tools::RestartPod::manifest(),
        ops_server_tools::Scale::manifest(),
    ]
    .iter()
    .map(|m| m.descriptor_hash())
    .collect();
    for (i, a) in hashes.iter().enumerate() {
        assert_eq!(a.len(), 64);
        assert!(hashes[i + 1..].iter().all(|b| b != a));
    }
}

#[test]
fn agents_bind_the_generated_types() {
    let viewer = Viewer::spec();
    assert!(viewer.is_advisor());
    let names: Vec<&str> = viewer.tools().iter().map(|t| t.name()).collect();
    assert_eq!(names, ["list_pods", "pod-logs", "ping"]);
    let operator = Operator::spec();
    assert!(!operator.is_advisor());
    assert!(operator.tools()[1].destructive());
}
