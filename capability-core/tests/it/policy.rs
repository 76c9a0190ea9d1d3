//! The role permission matrix: loading, the one decision function, and the ADR-105 example.

use capability::authz::{Ceiling, DenyReason, Effect, ToolContext};
use capability::mcp::McpManifest;
use capability::{Capability, CapabilityManifest, Policy, Server};
use serde_json::json;

use crate::common;
use common::{Rng, tool};

fn policy(text: &str) -> Policy {
    match Policy::from_toml_str(text) {
        Ok(policy) => policy,
        Err(error) => panic!("policy refused: {error}"),
    }
}

fn error(text: &str) -> (usize, usize, String) {
    let e = Policy::from_toml_str(text).expect_err("must be refused");
    (e.line(), e.column(), e.to_string())
}

#[test]
fn load_errors_have_line_and_column() {
    let (line, column, text) = error("[roles.monitor]\nceiling = \"read-only\"\nalow = [\"*\"]\n");
    assert_eq!((line, column), (3, 1), "{text}");
    assert!(text.contains("unknown field `alow`"), "{text}");

    let (line, column, text) = error("[roles.monitor]\nceiling = \"read-mostly\"\n");
    assert_eq!((line, column), (2, 11), "{text}");
    assert!(
        text.contains("read-only"),
        "the error lists the accepted values: {text}"
    );

    let (line, _, text) = error("[roles.monitor\nceiling = 1\n");
    assert_eq!(line, 1, "{text}");

    let (line, column, text) =
        error("[roles.monitor]\nceiling = \"read-only\"\nallow = [\"k8s/*\", \"k8s /list\"]\n");
    assert_eq!((line, column), (3, 19), "{text}");
    assert!(
        text.contains("tool pattern `k8s /list` contains ' '"),
        "{text}"
    );

    let (line, column, text) =
        error("[roles.monitor]\nceiling = \"read-only\"\nscopes = [\"a:read\", \"\"]\n");
    assert_eq!((line, column), (3, 21), "{text}");
    assert!(text.contains("a scope cannot be empty"), "{text}");

    let (line, _, text) = error("[roles.monitor]\nallow = []\n");
    assert_eq!(line, 1, "{text}");
    assert!(text.contains("missing field `ceiling`"), "{text}");

    let (line, column, text) = error("[assertions.\"k8s/*\"]\nread_only = true\n");
    assert_eq!((line, column), (1, 13), "{text}");
    assert!(text.contains("does not name a tool"), "{text}");

    let (line, _, text) = error("[assertions.\"k8s/x\"]\nreadonly = true\n");
    assert_eq!(line, 2, "{text}");
    assert!(text.contains("unknown field `readonly`"), "{text}");

    assert!(text.starts_with("policy:2:"), "{text}");
}

#[test]
fn role_names_that_are_empty_or_padded_are_refused_with_line_and_column() {
    let (line, column, text) =
        error("version = \"1\"\n[roles.\" monitor\"]\nceiling = \"read-only\"\n");
    assert_eq!((line, column), (2, 8), "{text}");
    assert!(
        text.contains("role name ` monitor` has white space around it; write `monitor`"),
        "{text}"
    );

    let (line, column, text) = error("[roles.\"\"]\nceiling = \"read-only\"\n");
    assert_eq!((line, column), (1, 8), "{text}");
    assert!(text.contains("a role name cannot be empty"), "{text}");

    let (line, column, text) = error(
        "[roles.ok]\nceiling = \"read-only\"\n\n[roles.\"auditor\\t\"]\nceiling = \"read-only\"\n",
    );
    assert_eq!((line, column), (4, 8), "{text}");
    assert!(text.contains("white space around it"), "{text}");

    // The same with the inline-table form.
    let (line, column, text) = error("roles = { \"monitor \" = { ceiling = \"read-only\" } }\n");
    assert_eq!((line, column), (1, 11), "{text}");
    assert!(text.contains("write `monitor`"), "{text}");

    // White space inside a name is a name like any other.
    let p = policy("[roles.\"on call\"]\nceiling = \"read-only\"\nallow = [\"*\"]\n");
    assert_eq!(p.roles().collect::<Vec<_>>(), ["on call"]);
}

#[test]
fn file_errors_name_the_file() {
    let e = Policy::from_toml_file("/nonexistent/policy.toml").expect_err("missing");
    assert!(
        e.to_string()
            .starts_with("/nonexistent/policy.toml: cannot read the policy")
    );
}

#[test]
fn deny_beats_allow_and_nothing_matching_means_deny() {
    let p = policy(
        r#"
        [roles.r]
        ceiling = "unrestricted"
        allow = ["k8s/*"]
        deny = ["k8s/delete_*"]
        scopes = ["k8s:write"]
        "#,
    );
    let delete = tool("k8s", "delete_pod", false, true, &["k8s:write"]);
    let restart = tool("k8s", "restart_pod", false, true, &["k8s:write"]);
    let other = tool("ssh", "exec", false, true, &[]);
    assert!(p.decide("r", &restart).is_allowed());
    assert_eq!(
        p.decide("r", &delete).reasons(),
        [DenyReason::DeniedByPattern {
            pattern: "k8s/delete_*".into()
        }]
    );
    assert_eq!(p.decide("r", &other).reasons(), [DenyReason::NotAllowed]);
    assert_eq!(
        p.decide("nobody", &restart).reasons(),
        [DenyReason::UnknownRole {
            role: "nobody".into()
        }]
    );
    assert!(
        p.context("nobody", "s").is_none(),
        "an unknown role gets no grant"
    );
    assert!(p.visible_tools("nobody", &[restart]).is_empty());
}

/// A policy that lets `r` call everything but `k8s/restart*`.
fn all_but_restarts() -> Policy {
    policy(
        r#"
        [roles.r]
        ceiling = "unrestricted"
        allow = ["*"]
        deny = ["k8s/restart*"]
        "#,
    )
}

fn denied_by_restart_pattern() -> [DenyReason; 1] {
    [DenyReason::DeniedByPattern {
        pattern: "k8s/restart*".into(),
    }]
}

#[test]
fn a_deny_pattern_cannot_be_escaped_by_the_case_of_a_name() {
    let p = all_but_restarts();
    let tools = [
        tool("K8s", "Restart_pod", false, true, &[]),
        tool("k8s", "RESTART_POD", false, true, &[]),
        tool("K8S", "restart_pod", false, true, &[]),
        tool("k8s", "restart_pod", false, true, &[]),
    ];
    let index = p.index(&tools);
    let r = index.role("r").expect("role");
    for (i, t) in tools.iter().enumerate() {
        assert_eq!(
            p.decide("r", t).reasons(),
            denied_by_restart_pattern(),
            "{}",
            t.qualified_name()
        );
        assert!(!index.is_allowed(r, i), "the index: {}", t.qualified_name());
        assert!(p.context("r", "s").expect("role").authorize(t).is_err());
    }
    assert!(p.visible_tools("r", &tools).is_empty());
    assert!(
        p.decide("r", &tool("k8s", "list_pods", true, false, &[]))
            .is_allowed(),
        "other tools stay allowed"
    );
}

#[test]
fn a_deny_pattern_cannot_be_escaped_by_dropping_the_provider() {
    let p = all_but_restarts();
    let bare = |name: &str| {
        CapabilityManifest::builder(name)
            .destructive(true)
            .build()
            .expect("valid")
    };
    let tools = [
        bare("restart_pod"),
        bare("Restart_Deployment"),
        bare("list_pods"),
    ];
    assert_eq!(tools[0].provider(), None);
    assert_eq!(
        p.decide("r", &tools[0]).reasons(),
        denied_by_restart_pattern()
    );
    assert_eq!(
        p.decide("r", &tools[1]).reasons(),
        denied_by_restart_pattern()
    );
    assert!(p.decide("r", &tools[2]).is_allowed());
    let index = p.index(&tools);
    let r = index.role("r").expect("role");
    assert_eq!(
        index
            .visible(r)
            .map(CapabilityManifest::name)
            .collect::<Vec<_>>(),
        ["list_pods"]
    );
}

#[test]
fn allow_patterns_stay_exact_so_a_misspelt_tool_is_denied() {
    let p = policy(
        r#"
        [roles.r]
        ceiling = "unrestricted"
        allow = ["k8s/list_*"]
        "#,
    );
    assert!(
        p.decide("r", &tool("k8s", "list_pods", true, false, &[]))
            .is_allowed()
    );
    for t in [
        tool("K8s", "list_pods", true, false, &[]),
        tool("k8s", "List_pods", true, false, &[]),
        CapabilityManifest::builder("list_pods")
            .read_only(true)
            .build()
            .expect("valid"),
    ] {
        assert_eq!(
            p.decide("r", &t).reasons(),
            [DenyReason::NotAllowed],
            "{}",
            t.qualified_name()
        );
    }
}

#[test]
fn decisions_give_every_reason() {
    let p = policy(
        r#"
        [roles.watcher]
        ceiling = "read-only"
        closed_world_only = true
        allow = ["*"]
        scopes = ["a:read"]
        "#,
    );
    let t = tool("p", "wipe", false, true, &["a:read", "b:write", "c:delete"]);
    let d = p.decide("watcher", &t);
    assert_eq!(
        d.reasons(),
        [
            DenyReason::CeilingExceeded {
                ceiling: Ceiling::ReadOnly,
                effect: Effect::DestructiveWrite
            },
            DenyReason::OpenWorld,
            DenyReason::MissingScopes {
                scopes: vec!["b:write".into(), "c:delete".into()]
            },
        ]
    );
    assert_eq!(
        d.to_string(),
        "denied: its side effect (destructive write) exceeds the role's ceiling (read-only); it \
         reaches an open world and the grant is closed-world only; missing scopes `b:write`, \
         `c:delete`"
    );
    let json = serde_json::to_value(&d).expect("serializes");
    assert_eq!(json["reasons"][0]["reason"], "ceiling_exceeded");
    assert_eq!(json["reasons"][0]["effect"], "destructive-write");
}

#[test]
fn non_destructive_ceiling_allows_additive_writes_only() {
    let p = policy("[roles.w]\nceiling = \"non-destructive\"\nallow = [\"*\"]\n");
    assert!(
        p.decide("w", &tool("p", "append", false, false, &[]))
            .is_allowed()
    );
    assert!(
        p.decide("w", &tool("p", "read", true, false, &[]))
            .is_allowed()
    );
    assert!(
        !p.decide("w", &tool("p", "drop", false, true, &[]))
            .is_allowed()
    );
}

#[test]
fn assertions_change_the_decision_and_untrusted_claims_do_not() {
    let p = policy(
        r#"
        [roles.reader]
        ceiling = "read-only"
        allow = ["*"]

        [assertions."browser/take_screenshot"]
        read_only = false
        destructive = false

        [assertions."files/read_text_file"]
        read_only = true
        "#,
    );
    let screenshot = json!({
        "name": "take_screenshot", "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": true}
    });
    let read = json!({
        "name": "read_text_file", "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": true}
    });
    let shot =
        CapabilityManifest::from_mcp_tool(&screenshot, &Server::trusted("browser")).expect("valid");
    assert!(shot.read_only(), "the server claims read-only");
    assert!(
        !p.decide("reader", &shot).is_allowed(),
        "the operator says it writes"
    );
    assert!(!p.effective_manifest(&shot).read_only());

    let untrusted_read =
        CapabilityManifest::from_mcp_tool(&read, &Server::untrusted("files")).expect("valid");
    assert!(!untrusted_read.read_only(), "untrusted: not believed");
    assert!(
        p.decide("reader", &untrusted_read).is_allowed(),
        "asserted read-only"
    );

    let untrusted_other = CapabilityManifest::from_mcp_tool(
        &json!({"name": "read_other", "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true}}),
        &Server::untrusted("files"),
    )
    .expect("valid");
    assert!(!p.decide("reader", &untrusted_other).is_allowed());
}

/// Restart a pod.
#[derive(Capability)]
#[capability(destructive, provider = "k8s", scopes = ["k8s:write"])]
struct RestartPod;

#[test]
fn tool_context_authorizes_typed_and_dynamic_tools() {
    let ctx = ToolContext::new("operator", "s-1", Ceiling::Unrestricted).with_scopes(["k8s:write"]);
    assert_eq!(ctx.authorize_tool::<RestartPod>(), Ok(()));
    assert_eq!(ctx.role(), "operator");
    assert_eq!(ctx.scopes(), ["k8s:write"]);

    let ctx = ToolContext::new("operator", "s-1", Ceiling::NonDestructive);
    let denial = ctx
        .authorize_tool::<RestartPod>()
        .expect_err("destructive, no scope");
    assert_eq!(denial.tool(), "k8s/restart_pod");
    assert_eq!(
        denial.reasons(),
        [
            DenyReason::CeilingExceeded {
                ceiling: Ceiling::NonDestructive,
                effect: Effect::DestructiveWrite
            },
            DenyReason::MissingScopes {
                scopes: vec!["k8s:write".into()]
            }
        ]
    );

    let closed = ToolContext::new("r", "s", Ceiling::Unrestricted).closed_world_only(true);
    let open = tool("p", "search_web", true, false, &[]);
    assert_eq!(
        closed.authorize(&open).expect_err("open world").reasons(),
        [DenyReason::OpenWorld]
    );
}

// ----- The ADR-105 example policy -----

fn example_policy() -> Policy {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/policy.toml");
    match Policy::from_toml_file(path) {
        Ok(policy) => policy,
        Err(error) => panic!("examples/policy.toml refused: {error}"),
    }
}

/// An ops platform's tools, as they would arrive from the compiler, the builder and MCP.
fn fleet() -> Vec<CapabilityManifest> {
    let mut tools = vec![
        tool("k8s", "list_pods", true, false, &["k8s:read"]),
        tool("k8s", "get_pod_logs", true, false, &["k8s:read"]),
        tool("k8s", "describe_deployment", true, false, &["k8s:read"]),
        tool("k8s", "restart_pod", false, true, &["k8s:write"]),
        tool("k8s", "delete_pod", false, true, &["k8s:delete"]),
        tool("k8s", "scale_deployment", false, false, &["k8s:write"]),
        tool("k8s", "apply_manifest", false, true, &["k8s:write"]),
        tool("k8s", "patch_deployment", false, true, &["k8s:write"]),
        tool("k8s", "exec_in_pod", false, true, &["k8s:exec"]),
        tool("ssh", "ssh_exec", false, true, &["ssh:exec"]),
        tool("prometheus", "query", true, false, &["metrics:read"]),
        tool("prometheus", "query_range", true, false, &["metrics:read"]),
        tool("grafana", "get_dashboard", true, false, &["grafana:read"]),
        tool(
            "grafana",
            "create_annotation",
            false,
            false,
            &["grafana:write"],
        ),
        tool("signoz", "search_traces", true, false, &["traces:read"]),
        tool("database", "run_select", true, false, &["db:read"]),
        tool("rag", "search_runbooks", true, false, &["rag:read"]),
        tool("files", "read_file", true, false, &["fs:read"]),
        tool("files", "write_report", false, false, &["fs:write"]),
        tool("notify", "send_slack", false, false, &["notify:send"]),
        tool("audit", "read_audit_log", true, false, &["audit:read"]),
    ];
    // A Kubernetes MCP server nobody vouched for, claiming its delete is read-only.
    let k8s = Server::untrusted("k8s");
    for (name, read_only) in [("delete_namespace", true), ("get_events", true)] {
        let t = json!({"name": name, "inputSchema": {"type": "object"},
                       "annotations": {"readOnlyHint": read_only}});
        tools.push(CapabilityManifest::from_mcp_tool(&t, &k8s).expect("valid"));
    }
    tools
}

fn visible(policy: &Policy, role: &str, tools: &[CapabilityManifest]) -> Vec<String> {
    policy
        .visible_tools(role, tools)
        .into_iter()
        .map(CapabilityManifest::qualified_name)
        .collect()
}

fn is_k8s_write(t: &CapabilityManifest) -> bool {
    t.provider() == Some("k8s") && !t.read_only()
}

#[test]
fn example_policy_monitor_and_auditor_never_see_or_call_kubernetes_writes() {
    let policy = example_policy();
    let tools = fleet();
    for role in ["monitor", "auditor"] {
        let ctx = policy.context(role, "session").expect("role exists");
        for t in tools.iter().filter(|t| is_k8s_write(t)) {
            assert!(
                ctx.authorize(t).is_err(),
                "{role} may call {}",
                t.qualified_name()
            );
            assert!(!visible(&policy, role, &tools).contains(&t.qualified_name()));
        }
        assert!(
            ctx.authorize(&tools[0]).is_ok(),
            "{role} may call k8s/list_pods"
        );
    }
    let monitor = visible(&policy, "monitor", &tools);
    assert_eq!(
        monitor,
        [
            "k8s/list_pods",
            "k8s/get_pod_logs",
            "k8s/describe_deployment",
            "prometheus/query",
            "prometheus/query_range",
            "grafana/get_dashboard",
            "signoz/search_traces",
        ]
    );
}

#[test]
fn example_policy_analyst_has_no_kubernetes_or_ssh_tool() {
    let policy = example_policy();
    let tools = fleet();
    let analyst = visible(&policy, "analyst", &tools);
    assert_eq!(
        analyst,
        [
            "prometheus/query",
            "prometheus/query_range",
            "database/run_select",
            "rag/search_runbooks",
            "files/read_file",
        ]
    );
    let ctx = policy.context("analyst", "s").expect("role exists");
    for t in tools
        .iter()
        .filter(|t| matches!(t.provider(), Some("k8s" | "ssh")))
    {
        assert!(
            ctx.authorize(t).is_err(),
            "analyst may call {}",
            t.qualified_name()
        );
    }
}

#[test]
fn example_policy_auditor_sees_only_effective_read_only_tools() {
    let policy = example_policy();
    let tools = fleet();
    let shown = policy.visible_tools("auditor", &tools);
    assert!(!shown.is_empty());
    for t in &shown {
        assert!(
            policy.effective_manifest(t).read_only(),
            "{}",
            t.qualified_name()
        );
    }
    assert!(
        !shown.iter().any(|t| t.name() == "delete_namespace"),
        "an untrusted read-only claim does not make a tool visible"
    );
    // Every tool that is read-only in effect, and nothing else: the auditor holds every read
    // scope, and its deny patterns name no read-only tool.
    let read_only: Vec<&CapabilityManifest> = tools.iter().filter(|t| t.read_only()).collect();
    assert_eq!(shown, read_only);
    assert_eq!(shown.len(), 11);
}

#[test]
fn example_policy_operator_may_restart_a_pod() {
    let policy = example_policy();
    let tools = fleet();
    let restart = tools
        .iter()
        .find(|t| t.name() == "restart_pod")
        .expect("listed");
    assert!(restart.destructive() && restart.required_scopes() == ["k8s:write"]);
    assert!(policy.decide("operator", restart).is_allowed());
    assert_eq!(visible(&policy, "operator", &tools).len(), tools.len());
    assert_eq!(policy.version(), Some("adr-105-d2/2026-11-29"));
    let roles: Vec<&str> = policy.roles().collect();
    assert_eq!(roles, ["analyst", "auditor", "monitor", "operator"]);
}

// ----- Property: what is listed equals what is authorized -----

fn random_tool(rng: &mut Rng, i: usize) -> CapabilityManifest {
    const PROVIDERS: &[&str] = &[
        "k8s",
        "ssh",
        "prometheus",
        "grafana",
        "signoz",
        "database",
        "rag",
        "files",
        "filesystem",
        "notify",
        "audit",
        "playwright",
    ];
    const VERBS: &[&str] = &[
        "list", "get", "restart", "delete", "scale", "apply", "patch", "exec", "write", "send",
        "read", "query", "search",
    ];
    const SCOPES: &[&str] = &[
        "k8s:read",
        "k8s:write",
        "k8s:delete",
        "k8s:exec",
        "metrics:read",
        "grafana:read",
        "grafana:write",
        "traces:read",
        "db:read",
        "rag:read",
        "fs:read",
        "fs:write",
        "ssh:exec",
        "notify:send",
        "audit:read",
        "other:read",
    ];
    let mut provider = (*rng.pick(PROVIDERS)).to_owned();
    let mut name = format!("{}_{i}", rng.pick(VERBS));
    // Some tools spell their names in another case, to try to slip past `deny` patterns.
    if rng.chance(15) {
        name = random_case(rng, &name);
    }
    if rng.chance(10) {
        provider = random_case(rng, &provider);
    }
    // Some have no provider at all (built without one).
    let provider = (!rng.chance(10)).then_some(provider);
    if rng.chance(30) && provider.is_some() {
        let provider = provider.unwrap_or_default();
        // An MCP tool, from a trusted or an untrusted server, with or without annotations.
        let mut annotations = serde_json::Map::new();
        for key in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            if rng.chance(60) {
                annotations.insert(key.into(), json!(rng.chance(50)));
            }
        }
        let t =
            json!({"name": name, "inputSchema": {"type": "object"}, "annotations": annotations});
        let server = if rng.chance(50) {
            Server::trusted(provider)
        } else {
            Server::untrusted(provider)
        };
        return CapabilityManifest::from_mcp_tool(&t, &server).expect("valid");
    }
    let mut b = CapabilityManifest::builder(name);
    if let Some(provider) = provider {
        b = b.provider(provider);
    }
    let read_only = rng.chance(50);
    if read_only {
        b = b.read_only(true);
    } else if rng.chance(70) {
        b = b.destructive(rng.chance(50));
    }
    if rng.chance(30) {
        b = b.open_world(false);
    }
    for _ in 0..(rng.next() % 3) {
        let scope = *rng.pick(SCOPES);
        if !(read_only && capability_verb_mutates(scope)) {
            b = b.scope(scope);
        }
    }
    b.build().expect("valid")
}

/// `text` with each ASCII letter in a random case.
fn random_case(rng: &mut Rng, text: &str) -> String {
    text.chars()
        .map(|c| {
            if rng.chance(50) {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

fn capability_verb_mutates(scope: &str) -> bool {
    ["write", "delete", "exec", "send"]
        .iter()
        .any(|v| scope.ends_with(v))
}

#[test]
fn property_listing_equals_authorization_for_every_role() {
    let example = example_policy();
    let closed = policy(
        r#"
        [roles.closed]
        ceiling = "non-destructive"
        closed_world_only = true
        allow = ["*/list_*", "*/get_*", "files/*", "get_*"]
        deny = ["files/write_*", "K8S/Get_*"]
        scopes = ["fs:read", "fs:write", "k8s:read"]
        "#,
    );
    for seed in 1..=200u64 {
        let mut rng = Rng::seeded(seed);
        let count = (rng.next() % 40) as usize;
        let tools: Vec<CapabilityManifest> = (0..count).map(|i| random_tool(&mut rng, i)).collect();
        for (policy, roles) in [
            (
                &example,
                &["operator", "monitor", "analyst", "auditor", "unknown"][..],
            ),
            (&closed, &["closed", "operator"][..]),
        ] {
            for role in roles {
                let listed: Vec<&CapabilityManifest> = policy.visible_tools(role, &tools);
                let authorized: Vec<&CapabilityManifest> = match policy.context(role, "s") {
                    Some(ctx) => tools.iter().filter(|t| ctx.authorize(t).is_ok()).collect(),
                    None => Vec::new(),
                };
                let decided: Vec<&CapabilityManifest> = tools
                    .iter()
                    .filter(|t| policy.decide(role, t).is_allowed())
                    .collect();
                let index = policy.index(&tools);
                let indexed: Vec<&CapabilityManifest> = match index.role(role) {
                    Some(id) => index.visible(id).collect(),
                    None => Vec::new(),
                };
                assert_eq!(listed, authorized, "seed {seed}, role {role}");
                assert_eq!(listed, decided, "seed {seed}, role {role}");
                assert_eq!(
                    listed, indexed,
                    "seed {seed}, role {role}: the compiled index"
                );
                if let Some(id) = index.role(role) {
                    for (i, t) in tools.iter().enumerate() {
                        assert_eq!(index.decide(id, i), policy.decide(role, t));
                    }
                    assert!(!index.is_allowed(id, tools.len()), "out of range is denied");
                }
                // The ceilings hold on every listed tool.
                if matches!(*role, "monitor" | "analyst" | "auditor") {
                    for t in &listed {
                        assert!(policy.effective_manifest(t).read_only(), "seed {seed}");
                    }
                }
            }
        }
    }
}

/// The reading of patterns the policy documents, written here independently of the library: a
/// plain recursive glob. `allow` compares exactly; `deny` ignores ASCII case and, for a tool
/// without a provider, compares only the pattern's tool part.
fn reference_glob(pattern: &str, subject: &str) -> bool {
    fn go(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len()).any(|i| go(rest, &s[i..])),
            Some((b'?', rest)) => !s.is_empty() && go(rest, &s[1..]),
            Some((c, rest)) => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    go(pattern.as_bytes(), subject.as_bytes())
}

fn reference_allows(pattern: &str, t: &CapabilityManifest) -> bool {
    reference_glob(pattern, &t.qualified_name())
}

fn reference_denies(pattern: &str, t: &CapabilityManifest) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    match (t.provider(), pattern.split_once('/')) {
        (None, Some((_, tool_part))) => reference_glob(tool_part, &t.name().to_ascii_lowercase()),
        _ => reference_glob(&pattern, &t.qualified_name().to_ascii_lowercase()),
    }
}

#[test]
fn property_random_patterns_index_and_decision_agree_with_the_documented_reading() {
    const ALLOW: &[&str] = &[
        "*",
        "k8s/*",
        "*/list_*",
        "*/get_*",
        "files/*",
        "list_*",
        "K8s/*",
        "*_1?",
        "prometheus/q*",
        "*/*",
        "get_*",
        "k8s/restart_*",
    ];
    const DENY: &[&str] = &[
        "k8s/restart*",
        "K8S/DELETE_*",
        "*/exec*",
        "ssh/*",
        "files/write_*",
        "*/Send_*",
        "delete_*",
        "*/*_3",
        "Database/*",
        "?8s/scale_*",
        "*PATCH*",
    ];
    const CEILINGS: &[&str] = &["read-only", "non-destructive", "unrestricted"];
    const SCOPES: &[&str] = &[
        "k8s:read",
        "k8s:write",
        "fs:read",
        "fs:write",
        "metrics:read",
    ];
    let quoted = |items: Vec<&str>| {
        items
            .iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (mut pairs, mut allowed, mut denied_by_pattern) = (0, 0, 0);
    for seed in 1..=300u64 {
        let mut rng = Rng::seeded(seed);
        let mut text = String::new();
        let mut rules: Vec<(String, Vec<&str>, Vec<&str>)> = Vec::new();
        let roles = 1 + rng.next() % 3;
        for r in 0..roles {
            let allow: Vec<&str> = ALLOW.iter().copied().filter(|_| rng.chance(25)).collect();
            let deny: Vec<&str> = DENY.iter().copied().filter(|_| rng.chance(20)).collect();
            let scopes: Vec<&str> = SCOPES.iter().copied().filter(|_| rng.chance(60)).collect();
            rules.push((format!("r{r}"), allow.clone(), deny.clone()));
            text += &format!(
                "[roles.r{r}]\nceiling = \"{}\"\nclosed_world_only = {}\nallow = [{}]\n\
                 deny = [{}]\nscopes = [{}]\n",
                rng.pick(CEILINGS),
                rng.chance(20),
                quoted(allow),
                quoted(deny),
                quoted(scopes)
            );
        }
        let p = policy(&text);
        let count = (rng.next() % 40) as usize;
        let tools: Vec<CapabilityManifest> = (0..count).map(|i| random_tool(&mut rng, i)).collect();
        let index = p.index(&tools);
        for (role, allow, deny) in &rules {
            let id = index.role(role).expect("role");
            for (i, t) in tools.iter().enumerate() {
                let decision = p.decide(role, t);
                let what = format!("seed {seed}, role {role}, tool {}", t.qualified_name());
                assert_eq!(index.is_allowed(id, i), decision.is_allowed(), "{what}");
                assert_eq!(index.decide(id, i), decision, "{what}");
                let reference_deny = deny.iter().find(|d| reference_denies(d, t));
                let reference_allow = allow.iter().any(|a| reference_allows(a, t));
                let by_pattern = decision.reasons().iter().find(|r| {
                    matches!(
                        r,
                        DenyReason::DeniedByPattern { .. } | DenyReason::NotAllowed
                    )
                });
                match (reference_deny, reference_allow) {
                    (Some(pattern), _) => {
                        denied_by_pattern += 1;
                        assert_eq!(
                            by_pattern,
                            Some(&DenyReason::DeniedByPattern {
                                pattern: (*pattern).to_owned()
                            }),
                            "{what}"
                        );
                    }
                    (None, false) => {
                        assert_eq!(by_pattern, Some(&DenyReason::NotAllowed), "{what}")
                    }
                    (None, true) => assert_eq!(by_pattern, None, "{what}"),
                }
                allowed += usize::from(decision.is_allowed());
                pairs += 1;
            }
        }
    }
    assert!(
        pairs > 5_000 && allowed > 300 && denied_by_pattern > 300,
        "{pairs} pairs, {allowed} allowed, {denied_by_pattern} denied by a pattern"
    );
}

#[test]
fn index_handles_more_scopes_than_one_word() {
    let scopes: Vec<String> = (0..150).map(|i| format!("\"s{i}:read\"")).collect();
    let text = format!(
        "[roles.wide]\nceiling = \"read-only\"\nallow = [\"*\"]\nscopes = [{}]\n\
         [roles.narrow]\nceiling = \"read-only\"\nallow = [\"*\"]\nscopes = [\"s0:read\"]\n",
        scopes.join(", ")
    );
    let p = policy(&text);
    let needs = |scopes: &[&str]| {
        CapabilityManifest::builder("t")
            .read_only(true)
            .scopes(scopes.iter().copied())
            .build()
            .expect("valid")
    };
    let tools = [
        needs(&["s149:read"]),
        needs(&["s0:read", "s70:read", "s140:read"]),
        needs(&["s0:read"]),
        needs(&["unknown:read"]),
        needs(&[]),
    ];
    let index = p.index(&tools);
    let wide = index.role("wide").expect("role");
    let narrow = index.role("narrow").expect("role");
    let allowed = |role| {
        (0..tools.len())
            .map(|i| index.is_allowed(role, i))
            .collect::<Vec<_>>()
    };
    assert_eq!(allowed(wide), [true, true, true, false, true]);
    assert_eq!(allowed(narrow), [false, false, true, false, true]);
    for (i, t) in tools.iter().enumerate() {
        assert_eq!(index.is_allowed(wide, i), p.decide("wide", t).is_allowed());
        assert_eq!(
            index.is_allowed(narrow, i),
            p.decide("narrow", t).is_allowed()
        );
    }
}

// ----- The `[bearer_tokens]` table -----

/// `printf %s "test" | sha256sum`
const TEST_SHA256: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

fn with_tokens(table: &str) -> String {
    format!("[roles.viewer]\nceiling = \"read-only\"\nallow = [\"*\"]\n\n[bearer_tokens]\n{table}")
}

#[test]
fn bearer_tokens_map_a_token_hash_to_a_role_of_the_policy() {
    let upper = TEST_SHA256.to_ascii_uppercase();
    let with = policy(&with_tokens(&format!("\"sha256:{upper}\" = \"viewer\"\n")));
    let tokens: Vec<(&str, &str)> = with.bearer_tokens().collect();
    assert_eq!(
        tokens,
        [(TEST_SHA256, "viewer")],
        "the hash is kept in lowercase"
    );
    assert_eq!(policy(POLICY_WITHOUT_TOKENS).bearer_tokens().len(), 0);
}

const POLICY_WITHOUT_TOKENS: &str = "[roles.viewer]\nceiling = \"read-only\"\n";

#[test]
fn a_bearer_token_of_an_unknown_role_is_refused_where_it_is_written() {
    let (line, column, message) = error(&with_tokens(&format!(
        "\"sha256:{TEST_SHA256}\" = \"admin\"\n"
    )));
    assert_eq!((line, column), (6, 77), "{message}");
    assert!(
        message.contains("`admin`") && message.contains("no such role"),
        "{message}"
    );
}

#[test]
fn a_bearer_token_that_is_not_a_sha256_is_refused() {
    let short = &TEST_SHA256[..63];
    let not_hex = format!("z{}", &TEST_SHA256[1..]);
    for key in [
        TEST_SHA256.to_owned(),           // no `sha256:`
        "test".to_owned(),                // a token, not its hash
        format!("sha256:{short}"),        // 63 digits
        format!("sha256:{not_hex}"),      // not hex
        format!("sha512:{TEST_SHA256}"),  // another algorithm
        format!("sha256:{TEST_SHA256} "), // white space
    ] {
        let (line, column, message) = error(&with_tokens(&format!("\"{key}\" = \"viewer\"\n")));
        assert_eq!((line, column), (6, 1), "{key}: {message}");
        assert!(message.contains("sha256sum"), "{key}: {message}");
    }
}

#[test]
fn one_token_hash_listed_twice_is_refused() {
    let upper = TEST_SHA256.to_ascii_uppercase();
    let text = with_tokens(&format!(
        "\"sha256:{TEST_SHA256}\" = \"viewer\"\n\"sha256:{upper}\" = \"viewer\"\n"
    ));
    let (_, _, message) = error(&text);
    assert!(message.contains("twice"), "{message}");
}

#[test]
fn a_server_entry_says_what_the_proxy_forwards_besides_tools() {
    let policy = Policy::from_toml_str(
        "[servers.docs]\nforward = [\"resources\"]\n\n[servers.fs]\ncommand = [\"fs-server\"]\n",
    )
    .expect("valid");
    let docs = &policy.servers()[0];
    assert_eq!(docs.name(), "docs");
    assert!(docs.forwards_resources());
    assert!(!docs.forwards_prompts());
    let fs = &policy.servers()[1];
    assert!(
        !fs.forwards_resources() && !fs.forwards_prompts(),
        "tools only by default"
    );

    let error = Policy::from_toml_str("[servers.docs]\nforward = [\"resources\", \"sampling\"]\n")
        .expect_err("only resources and prompts");
    let text = error.to_string();
    assert!(text.contains("2:11"), "{text}");
    assert!(
        text.contains("`forward` takes \"resources\" and \"prompts\" (tools are always governed), not `sampling`"),
        "{text}"
    );
}

#[test]
fn a_server_entry_says_what_a_fleet_needs() {
    let policy = Policy::from_toml_str(
        r#"
[servers.git]
command = ["uvx", "mcp-server-git"]
env = { GIT_CONFIG_NOSYSTEM = "1", HOME = "/tmp/git-home" }
trust = "untrusted"
lock = "locks/git.lock"
prefix = "git."

[servers.search]
url = "https://search.example/mcp"
trust = "trusted"

[servers.time]
command = ["uvx", "mcp-server-time"]
prefix = ""
"#,
    )
    .expect("valid");
    let [git, search, time] = policy.servers() else {
        panic!("three servers")
    };
    assert_eq!(
        git.env(),
        [
            ("GIT_CONFIG_NOSYSTEM".to_owned(), "1".to_owned()),
            ("HOME".to_owned(), "/tmp/git-home".to_owned())
        ]
    );
    assert_eq!(
        (git.trusted(), git.lock(), git.prefix().as_str()),
        (Some(false), Some("locks/git.lock"), "git.")
    );
    assert_eq!(
        (search.url(), search.trusted()),
        (Some("https://search.example/mcp"), Some(true))
    );
    assert_eq!(
        search.prefix(),
        "search_",
        "the default prefix: the name and `_`"
    );
    assert_eq!(time.prefix(), "", "none, when the operator says so");
    assert_eq!(time.trusted(), None);

    // Each mistake is refused where it is, naming the server.
    for (entry, at, says) in [
        (
            "command = [\"a\"]\nurl = \"http://h/mcp\"",
            "3:7",
            "give `command` (a spawned server) or `url`, not both",
        ),
        (
            "url = \"ftp://h/mcp\"",
            "2:7",
            "`url` must be an http:// or https:// URL with a host",
        ),
        (
            "url = \"http:///mcp\"",
            "2:7",
            "`url` must be an http:// or https:// URL with a host",
        ),
        (
            "url = \"http://h/mcp\"\nenv = { A = \"1\" }",
            "3:7",
            "`env` is for a spawned server",
        ),
        (
            "command = [\"a\"]\nenv = { \"A=B\" = \"1\" }",
            "3:7",
            "is not one a process can have",
        ),
        (
            "command = [\"a\"]\ntrust = \"yes\"",
            "3:9",
            "`trust` is \"trusted\" or \"untrusted\", not \"yes\"",
        ),
        (
            "command = [\"a\"]\nprefix = \"k8s/\"",
            "3:10",
            "`prefix` is at most 64 of A-Z a-z 0-9 _ - .",
        ),
        ("command = [\"a\"]\nlock = \"\"", "3:8", "`lock` is empty"),
        (
            "command = \"npx -y @modelcontextprotocol/server-memory\"",
            "2:11",
            "`command` is a list of words, the program first, not one string: write `command = \
             [\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"]`",
        ),
        (
            "command = [\"node\", 3]",
            "2:11",
            "`command` is a list of strings, the program first, then its arguments",
        ),
        ("command = []", "2:11", "`command` names a program first"),
    ] {
        let text = format!("[servers.x]\n{entry}\n");
        let error = Policy::from_toml_str(&text).expect_err(entry).to_string();
        assert!(
            error.contains(at) && error.contains("server `x`") && error.contains(says),
            "{entry}: {error}"
        );
    }
    let unknown = Policy::from_toml_str("[servers.x]\ncommand = [\"a\"]\nenviron = {}\n")
        .expect_err("unknown key")
        .to_string();
    assert!(unknown.contains("environ"), "{unknown}");
}
