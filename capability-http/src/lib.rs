//! The HTTP edge of capability: what an MCP server over Streamable HTTP needs in front of it to
//! know who is calling, before anything is decided.
//!
//! - **An OAuth 2.1 resource server** ([`Credentials::Jwt`], the policy's `[auth]`): access
//!   tokens are JWTs of one issuer (its metadata discovered per RFC 8414 / OpenID Connect, its
//!   keys fetched once and again for a rotated key), signed with RS256, ES256 or EdDSA (`none`
//!   and HMAC refused), for this resource's audience (RFC 8707), within `exp` and `nbf`. The
//!   token's scopes give the role (`[auth.scope_roles]`, or a roles claim) and narrow the
//!   role's scopes. The protected resource metadata (RFC 9728) is served at its well-known
//!   paths, and a request without a valid token gets `401` with `WWW-Authenticate: Bearer
//!   resource_metadata="..."`, so a client finds its authorization server by itself.
//! - **The bearer-token table** ([`Credentials::Tokens`], the policy's `[bearer_tokens]`), the
//!   simple mode.
//! - **Token exchange** ([`TokenExchange`], RFC 8693): a server behind the edge that calls
//!   another resource server on the caller's behalf trades the caller's token at the issuer
//!   for one with the other server's audience; the caller's token itself goes nowhere.
//! - **Edge hygiene** ([`Edge`]): Origin checked, no session before authentication, sessions
//!   bound to their principal and capped, bodies bounded in size and time, a rate limit per
//!   principal, and no token passed on.
//! - **One accept loop** ([`listen::serve`]): a request head within seconds, connections capped
//!   below the descriptor limit with strangers' closed first, a failing `accept` backed off and
//!   said once per interval; shared by every listener of the `capability` command.
//! - **A transparency-log witness** ([`witness`]): `c2sp.org/tlog-witness` served over a
//!   `capability_audit::tlog::Witness` (`capability audit witness`), and its client.
//!
//! Who should depend on it: a program that serves a
//! [`GovernedServer`](capability_mcp::rmcp::GovernedServer) over HTTP (the `capability proxy
//! --listen`, your own rmcp server). Not the decision, which never sees a token, and not a
//! program over stdio.
//!
//! ```no_run
//! # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use capability_core::authz::Policy;
//! use capability_http::{Credentials, Edge, EdgeConfig, EdgeRoles};
//!
//! let policy = Arc::new(Policy::from_toml_file("policy.toml")?);
//! let credentials = Credentials::from_policy(&policy).await?; // [auth] or [bearer_tokens]
//! // Your GovernedServer gets `EdgeRoles` as its resolver and is served behind the method table
//! // (`ByTable::new(governed)`); rmcp's service goes behind the edge:
//! // let edge = Edge::new(streamable_http_service, EdgeConfig::new(credentials, policy.http().clone())
//! //     .recording(dispatch, governed.server(), policy.version())
//! //     .tools(governed.listings().clone()));
//! # let _ = (credentials, EdgeRoles);
//! # Ok(()) }
//! ```

//!
#![doc = include_str!("../../docs/http-edge.md")]
#![forbid(unsafe_code)]

mod auth;
mod edge;
pub mod listen;
mod resolver;
pub mod witness;

pub use auth::{
    ACCESS_TOKEN_TYPE, AuthFailure, AuthSetupError, Authenticated, Credentials, Exchanged, JwtAuth,
    ProtectedResource, SubjectToken, TOKEN_EXCHANGE_GRANT, TokenExchange, metadata_path,
    metadata_url,
};
pub use edge::{Edge, EdgeConfig, EdgeResponse, VerifiedSession};
pub use listen::Connection;
pub use resolver::EdgeRoles;
