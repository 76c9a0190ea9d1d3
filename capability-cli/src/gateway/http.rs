//! `capability gateway --listen <address>`: the fleet over Streamable HTTP, behind the HTTP edge
//! (`capability-http`): OAuth 2.1 access tokens of the policy's `[auth]` or its
//! `[bearer_tokens]`, Origin, body, rate and session limits, a call whose token lacks a scope of
//! its tool answered `403 insufficient_scope`, refusals at the edge recorded. Each
//! request's role comes from its token and is narrowed to the token's scopes; its budget is its
//! principal's and session's.

use std::sync::Arc;
use std::time::Duration;

use ::rmcp::transport::streamable_http_server::StreamableHttpService;
use ::rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;

use capability::Policy;
use capability::audit::AuditedDispatch;
use capability::mcp::Server;
use capability_http::{Credentials, Edge, EdgeConfig};

use super::GatewayError;
use super::handler::Gateway;

/// The MCP endpoint's path.
const PATH: &str = "/mcp";

/// Starts serving `gateway` on `listener`; the endpoint's URL.
pub(super) async fn start(
    gateway: &Gateway,
    policy: &Policy,
    listener: std::net::TcpListener,
    dispatch: Arc<AuditedDispatch>,
) -> Result<String, GatewayError> {
    crate::proxy::check_credentials(policy).map_err(GatewayError)?;
    let credentials = Credentials::from_policy(policy)
        .await
        .map_err(GatewayError)?;
    let address = listener
        .local_addr()
        .map_err(|e| GatewayError(format!("cannot read the address listened on: {e}")))?;
    let listener = listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
        .map_err(|e| GatewayError(format!("cannot listen on {address}: {e}")))?;
    let limits = policy.http().clone();
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(Duration::from_secs(limits.session_idle_secs()));
    let manager = Arc::new(manager);
    let handler = gateway.clone();
    let listed = gateway.clone();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::clone(&manager),
        crate::proxy::http_config(address),
    );
    let edge = Edge::new(
        service,
        EdgeConfig::new(credentials, limits)
            .endpoint(PATH)
            .recording(dispatch, &Server::untrusted("gateway"), policy.version())
            // A call of a tool whose scopes the token lacks is answered `403 insufficient_scope`
            // here, with the tool's own manifest (its server, its name) on record.
            .tool_manifests(move |shown| {
                let snapshot = listed.current();
                snapshot
                    .fleet
                    .route(shown)
                    .map(|route| route.listed.manifest().clone())
            })
            .sessions(manager),
    );
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let service = TowerToHyperService::new(edge.clone());
                    tokio::spawn(async move {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                Err(error) => super::note(format_args!("cannot accept a connection: {error}")),
            }
        }
    });
    Ok(format!("http://{address}{PATH}"))
}
