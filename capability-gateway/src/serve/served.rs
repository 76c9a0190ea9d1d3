//! The fleet's resources and prompts served (see `items.rs` for how they are listed and
//! routed): each list filtered for the caller, each read and get routed to its server, decided
//! and recorded.

use ::rmcp::model::{
    CacheScope, CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ReadResourceRequestParams,
    ReadResourceResponse, Reference, SubscribeRequestParams, UnsubscribeRequestParams,
};
use ::rmcp::service::RequestContext;
use ::rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use capability::audit::Request;
use capability::authz::{Action, DenyReason};
use capability::rmcp::traced::{self, Target};

use crate::serve::called::leg;
use crate::serve::completed::Completed;
use crate::serve::gateway::{Gateway, Snapshot};
use crate::serve::items::{UriRoute, shown};
use crate::serve::refusal::{Answer, Why, unanswered};
use crate::serve::who::{Who, may};

impl Gateway {
    /// `resources/list`: every resource of the fleet the caller may read.
    pub(crate) fn resources_listed(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> ListResourcesResult {
        let snapshot = self.current();
        let who = self.who(&snapshot, context);
        let resources = shown(
            snapshot
                .items
                .resources(|server, uri| may(&who, &Action::Resource { server, uri })),
        );
        let mut page = ListResourcesResult::with_all_items(resources);
        page.cache_scope = Some(CacheScope::Private);
        page
    }

    /// `resources/templates/list`: every template whose URI template the caller's patterns match.
    pub(crate) fn templates_listed(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> ListResourceTemplatesResult {
        let snapshot = self.current();
        let who = self.who(&snapshot, context);
        let templates = shown(
            snapshot
                .items
                .templates(|server, uri| may(&who, &Action::Resource { server, uri })),
        );
        let mut page = ListResourceTemplatesResult::with_all_items(templates);
        page.cache_scope = Some(CacheScope::Private);
        page
    }

    /// `resources/read`: routed to the one server that serves the URI, decided on
    /// `server/URI`, recorded.
    pub(crate) async fn resource_read(
        &self,
        request: ReadResourceRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let snapshot = self.current();
        let who = self.who(&snapshot, context);
        let uri = request.uri.clone();
        let input = json!({"uri": uri});
        let refused = |why: &Why| self.refused_item("resource", &uri, &why.of_who(&who));
        let route = snapshot.items.route(&uri);
        let server = self.routed(&snapshot, &who, "resources/read", &uri, route, &input)?;
        let peer = self.leg(&snapshot, server, context).await?.peer;
        let call = Request::mcp(
            "resources/read",
            Action::Resource { server, uri: &uri },
            &input,
        );
        let run = async {
            let mut request = request;
            let target = Target::Resource(&uri);
            let leg = leg(
                &snapshot,
                "resources/read",
                target,
                server,
                context,
                &mut request.meta,
            );
            traced::send(leg, peer.read_resource_once(request))
                .await
                .map(Answer)
                .map_err(unanswered(server))
        };
        let Answer(read) = self.act(&snapshot, &who, &call, refused, run).await?;
        Ok(read.completed())
    }

    /// `prompts/list`: every prompt the caller may get, under its shown name.
    pub(crate) fn prompts_listed(&self, context: &RequestContext<RoleServer>) -> ListPromptsResult {
        let snapshot = self.current();
        let who = self.who(&snapshot, context);
        let prompts = shown(
            snapshot
                .items
                .prompts(|server, name| may(&who, &Action::Prompt { server, name })),
        );
        let mut page = ListPromptsResult::with_all_items(prompts);
        page.cache_scope = Some(CacheScope::Private);
        page
    }

    /// `prompts/get`: routed by the shown name, got under the server's own, decided on
    /// `server/prompt`, recorded.
    pub(crate) async fn prompt_got(
        &self,
        request: GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let snapshot = self.current();
        let who = self.who(&snapshot, context);
        let shown = request.name.clone();
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let refused = |why: &Why| self.refused_item("prompt", &shown, &why.of_who(&who));
        let Some((server, name)) = snapshot.items.prompt(&shown) else {
            let why = match snapshot.items.prompt_claimed_by(&shown) {
                Some(by) => format!(
                    "its shown name is claimed by {}, so which one it is is not certain",
                    by.join(" and ")
                ),
                None => "no server lists a prompt of this name".to_owned(),
            };
            let input = json!({"name": shown, "arguments": arguments});
            let action = Action::Prompt {
                server: "",
                name: &shown,
            };
            let call = Request::mcp("prompts/get", action, &input);
            return Err(refused(&self.refuse(
                &snapshot,
                &who,
                &call,
                &[DenyReason::Withheld { why }],
            )));
        };
        let peer = self.leg(&snapshot, server, context).await?.peer;
        let input = json!({"name": name, "arguments": arguments});
        let call = Request::mcp("prompts/get", Action::Prompt { server, name }, &input);
        let mut forwarded = request.clone();
        name.clone_into(&mut forwarded.name);
        let run = async {
            let target = Target::Prompt(name);
            let leg = leg(
                &snapshot,
                "prompts/get",
                target,
                server,
                context,
                &mut forwarded.meta,
            );
            traced::send(leg, peer.get_prompt_once(forwarded))
                .await
                .map(Answer)
                .map_err(unanswered(server))
        };
        let Answer(got) = self.act(&snapshot, &who, &call, refused, run).await?;
        Ok(got.completed())
    }
}

impl Gateway {
    /// The one server `route` names for `method` on `uri`, and its connection; or the refusal,
    /// on record under no server, when no server or more than one serves it.
    fn routed<'s>(
        &self,
        snapshot: &'s Snapshot,
        who: &Who,
        method: &str,
        uri: &str,
        route: UriRoute<'s>,
        input: &Value,
    ) -> Result<&'s str, ErrorData> {
        let withheld = |why: String| {
            let action = Action::Resource { server: "", uri };
            let call = Request::mcp(method, action, input);
            let why = self.refuse(snapshot, who, &call, &[DenyReason::Withheld { why }]);
            self.refused_item("resource", uri, &why)
        };
        let server = match route {
            UriRoute::Server(server) => server,
            UriRoute::Shared(servers) => {
                return Err(withheld(format!(
                    "servers {} each serve it, so which one would answer is not certain",
                    servers.join(" and ")
                )));
            }
            UriRoute::Unknown => {
                return Err(withheld(
                    "no server lists it or has a template that matches it".to_owned(),
                ));
            }
        };
        Ok(server)
    }

    /// `resources/subscribe` and `resources/unsubscribe`: routed to the server that serves the
    /// URI, decided on `server/URI`, recorded, passed on. The server's updates reach the stdio
    /// client for a URI its role may read (`upstream.rs`).
    pub(crate) async fn subscription(
        &self,
        uri: String,
        subscribe: bool,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let method = if subscribe {
            "resources/subscribe"
        } else {
            "resources/unsubscribe"
        };
        let snapshot = self.current();
        let who = self.who(&snapshot, context);
        let input = json!({"uri": uri});
        let route = snapshot.items.route(&uri);
        let server = self.routed(&snapshot, &who, method, &uri, route, &input)?;
        // A client of 2025-11-25 subscribes on the server's session of that revision, which
        // keeps subscriptions (2026-07-28 has none).
        let peer = self.leg(&snapshot, server, context).await?.peer;
        let call = Request::mcp(method, Action::Resource { server, uri: &uri }, &input);
        let refused = |why: &Why| self.refused_item("resource", &uri, &why.of_who(&who));
        let run = async {
            let target = Target::Resource(&uri);
            #[allow(deprecated)]
            let sent = if subscribe {
                let mut request = SubscribeRequestParams::new(uri.clone());
                let leg = leg(
                    &snapshot,
                    method,
                    target,
                    server,
                    context,
                    &mut request.meta,
                );
                traced::send(leg, peer.subscribe(request)).await
            } else {
                let mut request = UnsubscribeRequestParams::new(uri.clone());
                let leg = leg(
                    &snapshot,
                    method,
                    target,
                    server,
                    context,
                    &mut request.meta,
                );
                traced::send(leg, peer.unsubscribe(request)).await
            };
            sent.map_err(unanswered(server))
        };
        self.act(&snapshot, &who, &call, refused, run).await
    }

    /// `completion/complete`: routed by its reference (a prompt's shown name, got under the
    /// server's own; a resource template as its server lists it), decided on `server/prompt`
    /// or `server/URI`, recorded, passed on.
    pub(crate) async fn completion(
        &self,
        request: CompleteRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        const METHOD: &str = "completion/complete";
        let snapshot = self.current();
        let who = self.who(&snapshot, context);
        let input = serde_json::to_value(&request).unwrap_or(Value::Null);
        let mut forwarded = request.clone();
        let (server, peer, call, named) = match &request.r#ref {
            Reference::Prompt(prompt) => {
                let Some((server, name)) = snapshot.items.prompt(&prompt.name) else {
                    let action = Action::Prompt {
                        server: "",
                        name: &prompt.name,
                    };
                    let call = Request::mcp(METHOD, action, &input);
                    let why = "no server lists a prompt of this name (or more than one claims it)";
                    let reasons = [DenyReason::Withheld {
                        why: why.to_owned(),
                    }];
                    let refused = self.refuse(&snapshot, &who, &call, &reasons);
                    return Err(self.refused_item("prompt", &prompt.name, &refused));
                };
                let peer = self.leg(&snapshot, server, context).await?.peer;
                let mut own = prompt.clone();
                name.clone_into(&mut own.name);
                forwarded.r#ref = Reference::Prompt(own);
                let call = Request::mcp(METHOD, Action::Prompt { server, name }, &input);
                (server, peer, call, ("prompt", prompt.name.as_str()))
            }
            Reference::Resource(template) => {
                let route = snapshot.items.template_route(&template.uri);
                let server = self.routed(&snapshot, &who, METHOD, &template.uri, route, &input)?;
                let peer = self.leg(&snapshot, server, context).await?.peer;
                let action = Action::Resource {
                    server,
                    uri: &template.uri,
                };
                let call = Request::mcp(METHOD, action, &input);
                (server, peer, call, ("resource", template.uri.as_str()))
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "a completion's reference is a prompt or a resource template",
                    None,
                ));
            }
        };
        let refused = |why: &Why| self.refused_item(named.0, named.1, &why.of_who(&who));
        let run = async {
            let leg = leg(
                &snapshot,
                METHOD,
                Target::None,
                server,
                context,
                &mut forwarded.meta,
            );
            traced::send(leg, peer.complete(forwarded))
                .await
                .map_err(unanswered(server))
        };
        self.act(&snapshot, &who, &call, refused, run).await
    }
}

impl serde::Serialize for Answer<ReadResourceResponse> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            ReadResourceResponse::Complete(result) => result.serialize(serializer),
            ReadResourceResponse::InputRequired(asked) => asked.serialize(serializer),
            _ => serializer.serialize_str("a response this build does not know"),
        }
    }
}

impl serde::Serialize for Answer<GetPromptResponse> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            GetPromptResponse::Complete(result) => result.serialize(serializer),
            GetPromptResponse::InputRequired(asked) => asked.serialize(serializer),
            _ => serializer.serialize_str("a response this build does not know"),
        }
    }
}
