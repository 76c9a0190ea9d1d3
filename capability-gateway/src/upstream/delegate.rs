//! Calls on the caller's behalf (a server's `exchange`; `capability proxy
//! --upstream-exchange-client`): over HTTP, in front of a server that is itself an OAuth
//! resource server, each caller's access token is exchanged at its issuer (RFC 8693) for a token
//! whose audience is the server, and the caller's requests go over a connection of its own that
//! presents that token. The server then knows who is calling (the token's `sub`; `act` names
//! the gateway), and the caller's own token still goes nowhere but its issuer.
//!
//! The engine's own connection (with the server's `token`, if any) serves what is not a
//! caller's: listing the server's tools at start and after each change.

use std::collections::HashMap;
use std::sync::Arc;

use ::rmcp::service::{ClientServiceExt, RequestContext, RunningService};
use ::rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use ::rmcp::{ErrorData, Peer, RoleClient, RoleServer};
use tokio::sync::Mutex;

use capability::rmcp::http_parts;
use capability_http::{Authenticated, SubjectToken, TokenExchange};

use crate::protocol::lifecycle;
use crate::spec::Exchange;
use crate::upstream::progress::{Relay, Relaying};

/// The most callers with a connection of their own at once; beyond, the oldest is closed.
const MAX_CONNECTIONS: usize = 256;

/// One caller's connection: the token it presents, and the connection (which relays the
/// server's progress to the caller).
struct Connection {
    token: Arc<str>,
    service: RunningService<RoleClient, Relaying>,
    opened: u64,
}

/// The exchange and each caller's connection to the upstream.
pub(crate) struct Delegated {
    exchange: TokenExchange,
    url: String,
    connections: Mutex<HashMap<String, Connection>>,
    opened: std::sync::atomic::AtomicU64,
}

impl Delegated {
    /// Finds `issuer`'s token endpoint, for tokens whose audience is the upstream at `url`.
    pub(crate) async fn discover(
        options: &Exchange,
        issuer: &str,
        url: &str,
    ) -> Result<Delegated, String> {
        let audience = options.audience.clone().unwrap_or_else(|| url.to_owned());
        let exchange = TokenExchange::discover(
            issuer,
            options.client_id.clone(),
            options.client_secret.0.clone(),
            audience,
        )
        .await
        .map_err(|e| format!("token exchange: {e}"))?;
        Ok(Delegated {
            exchange,
            url: url.to_owned(),
            connections: Mutex::new(HashMap::new()),
            opened: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The upstream, as the caller of `context`: its token exchanged (or the one exchanged
    /// before, while good), over its own connection; and the relay of that connection's
    /// progress.
    pub(crate) async fn peer(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<(Peer<RoleClient>, Relay), ErrorData> {
        let parts = http_parts(context);
        let (Some(caller), Some(subject)) = (
            parts.and_then(|p| p.extensions.get::<Authenticated>()),
            parts.and_then(|p| p.extensions.get::<SubjectToken>()),
        ) else {
            return Err(ErrorData::internal_error(
                "no caller's token to exchange: calls on the caller's behalf need OAuth access \
                 tokens (the policy's [auth])",
                None,
            ));
        };
        let exchanged = self.exchange.exchange(subject).await.map_err(|why| {
            ErrorData::internal_error(
                format!(
                    "the caller's token could not be exchanged for `{}`: {why}",
                    self.exchange.audience()
                ),
                None,
            )
        })?;
        let key = caller.principal.key();
        let mut connections = self.connections.lock().await;
        if let Some(open) = connections.get(&key)
            && *open.token == *exchanged.secret()
            && !open.service.is_transport_closed()
        {
            return Ok((
                open.service.peer().clone(),
                open.service.service().0.clone(),
            ));
        }
        let config = StreamableHttpClientTransportConfig::with_uri(self.url.as_str())
            .auth_header(exchanged.secret().to_owned());
        let client = crate::upstream::pooled::client()
            .map_err(|e| ErrorData::internal_error(format!("{}: {e}", self.url), None))?;
        // The gateway's client, which reads a JSON answer of several messages.
        let client = crate::upstream::http::Seen::new(client);
        let transport = crate::upstream::pooled::transport_with(client, config);
        let service = Relaying(Relay::default())
            .serve_with_lifecycle(transport, lifecycle())
            .await
            .map_err(|e| {
                ErrorData::internal_error(
                    format!(
                        "{} did not accept a connection on the caller's behalf: {}",
                        self.url,
                        super::unconnected::why(&e, None)
                    ),
                    None,
                )
            })?;
        let peer = (service.peer().clone(), service.service().0.clone());
        if connections.len() >= MAX_CONNECTIONS
            && !connections.contains_key(&key)
            && let Some(oldest) = connections
                .iter()
                .min_by_key(|(_, c)| c.opened)
                .map(|(k, _)| k.clone())
        {
            connections.remove(&oldest);
        }
        let opened = self
            .opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        connections.insert(
            key,
            Connection {
                token: Arc::from(exchanged.secret()),
                service,
                opened,
            },
        );
        Ok(peer)
    }

    /// Forgets the caller's connection after it failed: the next request opens another.
    pub(crate) async fn failed(&self, context: &RequestContext<RoleServer>) {
        if let Some(caller) = http_parts(context).and_then(|p| p.extensions.get::<Authenticated>())
        {
            self.connections
                .lock()
                .await
                .remove(&caller.principal.key());
        }
    }
}
