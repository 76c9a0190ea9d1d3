//! The HTTP front's settings: who may call (the policy's `[auth]` or `[bearer_tokens]`), and
//! rmcp's Streamable HTTP service's settings for the address listened on.

use std::net::SocketAddr;

use ::rmcp::transport::streamable_http_server::StreamableHttpServerConfig;

use capability::Policy;

use crate::note;

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
