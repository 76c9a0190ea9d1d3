//! Who is calling: the caller's role, resolved per request from what rmcp puts in the request
//! context.

use std::collections::HashMap;
use std::fmt;

use ::rmcp::RoleServer;
use ::rmcp::service::RequestContext;
use capability_audit::Principal;

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

    /// Who the caller is, when the transport authenticated it (an OAuth access token, the
    /// bearer-token table): written into every record of its requests, and part of its
    /// session's name, so that two principals of one role never share a budget. `None` by
    /// default.
    fn principal(&self, context: &RequestContext<RoleServer>) -> Option<Principal> {
        let _ = context;
        None
    }

    /// The scopes the caller's credentials carry, when they narrow the role's (an OAuth access
    /// token's `scope`): the caller then holds only those of its role's scopes that are among
    /// them. `None` (the default): the role's scopes.
    fn scopes(&self, context: &RequestContext<RoleServer>) -> Option<Vec<String>> {
        let _ = context;
        None
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

    /// The caller presenting a token whose SHA-256, in hex, is `sha256_hex` has the role
    /// `role`: the table is built without ever holding the token. Compute the hash with
    /// `printf %s "$TOKEN" | sha256sum` (no newline after the token). The hex may be upper or
    /// lower case; anything but 64 hex digits is refused.
    ///
    /// ```
    /// use capability::rmcp::BearerRoles;
    ///
    /// // printf %s "test" | sha256sum
    /// let hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    /// let roles = BearerRoles::new().token_sha256(hash, "viewer")?;
    /// assert_eq!(roles.role_of("test"), Some("viewer"));
    /// assert!(BearerRoles::new().token_sha256("test", "viewer").is_err());
    /// # Ok::<(), capability::rmcp::TokenHashError>(())
    /// ```
    pub fn token_sha256(
        mut self,
        sha256_hex: &str,
        role: impl Into<String>,
    ) -> Result<Self, TokenHashError> {
        if sha256_hex.len() != 64 || !sha256_hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(TokenHashError(sha256_hex.len()));
        }
        self.by_hash
            .insert(sha256_hex.to_ascii_lowercase(), role.into());
        Ok(self)
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

    /// `token:<the first 12 hex digits of the token's SHA-256>` for a token in the table: a
    /// name for the caller that says which entry matched, and is no secret.
    fn principal(&self, context: &RequestContext<RoleServer>) -> Option<Principal> {
        let hash = hash(bearer_token(context)?);
        self.by_hash
            .contains_key(&hash)
            .then(|| Principal::new(format!("token:{}", &hash[..12])))
    }
}

/// A token's hash given to [`BearerRoles::token_sha256`] that is not 64 hex digits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenHashError(usize);

impl fmt::Display for TokenHashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a token's SHA-256 is 64 hex digits (`printf %s \"$TOKEN\" | sha256sum`); this one \
             has {} characters or a character that is not a hex digit",
            self.0
        )
    }
}

impl std::error::Error for TokenHashError {}

fn hash(token: &str) -> String {
    capability_rules::sha256_hex(token.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_SHA256: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn a_token_is_found_through_its_hash_in_either_case() {
        let roles = BearerRoles::new()
            .token_sha256(&TEST_SHA256.to_ascii_uppercase(), "viewer")
            .expect("64 hex digits");
        assert_eq!(roles.role_of("test"), Some("viewer"));
        assert_eq!(roles.role_of("Test"), None);
        assert_eq!(
            roles.role_of(TEST_SHA256),
            None,
            "the hash is not the token"
        );
    }

    #[test]
    fn a_hash_that_is_not_64_hex_digits_is_refused() {
        for bad in ["", "test", &TEST_SHA256[1..], &format!("{TEST_SHA256}0")] {
            assert!(
                BearerRoles::new().token_sha256(bad, "viewer").is_err(),
                "{bad}"
            );
        }
        let not_hex = format!("g{}", &TEST_SHA256[1..]);
        let error = BearerRoles::new()
            .token_sha256(&not_hex, "viewer")
            .expect_err("not hex");
        assert!(error.to_string().contains("sha256sum"), "{error}");
    }
}
