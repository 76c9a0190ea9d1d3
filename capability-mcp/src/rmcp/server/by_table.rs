//! The method table as the one door of a server: every request and notification a client sends
//! is looked up in [`METHODS`](crate::methods::METHODS) before the server behind sees it (rmcp's
//! `handler/server.rs` matches every client request once; this is that match, through the
//! table).

// `logging/setLevel` and `resources/subscribe` are deprecated in rmcp (2026-07-28); clients of
// 2025-11-25 send them, and the table lets them through.
#![allow(deprecated)]

use std::borrow::Cow;

use ::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CancelledNotificationParam,
    CompleteRequestParams, CompleteResult, CustomNotification, CustomRequest, CustomResult,
    DiscoverResult, ErrorCode, GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams,
    GetSkillResult, GetTaskParams, GetTaskResult, InitializeRequestParams, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use ::rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use ::rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::methods::method;

/// A server (any rmcp `ServerHandler`: yours, a [`GovernedServer`](super::GovernedServer), the
/// gateway's fleet) behind the method table: a request whose method has no row, or whose row
/// is [`Handling::Refused`](crate::methods::Handling::Refused), is answered `method not found`
/// and never reaches it; such a notification is dropped. Everything else goes to the server as
/// it came, through the one method of each.
///
/// ```
/// use capability::rmcp::ByTable;
///
/// # #[derive(Clone)] struct Ops;
/// # impl rmcp::ServerHandler for Ops {}
/// // Served as the server itself would be: `ByTable::new(server).serve(transport)`.
/// let server = ByTable::new(Ops);
/// # let _ = server;
/// ```
#[derive(Clone, Debug)]
pub struct ByTable<S> {
    inner: S,
}

impl<S> ByTable<S> {
    /// `inner`, behind the table.
    pub fn new(inner: S) -> ByTable<S> {
        ByTable { inner }
    }

    /// The server behind the table.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

/// The error of a method the table does not let through.
pub fn not_found(method: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("method not found: `{method}` is not one this server passes on"),
        None,
    )
}

/// Whether the table lets `name` through from the client.
fn admitted(name: &str) -> bool {
    method(name).is_some_and(|row| row.admitted_from_client())
}

/// `Ok` when the table lets the client's request `name` through, else its error.
fn admit(name: &str) -> Result<(), ErrorData> {
    if admitted(name) {
        Ok(())
    } else {
        Err(not_found(name))
    }
}

impl<S: ServerHandler> ServerHandler for ByTable<S> {
    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        admit("ping")?;
        self.inner.ping(context).await
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        admit("initialize")?;
        self.inner.initialize(request, context).await
    }

    fn negotiate_initialize(
        &self,
        request: &InitializeRequestParams,
    ) -> Result<InitializeResult, ErrorData> {
        self.inner.negotiate_initialize(request)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.inner.supported_protocol_versions()
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        admit("server/discover")?;
        self.inner.discover(context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        admit("completion/complete")?;
        self.inner.complete(request, context).await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        admit("logging/setLevel")?;
        self.inner.set_level(request, context).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        admit("prompts/get")?;
        self.inner.get_prompt(request, context).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        admit("prompts/list")?;
        self.inner.list_prompts(request, context).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        admit("resources/list")?;
        self.inner.list_resources(request, context).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        admit("resources/templates/list")?;
        self.inner.list_resource_templates(request, context).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        admit("resources/read")?;
        self.inner.read_resource(request, context).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        if !admitted("subscriptions/listen") {
            return None;
        }
        self.inner.accepted_subscription_filter(requested)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        admit("subscriptions/listen")?;
        self.inner.listen(context).await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        admit("resources/subscribe")?;
        self.inner.subscribe(request, context).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        admit("resources/unsubscribe")?;
        self.inner.unsubscribe(request, context).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        admit("tools/call")?;
        self.inner.call_tool(request, context).await
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        admit("tools/list")?;
        self.inner.list_tools(request, context).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.get_tool(name)
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        // A method rmcp has no type for (`tasks/list`, a vendor's): only with a row.
        admit(&request.method)?;
        self.inner.on_custom_request(request, context).await
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        context: NotificationContext<RoleServer>,
    ) {
        if admitted("notifications/cancelled") {
            self.inner.on_cancelled(notification, context).await;
        }
    }

    async fn on_progress(
        &self,
        notification: ProgressNotificationParam,
        context: NotificationContext<RoleServer>,
    ) {
        if admitted("notifications/progress") {
            self.inner.on_progress(notification, context).await;
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if admitted("notifications/initialized") {
            self.inner.on_initialized(context).await;
        }
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        if admitted("notifications/roots/list_changed") {
            self.inner.on_roots_list_changed(context).await;
        }
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleServer>,
    ) {
        if admitted(&notification.method) {
            self.inner
                .on_custom_notification(notification, context)
                .await;
        }
    }

    fn get_info(&self) -> ServerConfig {
        self.inner.get_info()
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        admit("tasks/get")?;
        self.inner.get_task(request, context).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        admit("tasks/update")?;
        self.inner.update_task(request, context).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        admit("tasks/cancel")?;
        self.inner.cancel_task(request, context).await
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        admit("skills/list")?;
        self.inner.list_skills(request, context).await
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        admit("skills/get")?;
        self.inner.get_skill(request, context).await
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        admit("resources/directory/read")?;
        self.inner.read_resource_directory(request, context).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_admits_what_the_client_sends_and_no_more() {
        for name in [
            "tools/call",
            "initialize",
            "notifications/cancelled",
            "ping",
        ] {
            assert!(admitted(name), "{name}");
        }
        for name in [
            "tasks/list",
            "tasks/result",
            "vendor/anything",
            "sampling/createMessage",
            "notifications/message",
        ] {
            assert!(!admitted(name), "{name}");
        }
        assert_eq!(
            admit("tasks/list").map_err(|e| e.code),
            Err(ErrorCode::METHOD_NOT_FOUND)
        );
    }
}
