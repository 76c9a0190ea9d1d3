//! `BearerRoles`: the role of a Streamable HTTP caller comes from its `Authorization: Bearer`
//! header. rmcp's Streamable HTTP server stores each request's `http::request::Parts` in the
//! request's extensions; this test's transport does the same over `tokio::io::duplex`, so the
//! resolver reads exactly what it reads behind HTTP (the real HTTP transport is not run here).

#![cfg(feature = "rmcp-server")]

use std::sync::Arc;

use capability::audit::{AuditedDispatch, Budget, MemorySink};
use capability::rmcp::{BearerRoles, GovernedServer};
use capability::{Policy, Server};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ContentBlock, ErrorData, GetExtensions, Implementation, JsonRpcMessage, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleClient, RoleServer, ServerHandler, ServiceError, ServiceExt};
use serde_json::json;

const POLICY: &str = r#"
[roles.operator]
ceiling = "unrestricted"
allow = ["*"]

[roles.viewer]
ceiling = "read-only"
allow = ["*"]
"#;

#[derive(Clone)]
struct Ops;

impl ServerHandler for Ops {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ops", "1.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Tool> = [
            json!({"name": "list_pods", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": true}}),
            json!({"name": "delete_pod", "inputSchema": {"type": "object"},
                   "annotations": {"destructiveHint": true}}),
        ]
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("valid"))
        .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(request.name.to_string())]).into())
    }
}

/// A server transport that puts the HTTP request's parts in every request's extensions, as
/// rmcp's Streamable HTTP server does.
struct WithParts<T> {
    inner: T,
    parts: http::request::Parts,
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for WithParts<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let mut message = self.inner.receive().await?;
        if let JsonRpcMessage::Request(request) = &mut message {
            request.request.extensions_mut().insert(self.parts.clone());
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

fn parts(authorization: Option<&str>) -> http::request::Parts {
    let mut request = http::Request::builder().uri("/mcp");
    if let Some(value) = authorization {
        request = request.header(http::header::AUTHORIZATION, value);
    }
    request.body(()).expect("a valid request").into_parts().0
}

async fn client(
    authorization: Option<&str>,
    sink: Arc<MemorySink>,
) -> RunningService<RoleClient, ClientConfig> {
    let roles = BearerRoles::new()
        .token("op-token", "operator")
        .token("view-token", "viewer");
    let dispatch = AuditedDispatch::new(sink).with_budget(Budget {
        max_calls: 100,
        max_denials: 100,
    });
    let governed = GovernedServer::new(
        Ops,
        Server::trusted("k8s"),
        Arc::new(Policy::from_toml_str(POLICY).expect("valid")),
        roles,
        Arc::new(dispatch),
    );
    let (server_side, client_side) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(server_side);
    let transport = WithParts {
        inner: AsyncRwTransport::new_server(read, write),
        parts: parts(authorization),
    };
    tokio::spawn(async move {
        if let Ok(running) = governed.serve(transport).await {
            let _ = running.waiting().await;
        }
    });
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("http-client", "1.0.0"),
    )
    .serve(client_side)
    .await
    .expect("connects")
}

async fn listed(client: &RunningService<RoleClient, ClientConfig>) -> Vec<String> {
    let result = client.peer().list_tools(None).await.expect("lists");
    result.tools.iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test]
async fn the_bearer_token_picks_the_role() {
    let sink = Arc::new(MemorySink::new());
    let operator = client(Some("Bearer op-token"), sink.clone()).await;
    assert_eq!(listed(&operator).await, ["list_pods", "delete_pod"]);
    let viewer = client(Some("bearer view-token"), sink.clone()).await;
    assert_eq!(listed(&viewer).await, ["list_pods"]);

    let refused = viewer
        .peer()
        .call_tool(CallToolRequestParams::new("delete_pod"))
        .await;
    assert!(
        matches!(&refused, Err(ServiceError::McpError(e)) if e.data.as_ref()
            .is_some_and(|d| d["role"] == "viewer")),
        "{refused:?}"
    );
    operator
        .peer()
        .call_tool(CallToolRequestParams::new("delete_pod"))
        .await
        .expect("allowed");
    // The viewer's refusal, then the operator's call: its intent and its outcome.
    let roles: Vec<String> = sink.records().into_iter().map(|r| r.role).collect();
    assert_eq!(roles, ["viewer", "operator", "operator"]);
    let _ = operator.cancel().await;
    let _ = viewer.cancel().await;
}

#[tokio::test]
async fn no_token_a_wrong_token_or_another_scheme_has_no_role() {
    let sink = Arc::new(MemorySink::new());
    for authorization in [
        None,
        Some("Bearer guessed"),
        Some("Basic op-token"),
        Some("Bearer "),
    ] {
        let caller = client(authorization, sink.clone()).await;
        assert!(listed(&caller).await.is_empty(), "{authorization:?}");
        let refused = caller
            .peer()
            .call_tool(CallToolRequestParams::new("list_pods"))
            .await;
        assert!(
            matches!(refused, Err(ServiceError::McpError(_))),
            "{authorization:?}"
        );
        let _ = caller.cancel().await;
    }
    assert!(sink.records().iter().all(|r| r.role == "(none)"));
    assert_eq!(sink.records().len(), 4);
}
