//! The gateway as one MCP server to its client: the role's union of the fleet's tools under
//! their shown names, each call routed to its server, decided on the tool's own manifest and
//! recorded (intent before it is forwarded, outcome after) with its server as provider. A tool
//! withheld by the fleet (drift, a duplicate or shared name) or by the role, and a name no server
//! has, is refused on record and reaches no server.

use ::rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use ::rmcp::service::RequestContext;
use ::rmcp::{ErrorData, RoleServer, ServerHandler};

use capability::rmcp::traced::{Target, serve, server_operation};

use crate::serve::gateway::Gateway;

impl ServerHandler for Gateway {
    // `enable_logging`: rmcp marks logging deprecated (SEP-2577); clients of 2025-11-25 use it.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let snapshot = self.current();
        let mut capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_completions()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        // What no server's items are served for is not said (a proxy of tools only).
        if !snapshot.resources {
            capabilities.resources = None;
        }
        if !snapshot.prompts {
            capabilities.prompts = None;
        }
        if !snapshot.resources && !snapshot.prompts {
            capabilities.completions = None;
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(self.name, env!("CARGO_PKG_VERSION")))
    }

    /// For rmcp's check of a call's SEP-2243 headers against the shown tool's schema.
    fn get_tool(&self, name: &str) -> Option<::rmcp::model::Tool> {
        self.tool_shown(name)
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let operation = server_operation("ping", Target::None, &context);
        serve(operation, std::future::ready(Ok(()))).await
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let operation = server_operation("initialize", Target::None, &context);
        // rmcp's own `initialize`, in the operation's span.
        context.peer.set_peer_info(request.clone());
        serve(
            operation,
            std::future::ready(self.negotiate_initialize(&request)),
        )
        .await
    }

    async fn on_initialized(&self, context: ::rmcp::service::NotificationContext<RoleServer>) {
        if let Some(clients) = &self.clients {
            clients.initialized(context.peer);
        }
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &::rmcp::model::SubscriptionFilter,
    ) -> Option<::rmcp::model::SubscriptionFilter> {
        self.clients
            .as_ref()
            .map(|_| crate::serve::clients::Clients::accepted())
    }

    async fn listen(&self, context: ::rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        if let Some(clients) = &self.clients {
            clients.listen(context).await;
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let operation = server_operation("tools/list", Target::None, &context);
        serve(operation, async { Ok(self.tools_listed(&context)) }).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let operation = server_operation("resources/list", Target::None, &context);
        serve(operation, async { Ok(self.resources_listed(&context)) }).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let operation = server_operation("resources/templates/list", Target::None, &context);
        serve(operation, async { Ok(self.templates_listed(&context)) }).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let operation =
            server_operation("resources/read", Target::Resource(&request.uri), &context);
        serve(operation, self.resource_read(request, &context)).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let operation = server_operation("prompts/list", Target::None, &context);
        serve(operation, async { Ok(self.prompts_listed(&context)) }).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let operation = server_operation("prompts/get", Target::Prompt(&request.name), &context);
        serve(operation, self.prompt_got(request, &context)).await
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: ::rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let operation = server_operation(
            "resources/subscribe",
            Target::Resource(&request.uri),
            &context,
        );
        serve(
            operation,
            self.subscription(request.uri.clone(), true, &context),
        )
        .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: ::rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let operation = server_operation(
            "resources/unsubscribe",
            Target::Resource(&request.uri),
            &context,
        );
        serve(
            operation,
            self.subscription(request.uri.clone(), false, &context),
        )
        .await
    }

    async fn complete(
        &self,
        request: ::rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<::rmcp::model::CompleteResult, ErrorData> {
        let operation = server_operation("completion/complete", Target::None, &context);
        serve(operation, self.completion(request, &context)).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: ::rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let operation = server_operation("logging/setLevel", Target::None, &context);
        serve(operation, self.level_set(request, &context)).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let operation = server_operation("tools/call", Target::Tool(&request.name), &context);
        serve(operation, self.tool_called(request, &context)).await
    }
}
