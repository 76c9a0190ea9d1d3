//! `GovernedServer` as an rmcp `ServerHandler`: each method as the table
//! [`METHODS`](crate::methods::METHODS) says. Lists are filtered per caller; calls, reads and
//! gets are decided and recorded; tasks are their session's; the lifecycle passes; custom
//! requests and notifications do not.

use std::borrow::Cow;

use ::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CancelledNotificationParam,
    CompleteRequestParams, CompleteResult, CustomRequest, CustomResult, DiscoverResult,
    GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams, GetSkillResult,
    GetTaskParams, GetTaskResult, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams, UpdateTaskParams,
};
// Deprecated in rmcp for 2026-07-28; still forwarded for peers of older versions.
#[allow(deprecated)]
use ::rmcp::model::SetLevelRequestParams;
use ::rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use ::rmcp::{ErrorData, RoleServer, ServerHandler};

use super::GovernedServer;
use crate::rmcp::traced::{Target, serve, server_operation};

impl<H: ServerHandler> ServerHandler for GovernedServer<H> {
    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let operation = server_operation("tools/list", Target::None, &context);
        serve(operation, self.governed_list_tools(request, context)).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let operation = server_operation("tools/call", Target::Tool(&request.name), &context);
        serve(operation, self.governed_call_tool(request, context)).await
    }

    /// The inner handler's tool, for rmcp's request-header validation (SEP-2243). rmcp asks
    /// this without a request context, so it cannot depend on the caller: it only lets rmcp
    /// check a call's headers against the tool's input schema; listing and calling stay
    /// governed.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.get_tool(name)
    }

    fn get_info(&self) -> ServerConfig {
        self.inner.get_info()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.inner.supported_protocol_versions()
    }

    fn negotiate_initialize(
        &self,
        request: &InitializeRequestParams,
    ) -> Result<InitializeResult, ErrorData> {
        self.inner.negotiate_initialize(request)
    }

    /// The inner handler's, without resource subscriptions: `subscriptions/listen` has no
    /// caller here to decide them for, so a subscription goes through `resources/subscribe`,
    /// which is decided and recorded.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = self.inner.accepted_subscription_filter(requested)?;
        accepted.resource_subscriptions = None;
        Some(accepted)
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let operation = server_operation("ping", Target::None, &context);
        serve(operation, self.inner.ping(context)).await
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let operation = server_operation("initialize", Target::None, &context);
        serve(operation, self.inner.initialize(request, context)).await
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        self.inner.discover(context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let operation = server_operation("completion/complete", Target::None, &context);
        serve(operation, self.governed_complete(request, context)).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.needs_role(&context, "logging/setLevel")?;
        self.inner.set_level(request, context).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let operation = server_operation("prompts/get", Target::Prompt(&request.name), &context);
        serve(operation, self.governed_get_prompt(request, context)).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let operation = server_operation("prompts/list", Target::None, &context);
        serve(operation, self.governed_list_prompts(request, context)).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let operation = server_operation("resources/list", Target::None, &context);
        serve(operation, self.governed_list_resources(request, context)).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let operation = server_operation("resources/templates/list", Target::None, &context);
        serve(
            operation,
            self.governed_list_resource_templates(request, context),
        )
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let operation =
            server_operation("resources/read", Target::Resource(&request.uri), &context);
        serve(operation, self.governed_read_resource(request, context)).await
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.needs_role(context.request_context(), "subscriptions/listen")?;
        self.inner.listen(context).await
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let operation = server_operation(
            "resources/subscribe",
            Target::Resource(&request.uri),
            &context,
        );
        serve(operation, self.governed_subscribe(request, context)).await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let operation = server_operation(
            "resources/unsubscribe",
            Target::Resource(&request.uri),
            &context,
        );
        serve(operation, self.governed_unsubscribe(request, context)).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        // Not governed, so not passed on: no row of the table.
        let _ = context;
        Err(super::by_table::not_found(&request.method))
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        context: NotificationContext<RoleServer>,
    ) {
        self.inner.on_cancelled(notification, context).await
    }

    async fn on_progress(
        &self,
        notification: ProgressNotificationParam,
        context: NotificationContext<RoleServer>,
    ) {
        self.inner.on_progress(notification, context).await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.inner.on_initialized(context).await
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        self.inner.on_roots_list_changed(context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.governed_get_task(request, context).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.governed_update_task(request, context).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.governed_cancel_task(request, context).await
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        self.governed_list_skills(request, context).await
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        self.governed_get_skill(request, context).await
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        self.governed_read_resource_directory(request, context)
            .await
    }
}
