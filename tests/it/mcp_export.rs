//! Derived tools exported as MCP `Tool` objects: valid against the official MCP schema, and read
//! back to the same effective flags.

use capability::manifest::HintKind;
use capability::mcp::McpManifest;
use capability::mcp::mcp_tool;
use capability::{Capability, CapabilityManifest, Server};
use serde_json::{Value, json};

/// Run a PromQL query.
#[derive(Capability, schemars::JsonSchema)]
#[capability(read_only, idempotent, open_world = false, scopes = ["metrics:read"])]
#[capability(title = "PromQL query")]
#[allow(dead_code)]
struct PromQuery {
    /// The PromQL expression.
    query: String,
    /// Evaluation time, RFC 3339; now when absent.
    time: Option<String>,
}

/// Restart a pod.
#[derive(Capability, schemars::JsonSchema)]
#[capability(destructive, provider = "k8s", scopes = ["k8s:write"])]
#[allow(dead_code)]
struct RestartPod {
    name: String,
    namespace: String,
}

/// Switch the maintenance mode.
#[derive(Capability, schemars::JsonSchema)]
#[capability(destructive = false, idempotent)]
#[allow(dead_code)]
enum Maintenance {
    On { reason: String },
    Off,
}

/// Ping.
#[derive(Capability, schemars::JsonSchema)]
#[capability(read_only)]
struct Ping;

fn validator() -> jsonschema::Validator {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mcp/schema-2026-07-28.json"
    );
    let text = std::fs::read_to_string(path).expect("the MCP schema fixture");
    let mut schema: Value = serde_json::from_str(&text).expect("JSON");
    schema["$ref"] = json!("#/$defs/Tool");
    jsonschema::draft202012::new(&schema).expect("the MCP schema compiles")
}

fn assert_valid(validator: &jsonschema::Validator, tool: &Value) {
    let errors: Vec<String> = validator.iter_errors(tool).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{tool:#}\nis not a valid MCP Tool: {errors:#?}"
    );
}

#[test]
fn exported_tools_are_valid_mcp_tools() {
    let v = validator();
    for tool in [
        mcp_tool::<PromQuery>(),
        mcp_tool::<RestartPod>(),
        mcp_tool::<Maintenance>(),
        mcp_tool::<Ping>(),
        mcp_tool::<toolkit::ListUsers>(),
        PromQuery::manifest().to_mcp_tool(),
        RestartPod::manifest().to_mcp_tool(),
    ] {
        assert_valid(&v, &tool);
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool:#}");
    }
}

#[test]
fn the_validator_is_not_vacuous() {
    let v = validator();
    for bad in [
        json!({ "name": "x" }),
        json!({ "name": "x", "inputSchema": { "type": "array" } }),
        json!({ "name": 7, "inputSchema": { "type": "object" } }),
        json!({ "name": "x", "inputSchema": { "type": "object" },
                "annotations": { "readOnlyHint": "yes" } }),
    ] {
        assert!(!v.is_valid(&bad), "accepted {bad}");
    }
}

#[test]
fn exported_tools_carry_the_real_schema_and_the_effective_hints() {
    let tool = mcp_tool::<PromQuery>();
    assert_eq!(tool["name"], "prom_query");
    assert_eq!(tool["title"], "PromQL query");
    assert_eq!(tool["description"], "Run a PromQL query.");
    assert_eq!(tool["inputSchema"]["properties"]["query"]["type"], "string");
    assert_eq!(
        tool["annotations"],
        json!({
            "title": "PromQL query",
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false
        })
    );
    let minimal = PromQuery::manifest().to_mcp_tool();
    assert_eq!(minimal["inputSchema"], json!({ "type": "object" }));
    // A unit struct's schema is not an object: the minimal object schema stands in.
    assert_eq!(
        mcp_tool::<Ping>()["inputSchema"],
        json!({ "type": "object" })
    );
}

#[test]
fn exported_tools_read_back_to_the_same_flags() {
    let manifests = [
        PromQuery::manifest(),
        RestartPod::manifest(),
        Maintenance::manifest(),
        Ping::manifest(),
    ];
    for m in manifests {
        let exported = m.to_mcp_tool();
        let provider = m.provider().unwrap_or("local");
        let back = CapabilityManifest::from_mcp_tool(&exported, &Server::trusted(provider))
            .expect("our own export parses");
        for kind in HintKind::ALL {
            assert_eq!(
                back.hint(kind).effective(),
                m.hint(kind).effective(),
                "{kind:?} of {}",
                m.name()
            );
        }
        let untrusted = CapabilityManifest::from_mcp_tool(&exported, &Server::untrusted(provider))
            .expect("parses");
        assert!(!untrusted.read_only());
    }
}

#[test]
fn recorded_reference_server_lists_are_valid_too() {
    let v = validator();
    for file in [
        "server-filesystem.tools.json",
        "server-everything.tools.json",
    ] {
        let path = format!("{}/tests/fixtures/mcp/{file}", env!("CARGO_MANIFEST_DIR"));
        let list: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("JSON");
        for tool in list["tools"].as_array().expect("tools") {
            assert_valid(&v, tool);
        }
    }
}
