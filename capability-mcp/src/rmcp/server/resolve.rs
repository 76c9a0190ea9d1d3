//! Who is calling: the caller's role, resolved per request from what rmcp puts in the request
//! context.

use std::collections::HashMap;
use std::fmt;

use ::rmcp::RoleServer;
use ::rmcp::service::RequestContext;

/// Resolves the role of the caller of one request.
///
/// rmcp's Streamable HTTP server stores the HTTP request's [`http::request::Parts`] (headers,
/// URI, and the extensions a tower/axum layer added, e.g. an authenticated identity) in the
/// request context's `extensions`: [`http_parts`] gives them. Over stdio there is no such
/// thing, and the role is fixed when the server starts ([`FixedRole`]).
///
/// `None` means the caller has no role: it sees no tool and every call is refused.
pub trait RoleResolver: Send + Sync + 'static {
    /// The caller's role, or `None` when it has none.
    fn role(&self, context: &RequestContext<RoleServer>) -> Option<String>;

    /// The caller's session, for the audit trail and the per-session budget of the audited
    /// dispatch. By default the `Mcp-Session-Id` header of a Streamable HTTP request, and
    /// `None` (one session per server and role) otherwise.
    fn session(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        let parts = http_parts(context)?;
        let id = parts.headers.get("mcp-session-id")?.to_str().ok()?;
        Some(id.to_owned())
    }
}

/// The HTTP request behind an rmcp request, when it came over Streamable HTTP.
pub fn http_parts(context: &RequestContext<RoleServer>) -> Option<&http::request::Parts> {
    context.extensions.get::<http::request::Parts>()
}

/// The bearer token of an HTTP request (`Authorization: Bearer <token>`), if it has one.
pub fn bearer_token(context: &RequestContext<RoleServer>) -> Option<&str> {
    let value = http_parts(context)?
        .headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The same role for every request: a stdio server, started for one caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedRole(String);

impl FixedRole {
    /// Every caller has the role `role`.
    pub fn new(role: impl Into<String>) -> Self {
        FixedRole(role.into())
    }
}

impl RoleResolver for FixedRole {
    fn role(&self, _context: &RequestContext<RoleServer>) -> Option<String> {
        Some(self.0.clone())
    }
}

/// Roles from bearer tokens: a table from token to role, read from the `Authorization:
/// Bearer` header of a Streamable HTTP request. A request without a token, with a token not
/// in the table, or not over HTTP, has no role.
///
/// Only the SHA-256 of each token is kept, and a token is looked up by its hash, so the table
/// holds no secret and the lookup does not compare secret bytes.
///
/// ```
/// use capability::rmcp::BearerRoles;
///
/// let roles = BearerRoles::new()
///     .token("op-secret", "operator")
///     .token("view-secret", "viewer");
/// assert_eq!(roles.len(), 2);
/// ```
#[derive(Clone, Default)]
pub struct BearerRoles {
    by_hash: HashMap<String, String>,
}

impl fmt::Debug for BearerRoles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerRoles")
            .field("tokens", &self.by_hash.len())
            .finish_non_exhaustive()
    }
}

impl BearerRoles {
    /// An empty table: no caller has a role.
    pub fn new() -> Self {
        BearerRoles::default()
    }

    /// The caller presenting `token` has the role `role`.
    pub fn token(mut self, token: &str, role: impl Into<String>) -> Self {
        self.by_hash.insert(hash(token), role.into());
        self
    }

    /// How many tokens the table has.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether the table has no token.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// The role of a token, if it is in the table.
    pub fn role_of(&self, token: &str) -> Option<&str> {
        self.by_hash.get(&hash(token)).map(String::as_str)
    }
}

impl RoleResolver for BearerRoles {
    fn role(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        self.role_of(bearer_token(context)?).map(str::to_owned)
    }
}

fn hash(token: &str) -> String {
    capability_rules::sha256_hex(token.as_bytes())
}
