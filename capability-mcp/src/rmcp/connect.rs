//! Connecting an rmcp client and listing every tool of a server, page by page.

use std::collections::HashSet;

use ::rmcp::model::{
    ClientCapabilities, ClientConfig, ClientRequest, CustomResult, Implementation,
    ListToolsRequest, PaginatedRequestParams, ProtocolVersion, ServerResult, Tool,
};
use ::rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RunningService,
};
use ::rmcp::transport::IntoTransport;
use ::rmcp::{Peer, RoleClient, ServiceError};
use serde_json::Value;

use capability_core::manifest::ManifestError;

use crate::import::from_mcp_tool;
use crate::server::Server;

/// The identity this crate's clients give servers: `capability` and the crate version.
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("capability", env!("CARGO_PKG_VERSION")),
    )
}

/// `server/discover` first (2026-07-28, else 2025-11-25 per request), and the `initialize`
/// handshake (2025-11-25; the server may answer with an older version) for a server that
/// rejects `server/discover` or leaves it unanswered for rmcp's 10 s probe.
fn client_lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// Starts an rmcp client on a transport with the negotiation the command line uses, so a
/// server of either protocol generation works: `server/discover` (protocol 2026-07-28, or
/// 2025-11-25 with per-request metadata), falling back to the `initialize` handshake
/// (2025-11-25, or whatever older version the server answers with) when the server rejects
/// `server/discover`. A server that neither answers nor rejects `server/discover` is given
/// rmcp's 10 s probe before the fallback. The client calls itself `capability`.
///
/// Pass `running.peer().clone()` to [`GovernedClient::connect`](super::GovernedClient::connect), and keep `running`: dropping
/// it closes the connection.
pub async fn connect_client<T, E, A>(
    transport: T,
) -> Result<RunningService<RoleClient, ClientConfig>, ClientInitializeError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    client_config()
        .serve_with_lifecycle(transport, client_lifecycle())
        .await
}

/// At most this many `tools/list` pages are read; a server that keeps returning new cursors
/// beyond it is treated as broken.
const MAX_PAGES: usize = 10_000;

/// Why listing a server's tools failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ListError {
    /// The request failed (transport closed, error reply, ...).
    Service(ServiceError),
    /// A tool that is not a valid MCP tool.
    Malformed(ManifestError),
    /// Something else about the answer: a cursor loop, a result that is not a tool list.
    Answer(String),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Service(error) => write!(f, "`tools/list` failed: {error}"),
            ListError::Malformed(error) => write!(f, "the server listed an invalid tool: {error}"),
            ListError::Answer(message) => write!(f, "`tools/list` failed: {message}"),
        }
    }
}

impl std::error::Error for ListError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ListError::Service(error) => Some(error),
            ListError::Malformed(error) => Some(error),
            ListError::Answer(_) => None,
        }
    }
}

/// Every tool of the server, following `nextCursor` to the last page, in the server's order.
/// A repeated cursor (a pagination loop) and a page rmcp cannot read are errors; for the
/// latter, the raw page is examined to name the bad tool. `server` names the provider when a
/// bad tool is checked against the manifest rules.
pub async fn list_tools(peer: &Peer<RoleClient>, server: &Server) -> Result<Vec<Tool>, ListError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = HashSet::new();
    for _ in 0..MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        let page = match peer
            .send_request(request)
            .await
            .map_err(ListError::Service)?
        {
            ServerResult::ListToolsResult(page) => page,
            ServerResult::CustomResult(CustomResult(raw)) => return Err(diagnose(&raw, server)),
            _ => {
                return Err(ListError::Answer(
                    "the server answered with something other than a tool list".to_owned(),
                ));
            }
        };
        tools.extend(page.tools);
        match page.next_cursor {
            None => return Ok(tools),
            Some(next) => {
                if !seen.insert(next.clone()) {
                    return Err(ListError::Answer(format!(
                        "the server returned the cursor {next:?} twice (a pagination loop)"
                    )));
                }
                cursor = Some(next);
            }
        }
    }
    Err(ListError::Answer(format!(
        "the server still had more pages after {MAX_PAGES}"
    )))
}

/// Why rmcp could not read a `tools/list` page: the first tool it rejects, with every problem
/// the manifest rules find in it (or rmcp's own complaint when they find none).
fn diagnose(page: &Value, server: &Server) -> ListError {
    let Some(tools) = page.get("tools").and_then(Value::as_array) else {
        return ListError::Answer("the server answered without a `tools` array".to_owned());
    };
    for tool in tools {
        if let Err(rmcp_error) = serde_json::from_value::<Tool>(tool.clone()) {
            return ListError::Malformed(match from_mcp_tool(tool, server) {
                Err(error) => error,
                Ok(manifest) => {
                    let mut error = ManifestError::new(manifest.name());
                    error.push("(tool)", format!("not a valid MCP tool: {rmcp_error}"));
                    error
                }
            });
        }
    }
    ListError::Answer(
        "the server's tool list is not a valid `tools/list` result (rmcp cannot read it)"
            .to_owned(),
    )
}
