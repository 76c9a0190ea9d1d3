//! Item 4 of issue 13: a published tool carries its required scopes and descriptor hash in
//! `_meta["dev.capability/manifest"]`, valid against the MCP schema, and `from_mcp_tool` reads
//! them back as claims: scopes from any server (a restriction), the hash never as a pin.

use capability::authz::{Ceiling, DenyReason, ToolContext};
use capability::mcp::export::MANIFEST_META_KEY;
use capability::mcp::import::claimed_descriptor_hash;
use capability::mcp::{Lockfile, McpManifest, Visibility, mcp_descriptor_hash};
use capability::{Capability, CapabilityManifest, Server};
use serde_json::{Value, json};

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive, provider = "k8s", scopes = ["k8s:write", "k8s:admin"])]
#[allow(dead_code)]
struct RestartPod {
    name: String,
}

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

/// The `_meta` key is documented in docs/mcp.md, and its prefix is a reverse-DNS name as the
/// MCP specification asks of `_meta` keys (labels of letters, digits and hyphens, at least
/// two, starting with a letter), not one of the prefixes it reserves (whose second label is
/// `modelcontextprotocol` or `mcp`).
#[test]
fn the_key_is_documented_and_reverse_dns() {
    assert_eq!(MANIFEST_META_KEY, "dev.capability/manifest");
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/mcp.md"))
        .expect("docs/mcp.md");
    assert!(
        readme.contains(&format!("\"{MANIFEST_META_KEY}\"")),
        "docs/mcp.md documents the key"
    );
    let (prefix, name) = MANIFEST_META_KEY.split_once('/').expect("prefix/name");
    let labels: Vec<&str> = prefix.split('.').collect();
    assert!(
        labels.len() >= 2,
        "{prefix}: a reverse-DNS name has two labels or more"
    );
    for label in &labels {
        let mut chars = label.chars();
        assert!(
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.ends_with('-'),
            "{prefix}: the label `{label}`"
        );
    }
    assert!(
        !matches!(labels.get(1), Some(&"modelcontextprotocol" | &"mcp")),
        "{prefix}: a reserved prefix"
    );
    assert!(
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
        "{name}"
    );
}

#[test]
fn exported_tools_carry_scopes_and_hash_and_stay_valid_mcp() {
    let v = validator();
    let restart = RestartPod::manifest().to_mcp_tool();
    let errors: Vec<String> = v.iter_errors(&restart).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{restart:#}: {errors:#?}");
    assert_eq!(
        restart["_meta"][MANIFEST_META_KEY],
        json!({
            "scopes": ["k8s:admin", "k8s:write"],
            "descriptorHash": RestartPod::manifest().descriptor_hash(),
        })
    );
    // A tool without scopes says so, explicitly.
    let ping = CapabilityManifest::builder("ping")
        .read_only(true)
        .build()
        .expect("valid");
    let tool = ping.to_mcp_tool();
    assert!(v.is_valid(&tool), "{tool:#}");
    assert_eq!(tool["_meta"][MANIFEST_META_KEY]["scopes"], json!([]));
}

#[test]
fn scopes_read_back_from_any_server_and_deny_a_caller_without_them() {
    let exported = RestartPod::manifest().to_mcp_tool();
    for server in [Server::trusted("k8s"), Server::untrusted("k8s")] {
        let back = CapabilityManifest::from_mcp_tool(&exported, &server).expect("valid");
        assert_eq!(
            back.required_scopes(),
            ["k8s:admin", "k8s:write"],
            "{server}"
        );
    }
    let back =
        CapabilityManifest::from_mcp_tool(&exported, &Server::trusted("k8s")).expect("valid");
    let ctx = ToolContext::new("ops", "s-1", Ceiling::Unrestricted).with_scopes(["k8s:write"]);
    let decision = ctx.decide(&back);
    assert!(
        decision.reasons().contains(&DenyReason::MissingScopes {
            scopes: vec!["k8s:admin".to_owned()]
        }),
        "{decision:?}"
    );
}

#[test]
fn the_claimed_hash_is_never_the_pin() {
    let mut exported = RestartPod::manifest().to_mcp_tool();
    exported["_meta"][MANIFEST_META_KEY]["descriptorHash"] = json!("0".repeat(64));
    let server = Server::untrusted("k8s");
    let back = CapabilityManifest::from_mcp_tool(&exported, &server).expect("valid");
    assert_eq!(back.descriptor_hash(), mcp_descriptor_hash(&exported));
    assert_ne!(back.descriptor_hash(), "0".repeat(64));
    assert_eq!(
        claimed_descriptor_hash(&exported),
        Some("0".repeat(64).as_str())
    );

    // A pin is of the tool itself: a lying `_meta` hash does not make a changed tool match.
    let mut lock = Lockfile::default();
    lock.pin(&server, std::slice::from_ref(&exported))
        .expect("pins");
    let mut changed = exported.clone();
    changed["description"] = json!("Restart every pod.");
    changed["_meta"][MANIFEST_META_KEY]["descriptorHash"] = json!(mcp_descriptor_hash(&exported));
    let ctx = ToolContext::new("ops", "s-1", Ceiling::Unrestricted)
        .with_scopes(["k8s:write", "k8s:admin"]);
    let seen = Visibility::of(&server, &[changed], Some(&lock), &ctx).expect("valid");
    assert_eq!(seen.visible().count(), 0, "drift, whatever `_meta` claims");
}

#[test]
fn a_malformed_entry_is_an_error_naming_the_field() {
    for (meta, field) in [
        (json!("nope"), "_meta.dev.capability/manifest"),
        (
            json!({"scopes": "k8s:write"}),
            "_meta.dev.capability/manifest.scopes",
        ),
        (
            json!({"scopes": [7]}),
            "_meta.dev.capability/manifest.scopes[0]",
        ),
        (
            json!({"descriptorHash": 7}),
            "_meta.dev.capability/manifest.descriptorHash",
        ),
    ] {
        let tool = json!({"name": "t", "inputSchema": {"type": "object"},
                          "_meta": {MANIFEST_META_KEY: meta}});
        let error =
            CapabilityManifest::from_mcp_tool(&tool, &Server::trusted("s")).expect_err("malformed");
        assert!(error.to_string().contains(field), "{error}");
    }
    // Other `_meta` keys are ignored, as before.
    let tool = json!({"name": "t", "inputSchema": {"type": "object"},
                      "_meta": {"example.org/x": 1}});
    let m = CapabilityManifest::from_mcp_tool(&tool, &Server::trusted("s")).expect("valid");
    assert!(m.required_scopes().is_empty());
}
