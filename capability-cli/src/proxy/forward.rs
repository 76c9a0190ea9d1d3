//! [`Forward`], the rmcp server handler behind the governed front: it forwards what the
//! governed server let through (`tools/call`; resources, prompts and completions where the
//! policy's `forward` names them) and tells the clients of an HTTP front when the server's lists
//! change. The handler facing the server is `upstream.rs`.

use std::sync::{Arc, Mutex, PoisonError};

use ::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestMethod, CompleteRequestParams,
    CompleteResult, GetPromptRequestMethod, GetPromptRequestParams, GetPromptResponse,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestMethod, ReadResourceRequestParams,
    ReadResourceResponse, Reference, ServerCapabilities, ServerConfig, SubscribeRequestMethod,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestMethod, UnsubscribeRequestParams,
};
use ::rmcp::service::{NotificationContext, RequestContext, SubscriptionContext, SubscriptionSink};
use ::rmcp::{ErrorData, Peer, RoleClient, RoleServer, ServerHandler, ServiceError};

use capability::mcp::telemetry::{Operation, Transport};
use capability::rmcp::ToolListings;
use capability::rmcp::traced::{self, Target};

use super::completed::Completed;
use super::delegate::Delegated;
use super::gone::Gone;

/// The name the proxy gives itself, to the client and to the server.
pub const PROXY_NAME: &str = "capability-proxy";

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

    /// A session that has initialized (2025-11-25): told from now on. The sessions that ended
    /// since are forgotten, so the list holds only live ones.
    pub(crate) fn initialized(&self, peer: Peer<RoleServer>) {
        let mut clients = self.lock();
        clients.peers.retain(|peer| !peer.is_transport_closed());
        clients.peers.push(peer);
    }

    /// What an HTTP front accepts of a `subscriptions/listen` (2026-07-28): tool list changes.
    pub(crate) fn accepted() -> SubscriptionFilter {
        SubscriptionFilter::builder().tools_list_changed().build()
    }

    /// Keeps an open `subscriptions/listen` among the clients told until it is cancelled.
    pub(crate) async fn listen(&self, context: SubscriptionContext) {
        let key = {
            let mut list = self.lock();
            list.next += 1;
            let key = list.next;
            list.listening.push((key, context.sink().clone()));
            key
        };
        context.cancelled().await;
        self.lock().listening.retain(|(k, _)| *k != key);
    }

    /// Tells every client still connected that a list changed; forgets the others.
    pub(crate) async fn notify(&self, list: Changed) -> usize {
        let (peers, sinks) = {
            let mut clients = self.lock();
            clients.peers.retain(|peer| !peer.is_transport_closed());
            let sinks: Vec<_> = clients.listening.iter().map(|(_, s)| s.clone()).collect();
            (clients.peers.clone(), sinks)
        };
        let mut told = 0;
        for peer in peers {
            told += usize::from(list.tell_peer(&peer).await);
        }
        for sink in sinks {
            let sent = match list {
                Changed::Tools => sink.notify_tool_list_changed().await,
                Changed::Resources => sink.notify_resource_list_changed().await,
                Changed::Prompts => sink.notify_prompt_list_changed().await,
            };
            told += usize::from(sent.is_ok());
        }
        told
    }
}

/// A list of the server's that changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Changed {
    Tools,
    Resources,
    Prompts,
}

impl Changed {
    /// Every list.
    pub(crate) const ALL: [Changed; 3] = [Changed::Tools, Changed::Resources, Changed::Prompts];

    /// Tells one client; whether it could be told.
    pub(crate) async fn tell_peer(self, peer: &Peer<RoleServer>) -> bool {
        match self {
            Changed::Tools => peer.notify_tool_list_changed().await.is_ok(),
            Changed::Resources => peer.notify_resource_list_changed().await.is_ok(),
            Changed::Prompts => peer.notify_prompt_list_changed().await.is_ok(),
        }
    }
}

/// The handler the governed server wraps.
///
/// The governed server answers `tools/list` from its listing, which the proxy sets when it
/// starts and each time the server announces a change, so the client only ever sees
/// descriptors reviewed against the lockfile, and a call costs one round trip to the server.
/// `tools/call` is sent to the server as it came (the governed server has already decided it
/// and recorded its intent). Resources and prompts (and completions) are advertised and
/// forwarded only when the policy's `[servers.<name>] forward = [..]` names them, each read,
/// get and completion decided and recorded by the governed server first; everything else is
/// not advertised and is answered with `method not found`.
#[derive(Clone)]
pub(crate) struct Forward {
    pub(crate) upstream: Peer<RoleClient>,
    /// The server's progress for the calls passed on through `upstream`, back to their
    /// clients.
    pub(crate) progress: super::progress::Relay,
    pub(crate) listings: ToolListings,
    pub(crate) server: String,
    /// How the server is reached (`network.transport` of the `mcp.client` spans).
    pub(crate) transport: Transport,
    pub(crate) gone: Gone,
    /// The clients to tell of changes, behind an HTTP front (over stdio, the one client's
    /// peer is told directly).
    pub(crate) clients: Option<Clients>,
    /// `forward = ["resources"]`: list and read the server's resources.
    pub(crate) resources: bool,
    /// `forward = ["prompts"]`: list and get the server's prompts.
    pub(crate) prompts: bool,
    /// Calls on the caller's behalf, over a connection of its own (`delegate.rs`).
    pub(crate) delegated: Option<Arc<Delegated>>,
}

impl Forward {
    /// A request forwarded to the server, until the client cancels it; the error of a forwarded
    /// request is the server's own, or why it could not answer.
    ///
    /// rmcp does not drop a handler's future when the client cancels its request: it cancels
    /// the request's token. Here the token drops the request sent upstream (rmcp then tells the
    /// server `notifications/cancelled`) and the call ends with an error saying it was
    /// cancelled, which is its outcome on record.
    /// The server, for this request: the proxy's connection, or the caller's own when calls
    /// are made on its behalf.
    async fn peer(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Peer<RoleClient>, ErrorData> {
        self.connection(context).await.map(|(peer, _)| peer)
    }

    /// The upstream for `context` and the relay of its progress.
    async fn connection(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<(Peer<RoleClient>, super::progress::Relay), ErrorData> {
        match &self.delegated {
            None => Ok((self.upstream.clone(), self.progress.clone())),
            Some(delegated) => delegated.peer(context).await,
        }
    }

    async fn forwarded<T>(
        &self,
        context: &RequestContext<RoleServer>,
        upstream: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, ErrorData> {
        let result = tokio::select! {
            result = upstream => result,
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error(
                    "cancelled by the client; the MCP server was told (notifications/cancelled)",
                    None,
                ));
            }
        };
        match result {
            Ok(answer) => Ok(answer),
            Err(ServiceError::McpError(error)) => Err(error),
            // The caller's own connection failed: that caller's, not the server's end.
            Err(error) if self.delegated.is_some() => {
                if let Some(delegated) = &self.delegated {
                    delegated.failed(context).await;
                }
                Err(ErrorData::internal_error(
                    format!(
                        "the MCP server `{}` did not answer on the caller's behalf: {error}",
                        self.server
                    ),
                    None,
                ))
            }
            Err(error) => Err(self.unavailable(&error).await),
        }
    }

    /// The `mcp.client` span of a request passed on to the server. The request's `_meta`
    /// carries the trace context: this span's when spans are exported (`--otlp`), else the
    /// one the client sent, passed on as it was.
    fn leg(
        &self,
        method: &str,
        target: Target<'_>,
        context: &RequestContext<RoleServer>,
        meta: &mut Option<::rmcp::model::RequestMetaObject>,
    ) -> Operation {
        traced::client_operation(
            method,
            target,
            Some(&self.server),
            self.transport,
            Some(&context.meta),
            meta,
        )
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
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .build()
                .resources;
        }
        if self.prompts {
            capabilities.prompts = ServerCapabilities::builder()
                .enable_prompts()
                .enable_prompts_list_changed()
                .build()
                .prompts;
        }
        if self.resources || self.prompts {
            capabilities.completions = ServerCapabilities::builder()
                .enable_completions()
                .build()
                .completions;
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(PROXY_NAME, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.listings.tools()))
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !self.resources {
            return Err(ErrorData::method_not_found::<SubscribeRequestMethod>());
        }
        self.forwarded(&context, self.peer(&context).await?.subscribe(request))
            .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !self.resources {
            return Err(ErrorData::method_not_found::<UnsubscribeRequestMethod>());
        }
        self.forwarded(&context, self.peer(&context).await?.unsubscribe(request))
            .await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let forwarded = match &request.r#ref {
            Reference::Prompt(_) => self.prompts,
            Reference::Resource(_) => self.resources,
            _ => false,
        };
        if !forwarded {
            return Err(ErrorData::method_not_found::<CompleteRequestMethod>());
        }
        self.forwarded(&context, self.peer(&context).await?.complete(request))
            .await
            .map(Completed::completed)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        if !self.resources {
            return Ok(ListResourcesResult::default());
        }
        self.forwarded(&context, self.peer(&context).await?.list_resources(request))
            .await
            .map(Completed::completed)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        if !self.resources {
            return Ok(ListResourceTemplatesResult::default());
        }
        self.forwarded(
            &context,
            self.peer(&context).await?.list_resource_templates(request),
        )
        .await
        .map(Completed::completed)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if !self.resources {
            return Err(ErrorData::method_not_found::<ReadResourceRequestMethod>());
        }
        let mut request = request;
        let leg = self.leg(
            "resources/read",
            Target::Resource(&request.uri),
            &context,
            &mut request.meta,
        );
        let peer = self.peer(&context).await?;
        self.forwarded(
            &context,
            traced::send(leg, peer.read_resource_once(request)),
        )
        .await
        .map(Completed::completed)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        if !self.prompts {
            return Ok(ListPromptsResult::default());
        }
        self.forwarded(&context, self.peer(&context).await?.list_prompts(request))
            .await
            .map(Completed::completed)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if !self.prompts {
            return Err(ErrorData::method_not_found::<GetPromptRequestMethod>());
        }
        let mut request = request;
        let leg = self.leg(
            "prompts/get",
            Target::Prompt(&request.name),
            &context,
            &mut request.meta,
        );
        let peer = self.peer(&context).await?;
        self.forwarded(&context, traced::send(leg, peer.get_prompt_once(request)))
            .await
            .map(Completed::completed)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut request = request;
        let leg = self.leg(
            "tools/call",
            Target::Tool(&request.name),
            &context,
            &mut request.meta,
        );
        let (peer, progress) = self.connection(&context).await?;
        let call = progress.call_tool(&peer, request, &context);
        self.forwarded(&context, traced::send(leg, call))
            .await
            .map(Completed::completed)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(clients) = &self.clients {
            clients.initialized(context.peer);
        }
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp keeps of this only what the client asked for.
        self.clients.as_ref().map(|_| Clients::accepted())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        if let Some(clients) = &self.clients {
            clients.listen(context).await;
        }
        Ok(())
    }
}
