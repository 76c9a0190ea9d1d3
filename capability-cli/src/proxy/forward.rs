//! The two handlers of the proxy: [`Forward`], the rmcp server handler behind the governed
//! front, which answers `tools/list` from the reviewed copy of the server's tools and forwards
//! `tools/call`; and [`Upstream`], the rmcp client handler facing the server, which passes on
//! `notifications/tools/list_changed`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ::rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use ::rmcp::service::{NotificationContext, RequestContext};
use ::rmcp::{ClientHandler, ErrorData, Peer, RoleClient, RoleServer, ServerHandler, ServiceError};
use tokio::sync::{mpsc, watch};

/// The name the proxy gives itself, to the client and to the server.
pub const PROXY_NAME: &str = "capability-proxy";

/// The server's tools as the proxy last listed them (every page), shared by the front and the
/// task that lists again on `notifications/tools/list_changed`.
#[derive(Clone, Debug, Default)]
pub(crate) struct ToolCache(Arc<Mutex<Arc<Vec<Tool>>>>);

impl ToolCache {
    pub(crate) fn get(&self) -> Arc<Vec<Tool>> {
        Arc::clone(&self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    pub(crate) fn set(&self, tools: Vec<Tool>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(tools);
    }
}

/// How long a call whose connection to the server broke waits to learn why (the supervising
/// task reads the server's exit status), so the client's error can say it.
const WHY_WAIT: Duration = Duration::from_millis(500);

/// Why the server can no longer answer, once it is gone; set by the supervising task.
#[derive(Clone, Debug)]
pub(crate) struct Gone(Arc<watch::Sender<Option<String>>>);

impl Default for Gone {
    fn default() -> Self {
        Gone(Arc::new(watch::Sender::new(None)))
    }
}

impl Gone {
    pub(crate) fn set(&self, why: String) {
        self.0.send_if_modified(|gone| {
            let first = gone.is_none();
            gone.get_or_insert(why);
            first
        });
    }

    /// Why, waiting up to [`WHY_WAIT`] for it.
    async fn why(&self) -> Option<String> {
        let mut watching = self.0.subscribe();
        let known = tokio::time::timeout(WHY_WAIT, watching.wait_for(Option::is_some)).await;
        match known {
            Ok(Ok(why)) => why.clone(),
            _ => None,
        }
    }
}

/// The handler the governed server wraps: tools only.
///
/// `tools/list` answers from the [`ToolCache`] (listed when the proxy starts and again each
/// time the server announces a change), so the client only ever sees descriptors the proxy has
/// reviewed against the lockfile, and a call costs one round trip to the server, not two.
/// `tools/call` is sent to the server as it came (the governed server has already decided and
/// recorded it). Everything else (resources, prompts, completion, ...) is not advertised and is
/// answered with rmcp's `method not found`.
#[derive(Clone)]
pub(crate) struct Forward {
    pub(crate) upstream: Peer<RoleClient>,
    pub(crate) tools: ToolCache,
    pub(crate) server: String,
    pub(crate) gone: Gone,
}

impl Forward {
    async fn unavailable(&self, error: &ServiceError) -> ErrorData {
        let why = self
            .gone
            .why()
            .await
            .unwrap_or_else(|| format!("the connection failed: {error}"));
        ErrorData::internal_error(
            format!("the MCP server `{}` did not answer: {why}", self.server),
            None,
        )
    }
}

impl ServerHandler for Forward {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(PROXY_NAME, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.get().to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Dropped with the front request when the client cancels it: rmcp then cancels the
        // request sent upstream too.
        match self.upstream.call_tool_once(request).await {
            Ok(response) => Ok(response),
            Err(ServiceError::McpError(error)) => Err(error),
            Err(error) => Err(self.unavailable(&error).await),
        }
    }
}

/// The client handler facing the server: passes `notifications/tools/list_changed` on to the
/// proxy, which lists again.
pub(crate) struct Upstream {
    pub(crate) changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Upstream {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(PROXY_NAME, env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // The receiver is gone only when the proxy is shutting down.
        let _ = self.changed.send(());
    }
}
