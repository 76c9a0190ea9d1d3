//! The HTTP client every connection to a Streamable HTTP server goes through (the proxy's
//! `--upstream`, its per-caller connections, a gateway's `url` servers): one kept-alive
//! connection reused from request to request, where rmcp's own client opens a new one for
//! each.
//!
//! rmcp builds its reqwest client with `pool_max_idle_per_host(0)`, against a 40 ms stall
//! (Nagle's algorithm meeting delayed ACKs) when a connection is reused before the last
//! answer was read to its end. Here neither can happen: rmcp reads each answer's event stream
//! to its end before it lets go of the connection, and reqwest sets `TCP_NODELAY`. Measured
//! with `server-everything` over HTTP: the gateway connected once a request (358 connections
//! for 380 requests); pooled, twice for the whole session (its event stream and its
//! requests).

use std::sync::OnceLock;

use ::rmcp::transport::StreamableHttpClientTransport;
use ::rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig,
};

use crate::wire::lines::max_message_bytes;

/// Redirects followed at most, as rmcp's own client.
const MAX_REDIRECTS: usize = 10;

/// How long an idle connection is kept for the next request.
const IDLE: std::time::Duration = std::time::Duration::from_secs(4);

/// A transport to `config.uri` over `client` (the pooled client, or a wrapper of it), with the
/// same bounds as [`transport`].
pub(crate) fn transport_with<C: StreamableHttpClient>(
    client: C,
    config: StreamableHttpClientTransportConfig,
) -> StreamableHttpClientTransport<C> {
    let config = config
        .max_json_response_size(max_message_bytes())
        .max_sse_event_size(max_message_bytes());
    StreamableHttpClientTransport::with_client(client, config)
}

/// The process's client: built once (a clone shares its pool).
pub(crate) fn client() -> Result<reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // reqwest's rustls finds its crypto provider here (ring): installed once, before
            // the client is built; a provider already installed is kept.
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .tcp_nodelay(true)
                // Let go of an idle connection before the server does (Node.js and uvicorn
                // close one after 5 s): a request written just as the server closes it would
                // fail, where a new connection costs a handshake.
                .pool_idle_timeout(IDLE)
                .redirect(same_origin_redirects())
                .build()
                .map_err(|e| format!("the HTTP client could not be built: {e}"))
        })
        .clone()
}

/// rmcp's redirect rule: only a 307 or 308 (which keep the request's body), only to the same
/// origin (a server cannot send the caller's credential elsewhere), at most
/// [`MAX_REDIRECTS`].
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}
