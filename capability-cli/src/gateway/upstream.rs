//! The gateway's connections to its servers: each spawned (its output read strictly) or
//! reached over HTTP, listed, and watched for list changes.

use std::process::Stdio;
use std::sync::Arc;

use ::rmcp::model::Tool;
use ::rmcp::service::{ClientServiceExt, NotificationContext, RunningService};
use ::rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use ::rmcp::{ClientHandler, Peer, RoleClient};
use tokio::process::Command;
use tokio::sync::mpsc;

use capability::mcp::Server;

use super::items::Listed;
use super::lane::Lane;
use super::reach::{Reach, Seen};
use super::relay::{Calls, Levels};
use super::source::ServerSource;
use crate::proxy::{ProgressRelay, ServerRequests};
use capability::authz::ServerRequestKind;

/// Why a server's request on a call of the HTTP lane has no client to go to: the lane takes
/// only the calls of roles that allow the server no request (the others go through rmcp's
/// path, which relays them), so such a request is one the role does not allow.
const LANE_UNNAMED: &str = "it came on a call whose role allows the server no request";

/// The handler facing one server: tells the gateway when its tools, resources or prompts change,
/// and passes the server's requests (sampling, elicitation, roots) to the client only where
/// the client's role allows them (the policy's `server_requests`), each one on record. The
/// HTTP lane ([`Reach`](super::reach::Reach)) hands it what a server sends on a call's stream.
#[derive(Clone)]
pub(super) struct Watch {
    server: String,
    changed: mpsc::UnboundedSender<String>,
    /// `None` for a connection that only lists (`--check`): every request refused.
    requests: Option<Arc<ServerRequests>>,
    /// The server's progress for the calls passed on through rmcp, back to their clients.
    pub(super) progress: ProgressRelay,
    /// The calls in flight through rmcp, where the server's requests and log messages go.
    pub(super) calls: Calls,
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
    pub(super) fn fresh(&self) -> Watch {
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
    pub(super) async fn asked_raw(&self, message: &str, id: &str) -> String {
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
    pub(super) async fn notified_raw(&self, message: &str) {
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

/// One live server.
pub(super) struct Connection {
    pub(super) service: RunningService<RoleClient, Watch>,
    /// The forwarding lane next to rmcp's connection (a spawned server's pipes only).
    pub(super) lane: Option<Arc<Lane>>,
    /// The forwarding lane on the session of rmcp's connection (an HTTP server only).
    pub(super) reach: Option<Arc<Reach>>,
    /// The session of 2025-11-25 next to a connection of 2026-07-28 (an HTTP server only).
    pub(super) legacy: Option<Arc<super::legacy::Legacy>>,
    /// The spawned process, watched (killed when dropped).
    pub(super) process: Option<super::process::Process>,
    /// How the server ended, once it did.
    pub(super) exit: Arc<super::process::Exit>,
}

impl Connection {
    pub(super) fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    /// The relay of the server's progress for the calls passed on through rmcp.
    pub(super) fn progress(&self) -> ProgressRelay {
        self.service.service().progress.clone()
    }

    /// The calls in flight through rmcp, where the server's requests and log messages go.
    pub(super) fn calls(&self) -> Calls {
        self.service.service().calls.clone()
    }
}

/// Starts (or reaches) `server` from `source` and connects to it.
#[allow(clippy::too_many_arguments)] // what a connection is made of, from its spec
pub(super) async fn connect(
    server: &str,
    source: &ServerSource,
    env: &[(String, String)],
    token: Option<&super::spec::Secret>,
    changed: mpsc::UnboundedSender<String>,
    requests: Option<Arc<ServerRequests>>,
    levels: Levels,
) -> Result<Connection, String> {
    let watch = Watch {
        server: server.to_owned(),
        changed,
        requests,
        progress: ProgressRelay::default(),
        calls: Calls::default(),
        levels,
    };
    match source {
        ServerSource::Command(words) => {
            let (program, args) = words.split_first().ok_or("an empty command")?;
            let mut child = Command::new(program)
                .args(args)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start `{program}`: {e}"))?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                return Err(format!("cannot start `{program}`: no standard streams"));
            };
            // A line that writes a key twice never reaches rmcp, which would keep the last,
            // nor the lane. The server's output is read on a thread of its own (the lane's
            // answers are handled there).
            let cannot = |e: std::io::Error| format!("cannot start `{program}`: {e}");
            let exit = Arc::new(super::process::Exit::default());
            let lane = Lane::new(server, stdin, Arc::clone(&exit)).map_err(cannot)?;
            let output = stdout
                .into_owned_fd()
                .and_then(crate::blocking::file)
                .map_err(cannot)?;
            let name = server.to_owned();
            let cut = Arc::clone(&exit);
            let stdout = crate::supervise::strict::strict_lines_threaded(
                output,
                move |why| {
                    super::note(format_args!(
                        "server `{name}`: {}",
                        crate::escape::escape(why)
                    ));
                    // Its output cut off is how it ended: said before the exit it leads to.
                    if let Some(cut_off) = why.strip_prefix("the server's ") {
                        cut.set(cut_off.to_owned());
                    }
                },
                lane.tap(watch.progress.clone()),
            )
            .map_err(cannot)?;
            let service = watch
                .serve_with_lifecycle(
                    crate::lines::rmcp_lines(stdout, lane.rmcp_input()),
                    crate::proxy::lifecycle(),
                )
                .await
                .map_err(|e| format!("`{program}` did not connect: {e}"))?;
            if let Some(info) = service.peer().peer_info() {
                lane.agreed(info.protocol_version.to_string());
            }
            Ok(Connection {
                service,
                lane: Some(lane),
                reach: None,
                legacy: None,
                process: Some(super::process::Process::watch(
                    child,
                    program,
                    Arc::clone(&exit),
                )),
                exit,
            })
        }
        ServerSource::Url(url) => {
            let seen = Seen::new(crate::proxy::http_client().map_err(|e| format!("{url}: {e}"))?);
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(token) = token {
                config = config.auth_header(token.0.clone());
            }
            let transport = crate::proxy::http_transport_with(seen.clone(), config);
            let reach = Reach::new(server, seen, watch.clone());
            let spare = watch.fresh();
            let service = watch
                .serve_with_lifecycle(transport, crate::proxy::lifecycle())
                .await
                .map_err(|e| format!("{url} did not connect: {e}"))?;
            let mut legacy = None;
            if let Some(info) = service.peer().peer_info() {
                reach.agreed(info.protocol_version.to_string());
                if !info.protocol_version.has_initialize() {
                    legacy = Some(super::legacy::Legacy::new(
                        server,
                        url,
                        token.cloned(),
                        spare,
                    ));
                }
            }
            Ok(Connection {
                service,
                lane: None,
                reach: Some(reach),
                legacy,
                process: None,
                exit: Arc::default(),
            })
        }
        ServerSource::File(path) => Err(format!(
            "{} is a recorded tool list: a gateway serves live servers (`command` or `url`)",
            path.display()
        )),
    }
}

/// The most pages a server's list of resources, templates or prompts may take.
const MAX_PAGES: usize = 100;

/// How long one page of such a list may take: a server that does not answer serves none of
/// that kind, rather than keep the fleet from starting.
const PAGE_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Every page of one list: `page` asks for the page at a cursor and answers its items and the
/// next cursor. A cursor seen twice (a loop) or more than [`MAX_PAGES`] pages is an error.
async fn pages<T, F, Fut>(what: &str, mut page: F) -> Result<Vec<T>, String>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<String>), ::rmcp::ServiceError>>,
{
    let mut items = Vec::new();
    let mut cursor = None;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..MAX_PAGES {
        let (more, next) = tokio::time::timeout(PAGE_WITHIN, page(cursor.take()))
            .await
            .map_err(|_| format!("did not list its {what} within {} s", PAGE_WITHIN.as_secs()))?
            .map_err(|e| format!("did not list its {what}: {e}"))?;
        items.extend(more);
        match next {
            None => return Ok(items),
            Some(next) if !seen.insert(next.clone()) => {
                return Err(format!(
                    "did not list its {what}: the cursor {next:?} came twice (a pagination loop)"
                ));
            }
            Some(next) => cursor = Some(next),
        }
    }
    Err(format!(
        "did not list its {what}: still more pages after {MAX_PAGES}"
    ))
}

/// The resources, resource templates and prompts of `peer`'s server, each kind listed only
/// when the server says it has it. A kind that cannot be listed is served empty, and said.
pub(super) async fn list_items(peer: &Peer<RoleClient>, server: &str) -> Listed {
    list_served_items(peer, server, true, true).await
}

/// [`list_items`], of the kinds served (`resources`, `prompts`): the others are not asked.
pub(super) async fn list_served_items(
    peer: &Peer<RoleClient>,
    server: &str,
    resources: bool,
    prompts: bool,
) -> Listed {
    use ::rmcp::model::PaginatedRequestParams;
    let params = |cursor| Some(PaginatedRequestParams::default().with_cursor(cursor));
    let capabilities = peer.peer_info().map(|info| info.capabilities.clone());
    let has_resources = resources && capabilities.as_ref().is_some_and(|c| c.resources.is_some());
    let has_prompts = prompts && capabilities.as_ref().is_some_and(|c| c.prompts.is_some());
    fn kept<T>(server: &str, listed: Result<Vec<T>, String>) -> Vec<T> {
        listed.unwrap_or_else(|why| {
            super::note(format_args!(
                "server `{server}` {}: none of them is served",
                crate::escape::escape(&why)
            ));
            Vec::new()
        })
    }
    let mut listed = Listed::default();
    if has_resources {
        listed.resources = kept(
            server,
            pages("resources", |cursor| async move {
                let page = peer.list_resources(params(cursor)).await?;
                Ok((page.resources, page.next_cursor))
            })
            .await,
        );
        listed.templates = kept(
            server,
            pages("resource templates", |cursor| async move {
                let page = peer.list_resource_templates(params(cursor)).await?;
                Ok((page.resource_templates, page.next_cursor))
            })
            .await,
        );
    }
    if has_prompts {
        listed.prompts = kept(
            server,
            pages("prompts", |cursor| async move {
                let page = peer.list_prompts(params(cursor)).await?;
                Ok((page.prompts, page.next_cursor))
            })
            .await,
        );
    }
    listed
}

/// Every tool of `peer`'s server.
pub(super) async fn list(peer: &Peer<RoleClient>, server: &Server) -> Result<Vec<Tool>, String> {
    capability::rmcp::list_tools(peer, server)
        .await
        .map_err(|e| format!("did not list its tools: {e}"))
}
