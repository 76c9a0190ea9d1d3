//! `capability gateway --listen <address>`: the fleet over Streamable HTTP, behind the HTTP edge
//! (`capability-http`): OAuth 2.1 access tokens of the policy's `[auth]` or its
//! `[bearer_tokens]`, Origin, body, rate and session limits, a call whose token lacks a scope of
//! its tool answered `403 insufficient_scope`, refusals at the edge recorded. Each
//! request's role comes from its token and is narrowed to the token's scopes; its budget is its
//! principal's and session's. With `[approvals] page_roles`, the approvals page too (`page/`).

pub(crate) mod credentials;
mod page;

use std::sync::Arc;

use ::rmcp::transport::streamable_http_server::StreamableHttpService;
use ::rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use hyper_util::service::TowerToHyperService;

use capability::Policy;
use capability::audit::AuditedDispatch;
use capability::mcp::Server;
use capability_http::{Credentials, Edge, EdgeConfig};

use crate::GatewayError;
use crate::lane::http::HttpLane;
use crate::serve::gateway::Gateway;

/// The MCP endpoint's path.
const PATH: &str = "/mcp";

/// The HTTP front's service behind the edge: rmcp's, with `tools/call` on the lane where it can
/// be ([`HttpLane`]), and the approvals page beside it ([`page::Paged`]).
type Service = page::Paged<
    HttpLane<StreamableHttpService<capability::rmcp::ByTable<Gateway>, LocalSessionManager>>,
>;

/// The running HTTP front: what a reload changes of it.
pub(crate) struct HttpFront {
    edge: Edge<Service>,
    gateway: Gateway,
    dispatch: Arc<AuditedDispatch>,
    manager: Arc<LocalSessionManager>,
    address: std::net::SocketAddr,
}

impl HttpFront {
    /// The edge's config under `policy` (its `[auth]` or `[bearer_tokens]`, its `[http]`), or
    /// why it cannot be had (a bad `[auth]`, an issuer whose keys cannot be fetched): checked
    /// before a reload changes anything.
    pub(crate) async fn config(&self, policy: &Policy) -> Result<EdgeConfig, String> {
        edge_config(
            policy,
            &self.gateway,
            self.dispatch.clone(),
            self.manager.clone(),
            self.address,
        )
        .await
    }

    /// Closes the sessions idle past the policy's `[http] session_idle_secs` (the gateway's
    /// tick calls it).
    pub(crate) fn close_idle(&self) {
        self.edge.close_idle();
    }

    /// Serves under `config` from now on (sessions and rates kept).
    pub(crate) fn apply(&self, config: EdgeConfig) {
        self.edge.reload(config);
    }
}

/// The edge's config: the policy's credentials and limits, refusals recorded in the gateway's
/// trail under the policy's version, a tool found by its shown name in the fleet's listing.
async fn edge_config(
    policy: &Policy,
    gateway: &Gateway,
    dispatch: Arc<AuditedDispatch>,
    manager: Arc<LocalSessionManager>,
    address: std::net::SocketAddr,
) -> Result<EdgeConfig, String> {
    crate::front::http::credentials::check_credentials(policy)?;
    let credentials = Credentials::from_policy(policy).await?;
    let listed = gateway.clone();
    let mut config = EdgeConfig::new(credentials, policy.http().clone());
    if !gateway.current().delegated.is_empty() {
        // Kept for the exchange at the issuer; the header is still taken off at the edge.
        config = config.keep_subject_token();
    }
    if policy
        .approvals()
        .is_some_and(|approvals| !approvals.page_roles().is_empty())
    {
        config = config.page(page::PREFIX);
    }
    config = config.page(page::receipts::PREFIX);
    Ok(config
        .endpoint(PATH)
        .hosts(capability_http::listen::allowed_hosts(address))
        .recording(
            dispatch,
            &Server::untrusted(gateway.scope.as_ref()),
            policy.version(),
        )
        // A call of a tool whose scopes the token lacks is answered `403 insufficient_scope`
        // here, with the tool's own manifest (its server, its name) on record.
        .tool_manifests(move |shown| {
            let snapshot = listed.current();
            snapshot
                .fleet
                .route(shown)
                .map(|route| route.listed.manifest().clone())
        })
        .sessions(manager))
}

/// Starts serving `gateway` on `listener`: the endpoint's URL, and the front.
pub(crate) async fn start(
    gateway: &Gateway,
    policy: &Policy,
    listener: std::net::TcpListener,
    dispatch: Arc<AuditedDispatch>,
    trail: &str,
) -> Result<(String, HttpFront), GatewayError> {
    let address = listener
        .local_addr()
        .map_err(|e| GatewayError::Config(format!("cannot read the address listened on: {e}")))?;
    let listener = listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
        .map_err(|e| GatewayError::Config(format!("cannot listen on {address}: {e}")))?;
    // rmcp does not see the calls the lane answers, so its own inactivity timeout is off: a
    // session that only calls tools would look idle to it. The edge's counts every request,
    // and the gateway closes the sessions idle past it ([`HttpFront::close_idle`]).
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let config = edge_config(policy, gateway, dispatch.clone(), manager.clone(), address)
        .await
        .map_err(GatewayError::Config)?;
    // Every request rmcp's path takes goes through the method table first.
    let handler = capability::rmcp::ByTable::new(gateway.clone());
    let service = page::Paged::new(
        HttpLane::new(
            StreamableHttpService::new(
                move || Ok(handler.clone()),
                Arc::clone(&manager),
                crate::front::http::credentials::config(address),
            ),
            gateway.clone(),
            Arc::clone(&manager),
        ),
        gateway.clone(),
        // Proofs of receipts, from a JSON Lines trail.
        (capability_store::target_kind(trail) == capability_store::TargetKind::Jsonl
            && !trail.is_empty())
        .then(|| page::receipts::Proofs::new(trail.into())),
    );
    let edge = Edge::new(service, config);
    let front = HttpFront {
        edge: edge.clone(),
        gateway: gateway.clone(),
        dispatch,
        manager,
        address,
    };
    tokio::spawn(capability_http::listen::serve(
        listener,
        move || TowerToHyperService::new(edge.clone()),
        capability_http::listen::Limits::of(policy.http()),
        "the MCP endpoint",
    ));
    Ok((format!("http://{address}{PATH}"), front))
}
