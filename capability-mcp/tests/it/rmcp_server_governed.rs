//! `capability::rmcp::GovernedServer` (issue 13, item 3): an in-process rmcp server (over
//! `tokio::io::duplex`) wrapped by the governed server, listed and called with rmcp's own
//! client as several roles. Streamable HTTP (bearer tokens) is not covered here yet.

#![cfg(feature = "rmcp-server")]

use std::sync::{Arc, Mutex};

use capability::audit::{AuditedDispatch, Budget, MemorySink, Phase, Verdict};
use capability::mcp::Lockfile;
use capability::rmcp::{FixedRole, GovernedServer, REFUSED_CODE, RoleResolver, connect_client};
use capability::{Policy, Server};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
    ClientConfig, ContentBlock, ErrorData, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{RoleClient, RoleServer, ServerHandler, ServiceError, ServiceExt};
use serde_json::{Value, json};

const POLICY: &str = r#"
version = "2026-11"

[roles.operator]
ceiling = "unrestricted"
allow = ["*"]
scopes = ["k8s:scale", "k8s:write"]

[roles.viewer]
ceiling = "read-only"
allow = ["*"]

[roles.junior]
ceiling = "non-destructive"
allow = ["*"]
scopes = ["k8s:read"]
"#;

fn tool_json() -> Vec<Value> {
    vec![
        json!({"name": "list_pods", "description": "List pods.", "inputSchema": {"type": "object"},
               "annotations": {"readOnlyHint": true, "openWorldHint": false}}),
        json!({"name": "restart_pod", "description": "Restart a pod.",
               "inputSchema": {"type": "object"},
               "annotations": {"destructiveHint": true, "openWorldHint": false}}),
        json!({"name": "get_logs", "description": "Read logs.", "inputSchema": {"type": "object"},
               "annotations": {"readOnlyHint": true, "openWorldHint": false}}),
        json!({"name": "scale_deployment", "description": "Scale a deployment.",
               "inputSchema": {"type": "object"},
               "annotations": {"readOnlyHint": false, "destructiveHint": false,
                               "openWorldHint": false},
               "_meta": {"dev.capability/manifest": {"scopes": ["k8s:write", "k8s:scale"]}}}),
        json!({"name": "fetch_url", "description": "Fetch a URL.",
               "inputSchema": {"type": "object"},
               "annotations": {"readOnlyHint": true, "openWorldHint": true}}),
    ]
}

/// The inner server: lists its tools two per page, records every call.
#[derive(Clone)]
struct Ops {
    tools: Arc<Vec<Tool>>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl Ops {
    fn new() -> Self {
        let tools = tool_json()
            .into_iter()
            .map(|v| serde_json::from_value(v).expect("a valid rmcp tool"))
            .collect();
        Ops {
            tools: Arc::new(tools),
            calls: Arc::default(),
        }
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("not poisoned").clone()
    }
}

impl ServerHandler for Ops {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ops", "1.0.0"))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .map_err(|_| ErrorData::invalid_params("bad cursor", None))?,
        };
        let end = (start + 2).min(self.tools.len());
        let mut page = ListToolsResult::with_all_items(self.tools[start..end].to_vec());
        page.next_cursor = (end < self.tools.len()).then(|| end.to_string());
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.calls
            .lock()
            .expect("not poisoned")
            .push(request.name.to_string());
        Ok(
            CallToolResult::success(vec![ContentBlock::text(format!("ran {}", request.name))])
                .into(),
        )
    }
}

/// A resolver that finds no role.
struct Anonymous;

impl RoleResolver for Anonymous {
    fn role(&self, _context: &RequestContext<RoleServer>) -> Option<String> {
        None
    }
}

struct Harness {
    ops: Ops,
    sink: Arc<MemorySink>,
    dispatch: Arc<AuditedDispatch>,
    policy: Arc<Policy>,
    lock: Option<Arc<Lockfile>>,
}

impl Harness {
    fn new() -> Self {
        let sink = Arc::new(MemorySink::new());
        let dispatch = AuditedDispatch::new(sink.clone()).with_budget(Budget {
            max_calls: 1000,
            max_denials: 1000,
        });
        Harness {
            ops: Ops::new(),
            sink,
            dispatch: Arc::new(dispatch),
            policy: Arc::new(Policy::from_toml_str(POLICY).expect("valid policy")),
            lock: None,
        }
    }

    /// A client of the governed server, as `resolver` resolves it; `discover`: the 2026-07-28
    /// lifecycle (`connect_client`), else rmcp's default `initialize` handshake.
    async fn client(
        &self,
        resolver: impl RoleResolver,
        discover: bool,
    ) -> RunningService<RoleClient, ClientConfig> {
        let mut governed = GovernedServer::new(
            self.ops.clone(),
            Server::trusted("k8s"),
            self.policy.clone(),
            resolver,
            self.dispatch.clone(),
        );
        if let Some(lock) = &self.lock {
            governed = governed.with_lockfile(lock.clone());
        }
        let (server_side, client_side) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            if let Ok(running) = governed.serve(server_side).await {
                let _ = running.waiting().await;
            }
        });
        if discover {
            connect_client(client_side).await.expect("connects")
        } else {
            ClientConfig::new(
                ClientCapabilities::default(),
                Implementation::new("rmcp-test-client", "1.0.0"),
            )
            .serve(client_side)
            .await
            .expect("connects")
        }
    }
}

fn names(result: &ListToolsResult) -> Vec<&str> {
    result.tools.iter().map(|t| t.name.as_ref()).collect()
}

/// The JSON-RPC error of a refused call.
async fn refused(client: &RunningService<RoleClient, ClientConfig>, tool: &str) -> ErrorData {
    let tool = tool.to_owned();
    match client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.clone()))
        .await
    {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("`{tool}` was not refused: {other:?}"),
    }
}

fn reasons(error: &ErrorData) -> Vec<String> {
    let data = error.data.as_ref().expect("data");
    data["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .map(|r| r["reason"].as_str().expect("a reason tag").to_owned())
        .collect()
}

#[tokio::test]
async fn operator_sees_every_tool_and_viewer_exactly_the_read_only_ones() {
    let h = Harness::new();
    for discover in [false, true] {
        let operator = h.client(FixedRole::new("operator"), discover).await;
        let all = operator.peer().list_tools(None).await.expect("lists");
        assert_eq!(
            names(&all),
            [
                "list_pods",
                "restart_pod",
                "get_logs",
                "scale_deployment",
                "fetch_url"
            ],
            "every page of the inner list"
        );
        assert_eq!(all.next_cursor, None, "one page");
        assert_eq!(
            all.cache_scope,
            Some(CacheScope::Private),
            "depends on who asks"
        );

        let viewer = h.client(FixedRole::new("viewer"), discover).await;
        let shown = viewer.peer().list_tools(None).await.expect("lists");
        assert_eq!(names(&shown), ["list_pods", "get_logs", "fetch_url"]);
        assert_eq!(shown.cache_scope, Some(CacheScope::Private), "filtered");
        for tool in &shown.tools {
            let annotations = tool.annotations.as_ref().expect("annotated");
            assert_eq!(annotations.read_only_hint, Some(true), "{}", tool.name);
        }
        let _ = operator.cancel().await;
        let _ = viewer.cancel().await;
    }
    assert!(h.ops.calls().is_empty(), "listing calls nothing");
}

#[tokio::test]
async fn a_hidden_tool_is_refused_with_its_reasons_and_never_reaches_the_handler() {
    let h = Harness::new();
    let viewer = h.client(FixedRole::new("viewer"), false).await;
    let error = refused(&viewer, "restart_pod").await;
    assert_eq!(error.code.0, REFUSED_CODE);
    assert_eq!(reasons(&error), ["ceiling_exceeded"]);
    let data = error.data.as_ref().expect("data");
    assert_eq!(data["tool"], "restart_pod");
    assert_eq!(data["role"], "viewer");
    assert_eq!(
        data["reasons"][0]["message"],
        "its side effect (destructive write) exceeds the role's ceiling (read-only)"
    );
    assert!(data.get("error").is_none(), "no step-up for a ceiling");
    assert!(error.message.contains("restart_pod"), "{}", error.message);

    // A tool the server does not list, and one with a name no tool may have.
    assert_eq!(
        reasons(&refused(&viewer, "exfiltrate").await),
        ["not_listed"]
    );
    assert_eq!(
        reasons(&refused(&viewer, "no such tool!").await),
        ["not_listed"]
    );
    assert!(
        h.ops.calls().is_empty(),
        "the inner handler was never called"
    );

    // What it may call runs.
    let result = viewer
        .peer()
        .call_tool(CallToolRequestParams::new("list_pods"))
        .await
        .expect("allowed");
    assert_eq!(
        result.content[0].as_text().map(|t| t.text.as_str()),
        Some("ran list_pods")
    );
    assert_eq!(h.ops.calls(), ["list_pods"]);
    let _ = viewer.cancel().await;
}

#[tokio::test]
async fn every_call_is_in_the_audit_trail_with_its_role() {
    let h = Harness::new();
    let operator = h.client(FixedRole::new("operator"), false).await;
    let viewer = h.client(FixedRole::new("viewer"), false).await;
    operator
        .peer()
        .call_tool(CallToolRequestParams::new("restart_pod"))
        .await
        .expect("allowed");
    refused(&viewer, "restart_pod").await;
    refused(&viewer, "exfiltrate").await;
    viewer
        .peer()
        .call_tool(CallToolRequestParams::new("get_logs"))
        .await
        .expect("allowed");

    // One entry per call: the outcome of a call that ran (its intent came first), the one
    // record of a refused call.
    let records = h.sink.records();
    let intents = records
        .iter()
        .filter(|r| r.phase == Some(Phase::Intent))
        .count();
    assert_eq!(intents, 2, "the two calls that ran");
    let trail: Vec<(String, String, Verdict, String)> = records
        .into_iter()
        .filter(|r| r.phase != Some(Phase::Intent))
        .map(|r| (r.role, r.tool, r.verdict, r.session))
        .collect();
    let s = |t: &str| t.to_owned();
    assert_eq!(
        trail,
        [
            (
                s("operator"),
                s("restart_pod"),
                Verdict::Allowed,
                s("mcp:k8s/operator")
            ),
            (
                s("viewer"),
                s("restart_pod"),
                Verdict::Denied,
                s("mcp:k8s/viewer")
            ),
            (
                s("viewer"),
                s("exfiltrate"),
                Verdict::Denied,
                s("mcp:k8s/viewer")
            ),
            (
                s("viewer"),
                s("get_logs"),
                Verdict::Allowed,
                s("mcp:k8s/viewer")
            ),
        ]
    );
    let records = h.sink.records();
    assert_eq!(records[0].phase, Some(Phase::Intent));
    assert_eq!(records[0].method.as_deref(), Some("tools/call"));
    assert_eq!(records[1].agent, "rmcp-test-client");
    assert_eq!(records[1].provider.as_deref(), Some("k8s"));
    assert!(
        records[1].output_digest.is_some(),
        "the outcome is recorded"
    );
    assert_eq!(h.ops.calls(), ["restart_pod", "get_logs"]);
    let _ = operator.cancel().await;
    let _ = viewer.cancel().await;
}

#[tokio::test]
async fn missing_scopes_come_all_at_once_as_a_step_up_challenge() {
    let h = Harness::new();
    let junior = h.client(FixedRole::new("junior"), false).await;
    let shown = junior.peer().list_tools(None).await.expect("lists");
    assert!(
        !names(&shown).contains(&"scale_deployment"),
        "hidden for lack of scopes"
    );

    let error = refused(&junior, "scale_deployment").await;
    assert_eq!(reasons(&error), ["missing_scopes"]);
    let data = error.data.as_ref().expect("data");
    assert_eq!(data["error"], "insufficient_scope");
    assert_eq!(data["missingScopes"], json!(["k8s:scale", "k8s:write"]));
    assert_eq!(data["scope"], "k8s:scale k8s:write");
    assert_eq!(
        data["wwwAuthenticate"],
        "Bearer error=\"insufficient_scope\", scope=\"k8s:scale k8s:write\", \
         error_description=\"missing scopes: k8s:scale k8s:write\""
    );
    // The operator holds both scopes.
    let operator = h.client(FixedRole::new("operator"), false).await;
    operator
        .peer()
        .call_tool(CallToolRequestParams::new("scale_deployment"))
        .await
        .expect("allowed");
    assert_eq!(h.ops.calls(), ["scale_deployment"]);
    let _ = junior.cancel().await;
    let _ = operator.cancel().await;
}

#[tokio::test]
async fn an_unknown_role_and_no_role_see_nothing_and_every_call_is_refused() {
    let h = Harness::new();
    let intruder = h.client(FixedRole::new("intruder"), false).await;
    let anonymous = h.client(Anonymous, true).await;
    for (client, role, reason) in [
        (&intruder, json!("intruder"), "unknown_role"),
        (&anonymous, Value::Null, "no_role"),
    ] {
        let shown = client.peer().list_tools(None).await.expect("lists");
        assert!(shown.tools.is_empty(), "{role}");
        assert_eq!(shown.cache_scope, Some(CacheScope::Private));
        let error = refused(client, "list_pods").await;
        assert_eq!(reasons(&error), [reason]);
        assert_eq!(error.data.as_ref().expect("data")["role"], role);
    }
    assert!(h.ops.calls().is_empty());
    let trail: Vec<(String, Verdict)> = h
        .sink
        .records()
        .into_iter()
        .map(|r| (r.role, r.verdict))
        .collect();
    assert_eq!(
        trail,
        [
            ("intruder".to_owned(), Verdict::Denied),
            ("(none)".to_owned(), Verdict::Denied)
        ]
    );
    let _ = intruder.cancel().await;
    let _ = anonymous.cancel().await;
}

#[tokio::test]
async fn a_tool_that_drifted_from_its_pin_is_hidden_from_everyone() {
    let mut h = Harness::new();
    let mut approved = tool_json();
    approved[1]["description"] = json!("Restart one pod, gently.");
    let mut lock = Lockfile::default();
    lock.pin(&Server::trusted("k8s"), &approved).expect("pins");
    h.lock = Some(Arc::new(lock));
    let operator = h.client(FixedRole::new("operator"), false).await;
    let shown = operator.peer().list_tools(None).await.expect("lists");
    assert!(!names(&shown).contains(&"restart_pod"));
    assert_eq!(shown.tools.len(), 4);
    let error = refused(&operator, "restart_pod").await;
    assert_eq!(reasons(&error), ["drift"]);
    assert!(h.ops.calls().is_empty());
    // The audit trail records the drift itself, not a rule that was never asked.
    let records = h.sink.records();
    let record = records.last().expect("the refused call is recorded");
    assert_eq!(record.tool, "restart_pod");
    assert!(
        record.reasons.iter().any(|r| r
            .message()
            // A rewording only, which this server's policy does not accept.
            .starts_with("the tool was not shown: its description was reworded")),
        "{:?}",
        record.reasons
    );
    let _ = operator.cancel().await;
}

/// The policy's consent to a server's wording drift reaches an embedder by default: a
/// rewording of a pinned tool is shown where the policy's `[servers]` entry accepts it, and a
/// hint flip stays hidden though it does.
#[tokio::test]
async fn a_rewording_the_policy_accepts_is_shown_and_a_hint_flip_is_not() {
    let mut h = Harness::new();
    let consent =
        format!("{POLICY}\n[servers.k8s]\ncommand = [\"k8s-mcp\"]\naccept_wording_drift = true\n");
    h.policy = Arc::new(Policy::from_toml_str(&consent).expect("valid policy"));
    let mut approved = tool_json();
    approved[1]["description"] = json!("Restart one pod, gently.");
    approved[2]["annotations"]["readOnlyHint"] = json!(false);
    let mut lock = Lockfile::default();
    lock.pin(&Server::trusted("k8s"), &approved).expect("pins");
    h.lock = Some(Arc::new(lock));
    let operator = h.client(FixedRole::new("operator"), false).await;
    let shown = operator.peer().list_tools(None).await.expect("lists");
    assert!(
        names(&shown).contains(&"restart_pod"),
        "{:?}",
        names(&shown)
    );
    assert!(!names(&shown).contains(&"get_logs"), "{:?}", names(&shown));
    assert_eq!(reasons(&refused(&operator, "get_logs").await), ["drift"]);
    let _ = operator.cancel().await;
}

#[tokio::test]
async fn one_roles_denials_never_degrade_another_roles_session() {
    let mut h = Harness::new();
    // An agent loop's budget: the first denial degrades the session.
    h.dispatch = Arc::new(AuditedDispatch::new(h.sink.clone()).with_budget(Budget::default()));
    let viewer = h.client(FixedRole::new("viewer"), false).await;
    let operator = h.client(FixedRole::new("operator"), false).await;
    let error = refused(&viewer, "restart_pod").await;
    assert_eq!(reasons(&error), ["ceiling_exceeded"]);
    assert!(
        error.data.as_ref().expect("data")["dispatch"]
            .as_str()
            .is_some_and(|d| d.contains("non-agentic")),
        "the degrade is reported: {error:?}"
    );
    operator
        .peer()
        .call_tool(CallToolRequestParams::new("restart_pod"))
        .await
        .expect("the operator's session is its own");
    assert_eq!(h.ops.calls(), ["restart_pod"]);
    let _ = viewer.cancel().await;
    let _ = operator.cancel().await;
}

/// A governed server over a dispatcher with its defaults (`AuditedDispatch::new`, as the
/// README's snippets build it) has no budget: a stdio server's one session serves a thousand
/// calls, and a refused call refuses only itself.
#[tokio::test]
async fn with_the_defaults_a_session_serves_a_thousand_calls_and_calls_after_a_refusal() {
    let mut h = Harness::new();
    h.dispatch = Arc::new(AuditedDispatch::new(h.sink.clone()));
    let viewer = h.client(FixedRole::new("viewer"), false).await;
    for i in 0..1_000 {
        viewer
            .peer()
            .call_tool(CallToolRequestParams::new("list_pods"))
            .await
            .unwrap_or_else(|e| panic!("call {}: {e:?}", i + 1));
    }
    let error = refused(&viewer, "restart_pod").await;
    assert_eq!(reasons(&error), ["ceiling_exceeded"]);
    assert!(
        error.data.as_ref().expect("data").get("dispatch").is_none(),
        "a refusal, not a degrade: {error:?}"
    );
    for _ in 0..3 {
        viewer
            .peer()
            .call_tool(CallToolRequestParams::new("get_logs"))
            .await
            .expect("a call after the refusal is decided on its own");
    }
    assert_eq!(h.ops.calls().len(), 1_003);
    let records = h.sink.records();
    let verdicts = |v: Verdict| records.iter().filter(|r| r.verdict == v).count();
    assert_eq!(verdicts(Verdict::Degraded), 0);
    assert_eq!(verdicts(Verdict::Denied), 1);
    assert_eq!(
        records.len(),
        2 * 1_003 + 1,
        "an intent and an outcome a call, one refusal"
    );
    let _ = viewer.cancel().await;
}
