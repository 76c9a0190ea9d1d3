//! The two handlers of the proxy: [`Forward`], the rmcp server handler behind the governed
//! front, which answers `tools/list` from the reviewed copy of the server's tools and forwards
//! `tools/call`; and [`Upstream`], the rmcp client handler facing the server, which passes on
//! `notifications/tools/list_changed`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ::rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig,
    GetPromptRequestMethod, GetPromptRequestParams, GetPromptResponse, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestMethod, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use ::rmcp::service::{NotificationContext, RequestContext, SubscriptionContext, SubscriptionSink};
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

/// The clients of an HTTP front, to tell each of them when the server's tools changed: the peer
/// of every session (protocol 2025-11-25, after its `notifications/initialized`) and every open
/// `subscriptions/listen` (2026-07-28, where requests are stateless).
#[derive(Clone, Debug, Default)]
pub(crate) struct Clients(Arc<Mutex<ClientList>>);

#[derive(Debug, Default)]
struct ClientList {
    peers: Vec<Peer<RoleServer>>,
    listening: Vec<(u64, SubscriptionSink)>,
    next: u64,
}

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, ClientList> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells every client still connected that the tools changed; forgets the others.
    pub(crate) async fn notify_tool_list_changed(&self) -> usize {
        let (peers, sinks) = {
            let mut list = self.lock();
            list.peers.retain(|peer| !peer.is_transport_closed());
            let sinks: Vec<_> = list.listening.iter().map(|(_, s)| s.clone()).collect();
            (list.peers.clone(), sinks)
        };
        let mut told = 0;
        for peer in peers {
            told += usize::from(peer.notify_tool_list_changed().await.is_ok());
        }
        for sink in sinks {
            told += usize::from(sink.notify_tool_list_changed().await.is_ok());
        }
        told
    }
}

/// How long a call whose connection to the server broke waits to learn why (the supervising
/// task reads the server's exit status), so the client's error can say it.
const WHY_WAIT: Duration = Duration::from_millis(500);

/// Why the server can no longer answer, once it is gone; set by the supervising task. And,
/// for the supervising task, the first call whose connection to the server failed.
#[derive(Clone, Debug)]
pub(crate) struct Gone {
    why: Arc<watch::Sender<Option<String>>>,
    broken: Arc<watch::Sender<Option<String>>>,
}

impl Default for Gone {
    fn default() -> Self {
        Gone {
            why: Arc::new(watch::Sender::new(None)),
            broken: Arc::new(watch::Sender::new(None)),
        }
    }
}

/// Keeps the first value sent.
fn first(sender: &watch::Sender<Option<String>>, value: String) {
    sender.send_if_modified(|slot| {
        let first = slot.is_none();
        slot.get_or_insert(value);
        first
    });
}

/// Waits up to `wait` (forever: `None`) for a value.
async fn wait_for(
    sender: &watch::Sender<Option<String>>,
    wait: Option<Duration>,
) -> Option<String> {
    let mut watching = sender.subscribe();
    let known = watching.wait_for(Option::is_some);
    let known = match wait {
        Some(wait) => tokio::time::timeout(wait, known).await.ok()?,
        None => known.await,
    };
    known.ok().and_then(|why| why.clone())
}

impl Gone {
    pub(crate) fn set(&self, why: String) {
        first(&self.why, why);
    }

    /// Why, waiting up to [`WHY_WAIT`] for it.
    async fn why(&self) -> Option<String> {
        wait_for(&self.why, Some(WHY_WAIT)).await
    }

    /// A call's connection to the server failed.
    fn broke(&self, error: String) {
        first(&self.broken, error);
    }

    /// Resolves with the error of the first call whose connection to the server failed.
    pub(crate) async fn broken(&self) -> String {
        match wait_for(&self.broken, None).await {
            Some(error) => error,
            None => std::future::pending().await,
        }
    }
}

/// The handler the governed server wraps: tools only.
///
/// `tools/list` answers from the [`ToolCache`] (listed when the proxy starts and again each
/// time the server announces a change), so the client only ever sees descriptors the proxy has
/// reviewed against the lockfile, and a call costs one round trip to the server, not two.
/// `tools/call` is sent to the server as it came (the governed server has already decided and
/// recorded it). Resources and prompts are advertised and forwarded only when the policy's
/// `[servers.<name>] forward = [..]` names them; everything else (completion, ...) is not
/// advertised and is answered with rmcp's `method not found`.
#[derive(Clone)]
pub(crate) struct Forward {
    pub(crate) upstream: Peer<RoleClient>,
    pub(crate) tools: ToolCache,
    pub(crate) server: String,
    pub(crate) gone: Gone,
    /// The clients to tell of changes, behind an HTTP front (over stdio, the one client's
    /// peer is told directly).
    pub(crate) clients: Option<Clients>,
    /// `forward = ["resources"]`: list and read the server's resources.
    pub(crate) resources: bool,
    /// `forward = ["prompts"]`: list and get the server's prompts.
    pub(crate) prompts: bool,
}

impl Forward {
    /// The error of a forwarded request: the server's own, or why it could not answer.
    async fn forwarded<T>(&self, result: Result<T, ServiceError>) -> Result<T, ErrorData> {
        match result {
            Ok(answer) => Ok(answer),
            Err(ServiceError::McpError(error)) => Err(error),
            Err(error) => Err(self.unavailable(&error).await),
        }
    }

    async fn unavailable(&self, error: &ServiceError) -> ErrorData {
        self.gone.broke(error.to_string());
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
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        if self.resources {
            capabilities.resources = ServerCapabilities::builder()
                .enable_resources()
                .build()
                .resources;
        }
        if self.prompts {
            capabilities.prompts = ServerCapabilities::builder()
                .enable_prompts()
                .build()
                .prompts;
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(PROXY_NAME, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.get().to_vec()))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        if !self.resources {
            return Ok(ListResourcesResult::default());
        }
        self.forwarded(self.upstream.list_resources(request).await)
            .await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        if !self.resources {
            return Ok(ListResourceTemplatesResult::default());
        }
        self.forwarded(self.upstream.list_resource_templates(request).await)
            .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if !self.resources {
            return Err(ErrorData::method_not_found::<ReadResourceRequestMethod>());
        }
        self.forwarded(self.upstream.read_resource_once(request).await)
            .await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        if !self.prompts {
            return Ok(ListPromptsResult::default());
        }
        self.forwarded(self.upstream.list_prompts(request).await)
            .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if !self.prompts {
            return Err(ErrorData::method_not_found::<GetPromptRequestMethod>());
        }
        self.forwarded(self.upstream.get_prompt_once(request).await)
            .await
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

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(clients) = &self.clients {
            clients.lock().peers.push(context.peer);
        }
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp keeps of this only what the client asked for.
        self.clients
            .as_ref()
            .map(|_| SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let Some(clients) = &self.clients else {
            return Ok(());
        };
        let key = {
            let mut list = clients.lock();
            list.next += 1;
            let key = list.next;
            list.listening.push((key, context.sink().clone()));
            key
        };
        context.cancelled().await;
        clients.lock().listening.retain(|(k, _)| *k != key);
        Ok(())
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
