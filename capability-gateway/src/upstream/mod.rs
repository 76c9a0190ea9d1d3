//! The gateway's connections to its servers: each spawned (its output read strictly) or
//! reached over HTTP, listed, and watched for list changes.

pub(crate) mod delegate;
pub(crate) mod http;
pub(crate) mod legacy;
pub(crate) mod pooled;
pub(crate) mod progress;
pub(crate) mod relay;
pub(crate) mod requests;
pub mod secrets;
pub(crate) mod stdio;

mod connect;
mod list;
mod unconnected;

pub(crate) use connect::connect;
pub(crate) use list::{Listed, list, list_items, list_served_items};

use std::sync::Arc;

use ::rmcp::service::{NotificationContext, RunningService};
use ::rmcp::{ClientHandler, Peer, RoleClient};
use tokio::sync::mpsc;

use crate::upstream::http::Reach;
use crate::upstream::progress::Relay as ProgressRelay;
use crate::upstream::relay::{Calls, Levels};
use crate::upstream::requests::ServerRequests;
use crate::upstream::stdio::Lane;
use capability::authz::ServerRequestKind;

/// Why a server's request on a call of the HTTP lane has no client to go to: the lane takes
/// only the calls of roles that allow the server no request (the others go through rmcp's
/// path, which relays them), so such a request is one the role does not allow.
const LANE_UNNAMED: &str = "it came on a call whose role allows the server no request";

/// The handler facing one server: tells the gateway when its tools, resources or prompts change,
/// and passes the server's requests (sampling, elicitation, roots) to the client only where
/// the client's role allows them (the policy's `server_requests`), each one on record. The
/// HTTP lane ([`Reach`](crate::upstream::http::Reach)) hands it what a server sends on a call's stream.
#[derive(Clone)]
pub(crate) struct Watch {
    server: String,
    changed: mpsc::UnboundedSender<String>,
    /// `None` for a connection that only lists (`--check`): every request refused.
    requests: Option<Arc<ServerRequests>>,
    /// The server's progress for the calls passed on through rmcp, back to their clients.
    pub(crate) progress: ProgressRelay,
    /// The calls in flight through rmcp, where the server's requests and log messages go.
    pub(crate) calls: Calls,
    /// The stdio client's log level, for a log message while no call is in flight.
    levels: Levels,
}

#[allow(deprecated)]
impl ClientHandler for Watch {
    fn get_info(&self) -> ::rmcp::model::ClientConfig {
        self.requests
            .as_ref()
            .map(|r| r.client_config())
            .unwrap_or_default()
    }

    async fn create_message(
        &self,
        params: ::rmcp::model::CreateMessageRequestParams,
        context: ::rmcp::service::RequestContext<RoleClient>,
    ) -> Result<::rmcp::model::CreateMessageResult, ::rmcp::ErrorData> {
        let input = serde_json::to_value(&params).unwrap_or_default();
        let unnamed = match self
            .relayed(&context, ServerRequestKind::Sampling, input)
            .await
        {
            Ok(answer) => return answer,
            Err(why) => why,
        };
        match &self.requests {
            Some(requests) => requests.sample(params, &unnamed).await,
            None => Err(::rmcp::ErrorData::method_not_found::<
                ::rmcp::model::CreateMessageRequestMethod,
            >()),
        }
    }

    async fn create_elicitation(
        &self,
        params: ::rmcp::model::ElicitRequestParams,
        context: ::rmcp::service::RequestContext<RoleClient>,
    ) -> Result<::rmcp::model::ElicitResult, ::rmcp::ErrorData> {
        let input = serde_json::to_value(&params).unwrap_or_default();
        let unnamed = match self
            .relayed(&context, ServerRequestKind::Elicitation, input)
            .await
        {
            Ok(answer) => return answer,
            Err(why) => why,
        };
        match &self.requests {
            Some(requests) => requests.elicit(params, &unnamed).await,
            None => Err(::rmcp::ErrorData::method_not_found::<
                ::rmcp::model::ElicitationCreateRequestMethod,
            >()),
        }
    }

    async fn list_roots(
        &self,
        context: ::rmcp::service::RequestContext<RoleClient>,
    ) -> Result<::rmcp::model::ListRootsResult, ::rmcp::ErrorData> {
        let input = serde_json::json!({});
        let unnamed = match self
            .relayed(&context, ServerRequestKind::Roots, input)
            .await
        {
            Ok(answer) => return answer,
            Err(why) => why,
        };
        match &self.requests {
            Some(requests) => requests.roots(&unnamed).await,
            None => Err(::rmcp::ErrorData::method_not_found::<
                ::rmcp::model::ListRootsRequestMethod,
            >()),
        }
    }

    async fn on_logging_message(
        &self,
        params: ::rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if self.calls.log(params.clone()).await {
            return;
        }
        // No one client's call in flight: over stdio, the one client, at its level.
        if let Some(requests) = &self.requests {
            requests.log(params, self.levels.single()).await;
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changed.send(self.server.clone());
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changed.send(self.server.clone());
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changed.send(self.server.clone());
    }

    async fn on_progress(
        &self,
        params: ::rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.progress(params).await;
    }

    /// A resource the client subscribed to (through the gateway, decided) changed: told to
    /// the stdio client when its role may read it on this server.
    async fn on_resource_updated(
        &self,
        params: ::rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(requests) = &self.requests {
            requests.resource_updated(params).await;
        }
    }
}

impl Watch {
    /// The same handler for another connection to the same server: its requests decided as
    /// this one's, its progress and calls its own.
    pub(crate) fn fresh(&self) -> Watch {
        Watch {
            progress: ProgressRelay::default(),
            calls: Calls::default(),
            ..self.clone()
        }
    }

    /// A server's request relayed to the client of the call it belongs to (decided there for
    /// that client's role, and recorded): its answer; `Err` with why no call can be named.
    async fn relayed<T: serde::de::DeserializeOwned>(
        &self,
        context: &::rmcp::service::RequestContext<RoleClient>,
        kind: ServerRequestKind,
        input: serde_json::Value,
    ) -> Result<Result<T, ::rmcp::ErrorData>, String> {
        let origin = context
            .extensions
            .get::<::rmcp::service::InboundStreamOrigin>();
        let answer = self.calls.ask(origin, kind, input).await?;
        Ok(answer.and_then(|value| {
            serde_json::from_value(value).map_err(|e| {
                ::rmcp::ErrorData::internal_error(
                    format!("the client's answer to `{}` is not one: {e}", kind.method()),
                    None,
                )
            })
        }))
    }

    /// A request the server sent on a lane's call (`message` as written, `id` its id): the
    /// answer, a JSON-RPC message, as rmcp's connection would give it.
    pub(crate) async fn asked_raw(&self, message: &str, id: &str) -> String {
        use ::rmcp::model::{ServerJsonRpcMessage, ServerRequest};
        fn value<T: serde::Serialize>(
            result: Result<T, ::rmcp::ErrorData>,
        ) -> Result<serde_json::Value, ::rmcp::ErrorData> {
            result.and_then(|r| {
                serde_json::to_value(r)
                    .map_err(|e| ::rmcp::ErrorData::internal_error(e.to_string(), None))
            })
        }
        let answer = match serde_json::from_str::<ServerJsonRpcMessage>(message) {
            Ok(ServerJsonRpcMessage::Request(request)) => match (request.request, &self.requests) {
                (ServerRequest::PingRequest(_), _) => Ok(serde_json::json!({})),
                (ServerRequest::CreateMessageRequest(r), Some(requests)) => {
                    value(requests.sample(r.params, LANE_UNNAMED).await)
                }
                (ServerRequest::ElicitRequest(r), Some(requests)) => {
                    value(requests.elicit(r.params, LANE_UNNAMED).await)
                }
                (ServerRequest::ListRootsRequest(_), Some(requests)) => {
                    value(requests.roots(LANE_UNNAMED).await)
                }
                (ServerRequest::CustomRequest(r), _) => Err(::rmcp::ErrorData::new(
                    ::rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                    r.method,
                    None,
                )),
                _ => Err(::rmcp::ErrorData::new(
                    ::rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                    "a request this connection does not answer",
                    None,
                )),
            },
            Ok(_) | Err(_) => Err(::rmcp::ErrorData::invalid_request(
                "the request could not be read",
                None,
            )),
        };
        let id: serde_json::Value = serde_json::from_str(id).unwrap_or(serde_json::Value::Null);
        let message = match answer {
            Ok(result) => serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        message.to_string()
    }

    /// A notification the server sent on a lane's call (`message` as written), where rmcp's
    /// connection would pass it.
    pub(crate) async fn notified_raw(&self, message: &str) {
        use ::rmcp::model::{ServerJsonRpcMessage, ServerNotification};
        let Ok(ServerJsonRpcMessage::Notification(notification)) =
            serde_json::from_str::<ServerJsonRpcMessage>(message)
        else {
            return;
        };
        match notification.notification {
            ServerNotification::ProgressNotification(n) => self.progress.progress(n.params).await,
            ServerNotification::LoggingMessageNotification(n) => {
                if let Some(requests) = &self.requests {
                    requests.log(n.params, self.levels.single()).await;
                }
            }
            ServerNotification::ResourceUpdatedNotification(n) => {
                if let Some(requests) = &self.requests {
                    requests.resource_updated(n.params).await;
                }
            }
            ServerNotification::ToolListChangedNotification(_)
            | ServerNotification::ResourceListChangedNotification(_)
            | ServerNotification::PromptListChangedNotification(_) => {
                let _ = self.changed.send(self.server.clone());
            }
            _ => {}
        }
    }
}

/// rmcp's connection to one server, with the gateway's handler facing it.
pub(crate) type Service = RunningService<RoleClient, Watch>;

/// One live server.
pub(crate) struct Connection {
    /// rmcp's connection: closed once the last holder lets go of it (an HTTP server's is held
    /// by its lane too, [`Reach`], for the calls still in flight on it after a restart).
    pub(crate) service: Arc<Service>,
    /// The forwarding lane next to rmcp's connection (a spawned server's pipes only).
    pub(crate) lane: Option<Arc<Lane>>,
    /// The forwarding lane on the session of rmcp's connection (an HTTP server only).
    pub(crate) reach: Option<Arc<Reach>>,
    /// The session of 2025-11-25 next to a connection of 2026-07-28 (an HTTP server only).
    pub(crate) legacy: Option<Arc<crate::upstream::legacy::Legacy>>,
    /// The spawned process, watched (killed when dropped).
    pub(crate) process: Option<crate::process::Process>,
    /// How the server ended, once it did.
    pub(crate) exit: Arc<crate::process::Exit>,
}

impl Connection {
    pub(crate) fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    /// Every tool of the server ([`list`]). A spawned server that exited while listing says
    /// how it ended, which says more than the closed connection ("Transport closed"): its exit
    /// is said a moment after its output closes, and one that answered with an error is waited
    /// for no longer than that.
    pub(crate) async fn tools(
        &self,
        server: &capability::mcp::Server,
    ) -> Result<Vec<::rmcp::model::Tool>, String> {
        match list(&self.peer(), server).await {
            Ok(tools) => Ok(tools),
            Err(why) if self.process.is_some() => {
                Err(match self.exit.wait(crate::process::LEARN_WHY).await {
                    Some(how) => format!("{how} while listing its tools"),
                    None => why,
                })
            }
            Err(why) => Err(why),
        }
    }

    /// The relay of the server's progress for the calls passed on through rmcp.
    pub(crate) fn progress(&self) -> ProgressRelay {
        self.service.service().progress.clone()
    }

    /// The calls in flight through rmcp, where the server's requests and log messages go.
    pub(crate) fn calls(&self) -> Calls {
        self.service.service().calls.clone()
    }

    /// Closes rmcp's connection and waits until it ended (an HTTP server's session deleted):
    /// for a connection made only to list the server, which nothing else holds.
    pub(crate) async fn close(self) {
        let Connection { service, reach, .. } = self;
        drop(reach);
        match Arc::try_unwrap(service) {
            Ok(service) => {
                let _ = service.cancel().await;
            }
            Err(held) => held.cancellation_token().cancel(),
        }
    }
}
