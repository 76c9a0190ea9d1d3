//! Fixtures shared by the benchmarks: deterministic, so every run measures the same data.

#![allow(dead_code)]

use capability::mcp::McpManifest;
use capability::{CapabilityManifest, Policy, Server};
use serde_json::{Value, json};

/// The ADR-105 example policy of the repository.
pub fn example_policy() -> Policy {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/policy.toml");
    match Policy::from_toml_file(path) {
        Ok(policy) => policy,
        Err(error) => panic!("{error}"),
    }
}

// The same deterministic generator the tests use.
pub use capability_testkit::Rng;

const PROVIDERS: &[&str] = &[
    "k8s",
    "ssh",
    "prometheus",
    "grafana",
    "signoz",
    "database",
    "rag",
    "files",
    "notify",
    "audit",
];
const READS: &[&str] = &["list", "get", "describe", "query", "search", "read"];
const WRITES: &[&str] = &[
    "restart", "delete", "scale", "apply", "patch", "exec", "write", "send", "create",
];
const READ_SCOPES: &[&str] = &[
    "k8s:read",
    "metrics:read",
    "grafana:read",
    "traces:read",
    "db:read",
    "rag:read",
    "fs:read",
    "audit:read",
];
const WRITE_SCOPES: &[&str] = &[
    "k8s:write",
    "k8s:delete",
    "grafana:write",
    "fs:write",
    "ssh:exec",
    "notify:send",
];

/// `count` tools of an ops platform, built with the manifest builder.
pub fn tools(count: usize) -> Vec<CapabilityManifest> {
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    (0..count)
        .map(|i| {
            let provider = *rng.pick(PROVIDERS);
            let read_only = rng.chance(55);
            let verb = if read_only {
                rng.pick(READS)
            } else {
                rng.pick(WRITES)
            };
            let mut b = CapabilityManifest::builder(format!("{verb}_{i}")).provider(provider);
            b = if read_only {
                b.read_only(true).scope(*rng.pick(READ_SCOPES))
            } else {
                b.destructive(rng.chance(60)).scope(*rng.pick(WRITE_SCOPES))
            };
            if rng.chance(25) {
                b = b.open_world(false);
            }
            if rng.chance(5) {
                b = b.scope("nobody:read");
            }
            match b.build() {
                Ok(tool) => tool,
                Err(error) => panic!("{error}"),
            }
        })
        .collect()
}

/// One MCP tool descriptor of about 1.5 KiB, as servers list them.
pub fn mcp_tool(i: usize, rng: &mut Rng) -> Value {
    let provider_verb = if rng.chance(55) {
        rng.pick(READS)
    } else {
        rng.pick(WRITES)
    };
    let mut properties = serde_json::Map::new();
    for p in 0..6 {
        properties.insert(
            format!("param_{p}"),
            json!({
                "type": if p % 2 == 0 { "string" } else { "integer" },
                "description": format!(
                    "Parameter {p} of tool {i}: what it selects, its unit, and the default when \
                     it is left out."
                ),
            }),
        );
    }
    let read_only = rng.chance(55);
    json!({
        "name": format!("{provider_verb}_resource_{i}"),
        "title": format!("Tool number {i}"),
        "description": format!(
            "Tool {i} of the benchmark server. It works on one resource at a time, returns a \
             structured result with the fields the caller asked for, and reports errors as \
             text the model can read. Rate-limited to ten calls a second."
        ),
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "required": ["param_0", "param_1"],
            "additionalProperties": false
        },
        "annotations": {
            "title": format!("Tool number {i}"),
            "readOnlyHint": read_only,
            "destructiveHint": !read_only && rng.chance(50),
            "idempotentHint": rng.chance(50),
            "openWorldHint": rng.chance(50)
        },
        "_meta": { "bench/index": i }
    })
}

/// A `tools/list` result with `count` tools, as JSON text.
pub fn tools_list_text(count: usize) -> String {
    let mut rng = Rng(0xdead_beef_1234_5678);
    let tools: Vec<Value> = (0..count).map(|i| mcp_tool(i, &mut rng)).collect();
    json!({ "tools": tools }).to_string()
}

/// The manifests of a parsed `tools/list` result.
pub fn manifests(list: &Value, server: &Server) -> Vec<CapabilityManifest> {
    let empty = Vec::new();
    let tools = list["tools"].as_array().unwrap_or(&empty);
    tools
        .iter()
        .filter_map(|tool| CapabilityManifest::from_mcp_tool(tool, server).ok())
        .collect()
}
