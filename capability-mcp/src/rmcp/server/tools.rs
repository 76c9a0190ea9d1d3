//! `tools/list` and `tools/call`, governed: the listing read once, each caller's decision, each
//! call decided once by the audited dispatch.

use std::sync::Arc;

use ::rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
    Tool,
};
use ::rmcp::service::RequestContext;
use ::rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::{Serialize, Serializer};
use serde_json::Value;

use capability_audit::Request;
use capability_core::authz::Action;
use capability_core::manifest::CapabilityManifest;

use super::listing::ToolListing;
use super::{Asked, GovernedServer, lock};
use crate::visibility::WithheldReason;

/// The most pages of the inner handler's tool list that are followed.
const MAX_PAGES: usize = 1000;
/// The tool recorded for a call naming a tool that is not a valid tool name.
const INVALID_NAME: &str = "invalid_tool_name";

impl<H: ServerHandler> GovernedServer<H> {
    /// Every tool of the inner handler, following its cursors.
    async fn inner_tools(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Vec<Tool>, ErrorData> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let request = (cursor.is_some())
                .then(|| PaginatedRequestParams::default().with_cursor(cursor.clone()));
            let page = self.inner.list_tools(request, context.clone()).await?;
            tools.extend(page.tools);
            match page.next_cursor {
                Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
                Some(_) => {
                    return Err(ErrorData::internal_error(
                        "the tool list repeats its cursor",
                        None,
                    ));
                }
                None => return Ok(tools),
            }
        }
        Err(ErrorData::internal_error(
            format!("the tool list has more than {MAX_PAGES} pages"),
            None,
        ))
    }

    /// The listing served: read from the inner handler the first time (and after it was
    /// invalidated), then kept.
    async fn listing(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<ToolListing>, ErrorData> {
        if let Some(listing) = self.listings.get() {
            return Ok(listing);
        }
        let tools = self.inner_tools(context).await?;
        self.listings.set(tools)?;
        self.listings
            .get()
            .ok_or_else(|| ErrorData::internal_error("the tool list could not be read", None))
    }

    pub(super) async fn governed_list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if request.and_then(|r| r.cursor).is_some() {
            return Err(ErrorData::invalid_params(
                "the governed tool list has one page; it takes no cursor",
                None,
            ));
        }
        let who = self.who(&context);
        let visible = match self.decider(&who) {
            None => Vec::new(),
            Some(decider) => {
                let listing = self.listing(&context).await?;
                let seen = listing.listing.for_caller(&decider);
                listing
                    .tools
                    .iter()
                    .zip(seen.tools())
                    .filter(|(_, listed)| listed.is_visible())
                    .map(|(tool, _)| tool.clone())
                    .collect()
            }
        };
        let mut result = ListToolsResult::with_all_items(visible);
        result.cache_scope = Some(CacheScope::Private);
        Ok(result)
    }

    pub(super) async fn governed_call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let who = self.who(&context);
        let placeholder;
        let listing = match self.decider(&who) {
            // No role: refused below without reading the tools.
            None => None,
            Some(_) => Some(self.listing(&context).await?),
        };
        let listed = listing.as_ref().and_then(|l| l.listing.tool(&name));
        let manifest: &CapabilityManifest = match listed {
            Some(listed) => listed.manifest(),
            None => {
                placeholder = self.placeholder(&name)?;
                &placeholder
            }
        };
        let call = Request::mcp("tools/call", Action::CallTool(manifest), &input);
        let asked = Asked::Tool(&name);
        let scopes = manifest.required_scopes();
        // Withheld from everyone (drift, a duplicate name), or not listed: refused before any
        // decision. (No listing: no role, which `act` refuses.)
        if listing.is_some() {
            let withheld = match listed {
                None => vec![WithheldReason::NotListed],
                Some(listed) => listed.reasons().to_vec(),
            };
            if !withheld.is_empty() {
                return Err(self.refuse(&who, &call, asked, withheld, scopes));
            }
        }
        let session = who.session.clone();
        let run = async { self.inner.call_tool(request, context).await.map(Response) };
        let Response(response) = self.act(&who, &call, asked, scopes, run).await?;
        if let CallToolResponse::Task(task) = &response {
            lock(&self.tasks).insert(task.task.task_id.clone(), session);
        }
        Ok(response)
    }

    /// The manifest recorded for a call of a tool the server does not list.
    fn placeholder(&self, name: &str) -> Result<CapabilityManifest, ErrorData> {
        CapabilityManifest::builder(name)
            .provider(self.server.name())
            .build()
            .or_else(|_| {
                CapabilityManifest::builder(INVALID_NAME)
                    .provider(self.server.name())
                    .build()
            })
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }
}

/// The inner handler's answer, written to the audit trail as the result it is sent as.
pub(super) struct Response(pub(super) CallToolResponse);

impl Serialize for Response {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            CallToolResponse::Complete(result) => result.serialize(serializer),
            CallToolResponse::InputRequired(result) => result.serialize(serializer),
            CallToolResponse::Task(result) => result.serialize(serializer),
            _ => serializer.serialize_none(),
        }
    }
}
