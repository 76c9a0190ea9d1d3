//! The client's side over Streamable HTTP (`--listen`): rmcp's Streamable HTTP service under
//! hyper's HTTP/1.1 connection driver, one governed front for every session, each request's
//! role from its bearer token.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use ::rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use ::rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService,
};
use hyper_util::service::TowerToHyperService;

use capability::Policy;
use capability_http::{Credentials, Edge, EdgeConfig, EdgeRoles};

use super::connected::{Connected, Pending, governed, server_gone, terminated};
use super::delegate::Delegated;
use super::forward::Clients;
use super::{Proxy, RunError, Source, note};

/// The path the MCP endpoint is served on.
pub(super) const PATH: &str = "/mcp";

/// Whether the policy says who may call over HTTP: `[auth]` (an OAuth 2.1 authorization
/// server) or `[bearer_tokens]`. A policy with neither is refused: nobody could call.
pub fn check_credentials(policy: &Policy) -> Result<(), String> {
    if policy.auth().is_some() || policy.bearer_tokens().len() > 0 {
        return Ok(());
    }
    Err(
        "`--listen` needs the policy's `[auth]` (OAuth 2.1 access tokens: `issuer`, `audience`, \
         `[auth.scope_roles]`) or its `[bearer_tokens]` (`\"sha256:<hex>\" = \"viewer\"` with \
         the hex from `printf %s \"$TOKEN\" | sha256sum`)"
            .to_owned(),
    )
}

/// rmcp's server settings for `address`: the `Host` names it takes are the edge's
/// ([`capability_http::listen::allowed_hosts`]: loopback names, the address itself off loopback,
/// any on the unspecified address), with a warning off loopback.
pub(crate) fn config(address: SocketAddr) -> StreamableHttpServerConfig {
    let config = StreamableHttpServerConfig::default();
    let ip = address.ip();
    if !ip.is_loopback() {
        note(format_args!(
            "warning: listening on {address}, which is not a loopback address: requests and \
             bearer tokens travel in clear text (no TLS here; put a TLS proxy in front){}",
            if ip.is_unspecified() {
                ", and the Host header is not checked"
            } else {
                ""
            }
        ));
    }
    match capability_http::listen::allowed_hosts(address) {
        None => config.disable_allowed_hosts(),
        Some(hosts) => config.with_allowed_hosts(hosts),
    }
}

/// Serves the governed front over Streamable HTTP, behind the edge (who is calling, Origin,
/// sessions, limits), until a signal asks the proxy to stop (`Ok`) or the server goes (an
/// error).
pub(super) async fn serve(
    proxy: &Proxy,
    mut connected: Connected,
    listener: TcpListener,
    credentials: Credentials,
) -> Result<(), RunError> {
    let address = listener
        .local_addr()
        .map_err(|e| RunError::Spawn(format!("cannot read the address listened on: {e}")))?;
    let listener = listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
        .map_err(|e| RunError::Spawn(format!("cannot listen on {address}: {e}")))?;
    let clients = Clients::default();
    let delegated = match (&proxy.exchange, &proxy.source, proxy.policy.auth()) {
        (Some(options), Source::Url(url, _), Some(auth)) => Some(Arc::new(
            Delegated::discover(options, auth.issuer(), url).await?,
        )),
        _ => None,
    };
    let on_behalf = delegated.is_some();
    let front = governed(
        proxy,
        &connected,
        EdgeRoles,
        Some(clients.clone()),
        delegated,
    );
    let listings = front.listings().clone();
    let config = config(address);
    let stop_front = config.cancellation_token.clone();
    let limits = proxy.policy.http().clone();
    let mut manager = LocalSessionManager::default();
    // rmcp closes a session idle this long too, so both forget it at once.
    manager.session_config.keep_alive = Some(Duration::from_secs(limits.session_idle_secs()));
    let manager = Arc::new(manager);
    let service =
        StreamableHttpService::new(move || Ok(front.clone()), Arc::clone(&manager), config);
    let mode = match &credentials {
        Credentials::Jwt(jwt) => format!("OAuth access tokens of {}", jwt.settings().issuer()),
        Credentials::Tokens(_) => "the policy's [bearer_tokens]".to_owned(),
    };
    let mut edge_config =
        EdgeConfig::new(credentials, limits).hosts(capability_http::listen::allowed_hosts(address));
    if on_behalf {
        // Kept for the exchange at the issuer; the header is still removed at the edge.
        edge_config = edge_config.keep_subject_token();
    }
    let edge = Edge::new(
        service,
        edge_config
            .endpoint(PATH)
            .recording(
                Arc::clone(&connected.dispatch),
                &proxy.server,
                proxy.policy.version(),
            )
            .tools(listings)
            .sessions(manager),
    );
    note(format_args!(
        "serving `{}` ({} tools listed by the server) to callers with {mode}; listening on \
         http://{address}{PATH}",
        proxy.server.name(),
        connected.listings.tools().len()
    ));

    let accepting = tokio::spawn(capability_http::listen::serve(
        listener,
        move || TowerToHyperService::new(edge.clone()),
        capability_http::listen::Limits::of(proxy.policy.http()),
        "the MCP endpoint",
    ));
    // The accept loop stops with the proxy, however `serve` ends.
    let _accepting = AbortOnDrop(accepting);
    let signalled = terminated();
    tokio::pin!(signalled);
    let ending = loop {
        tokio::select! {
            signal = &mut signalled => break Err(signal),
            why = server_gone(&mut connected.backend, &connected.gone) => break Ok(why),
            _ = &mut connected.upstream_done => break Ok(connected.backend.why_closed().await),
            Some(event) = connected.events.recv() => {
                // Resources updated are not passed on over HTTP: which client subscribed is
                // not known here (the README's method table says so).
                let Pending { changed, .. } = connected.coalesce(event);
                for list in changed {
                    let tell = connected.changed(proxy, list).await;
                    if tell {
                        let told = clients.notify(list).await;
                        note(format_args!("told {told} connected clients that a list changed"));
                    }
                }
            }
        }
    };
    match ending {
        Err(cause) => {
            stop_front.cancel();
            connected.upstream_stop.cancel();
            connected.backend.stop().await;
            note(format_args!("{cause}; the server was stopped"));
            Ok(())
        }
        Ok(why) => Err(connected.gone(why, || stop_front.cancel()).await),
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
