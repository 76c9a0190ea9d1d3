//! Who is calling: the credentials of a request (an OAuth 2.1 access token, or an entry of the
//! policy's bearer-token table) turned into an [`Authenticated`] caller, or refused with the
//! reason. The decision below never sees a token.
//!
//! - `jwt.rs`: access tokens as JWTs, checked against the issuer's keys.
//! - `keys.rs`: the issuer's metadata and keys, discovered once and kept.
//! - `metadata.rs`: the protected resource metadata (RFC 9728) and the `WWW-Authenticate`
//!   challenges.

mod exchange;
mod jwt;
mod keys;
mod metadata;

use std::fmt;
use std::sync::Arc;

use capability_audit::Principal;
use capability_core::authz::Policy;
use capability_mcp::rmcp::BearerRoles;

pub use exchange::{
    ACCESS_TOKEN_TYPE, Exchanged, SubjectToken, TOKEN_EXCHANGE_GRANT, TokenExchange,
};
pub use jwt::JwtAuth;
pub use metadata::{ProtectedResource, metadata_path, metadata_url};
pub(crate) use metadata::{challenge, served_metadata};

/// A caller the edge authenticated: who, the role its credentials give, and the scopes they
/// carry when they narrow the role's. Put in the request's extensions for the governed server
/// ([`EdgeRoles`](crate::EdgeRoles) reads it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authenticated {
    /// Who: a token's subject, client and issuer, or `token:<hash prefix>` of the table.
    pub principal: Principal,
    /// The role, when the credentials give one.
    pub role: Option<String>,
    /// The scopes an access token carries (its `scope`); `None` for the bearer-token table,
    /// whose entries give the role's scopes.
    pub scopes: Option<Vec<String>>,
}

/// Why a request's credentials are refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthFailure {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A token that is not valid: why (expired, another audience, a bad signature, ...).
    Invalid(String),
    /// A valid token that gives no role: none of the scopes that give one.
    NoRole {
        /// Who presented it.
        principal: Principal,
        /// The scopes that give a role (`[auth.scope_roles]`).
        scopes: Vec<String>,
    },
    /// A valid token that gives several roles, and no `role_precedence` says which wins.
    SeveralRoles {
        /// Who presented it.
        principal: Principal,
        /// The roles it gives.
        roles: Vec<String>,
    },
}

impl AuthFailure {
    /// The principal, when the token was valid.
    pub fn principal(&self) -> Option<&Principal> {
        match self {
            AuthFailure::NoRole { principal, .. } | AuthFailure::SeveralRoles { principal, .. } => {
                Some(principal)
            }
            AuthFailure::Missing | AuthFailure::Invalid(_) => None,
        }
    }
}

impl fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthFailure::Missing => f.write_str("no bearer token (`Authorization: Bearer`)"),
            AuthFailure::Invalid(why) => write!(f, "the bearer token is refused: {why}"),
            AuthFailure::NoRole { scopes, .. } => write!(
                f,
                "the token gives no role: it holds none of the scopes that give one ({})",
                scopes.join(" ")
            ),
            AuthFailure::SeveralRoles { roles, .. } => write!(
                f,
                "the token gives several roles ({}), and the policy's [auth] role_precedence \
                 does not say which one it is",
                roles.join(", ")
            ),
        }
    }
}

/// A resource server that cannot start: its issuer cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthSetupError {
    issuer: String,
    why: String,
}

impl AuthSetupError {
    pub(crate) fn new(issuer: &str, why: impl Into<String>) -> Self {
        AuthSetupError {
            issuer: issuer.to_owned(),
            why: why.into(),
        }
    }
}

impl fmt::Display for AuthSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the authorization server {} ([auth] issuer) cannot be used: {}",
            self.issuer, self.why
        )
    }
}

impl std::error::Error for AuthSetupError {}

/// How callers prove who they are.
#[derive(Clone, Debug)]
pub enum Credentials {
    /// The policy's `[bearer_tokens]` table: a token's SHA-256 gives a role.
    Tokens(BearerRoles),
    /// OAuth 2.1 access tokens of the policy's `[auth]` issuer.
    Jwt(Arc<JwtAuth>),
}

impl Credentials {
    /// The credentials a policy describes: `[auth]` when it has one (its issuer discovered
    /// now), else `[bearer_tokens]`; an error when it has neither (nobody could call).
    pub async fn from_policy(policy: &Policy) -> Result<Credentials, String> {
        if let Some(settings) = policy.auth() {
            let jwt = JwtAuth::discover(settings)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(Credentials::Jwt(Arc::new(jwt)));
        }
        let mut roles = BearerRoles::new();
        for (hash, role) in policy.bearer_tokens() {
            roles = roles.token_sha256(hash, role).map_err(|e| e.to_string())?;
        }
        if roles.is_empty() {
            return Err(
                "serving over HTTP needs the policy's [auth] (an OAuth 2.1 authorization \
                 server: `issuer`, `audience`, `[auth.scope_roles]`) or its [bearer_tokens] \
                 (`\"sha256:<hex>\" = \"<role>\"`, the hex from `printf %s \"$TOKEN\" | \
                 sha256sum`)"
                    .to_owned(),
            );
        }
        Ok(Credentials::Tokens(roles))
    }

    /// Who presents `token`.
    pub async fn authenticate(&self, token: &str) -> Result<Authenticated, AuthFailure> {
        match self {
            Credentials::Jwt(jwt) => jwt.authenticate(token).await,
            Credentials::Tokens(table) => match table.role_of(token) {
                Some(role) => Ok(Authenticated {
                    principal: table_principal(token),
                    role: Some(role.to_owned()),
                    scopes: None,
                }),
                None => Err(AuthFailure::Invalid(
                    "it is not in the policy's [bearer_tokens]".to_owned(),
                )),
            },
        }
    }

    /// The OAuth settings, in JWT mode.
    pub fn jwt(&self) -> Option<&JwtAuth> {
        match self {
            Credentials::Jwt(jwt) => Some(jwt),
            Credentials::Tokens(_) => None,
        }
    }
}

/// The principal of a token of the table: `token:` and the first 12 hex digits of its SHA-256,
/// as [`BearerRoles`] names it.
fn table_principal(token: &str) -> Principal {
    let hash = capability_rules::sha256_hex(token.as_bytes());
    Principal::new(format!("token:{}", &hash[..12]))
}

/// rustls needs a process-wide crypto provider for https: ring, as in the rest of the
/// workspace, unless the program installed one.
/// The HTTP client for an issuer's metadata, keys and token endpoint: a 10 s timeout, and no
/// redirect (it would take the request somewhere the operator did not name).
pub(crate) fn http_client(issuer: &str) -> Result<reqwest::Client, AuthSetupError> {
    install_crypto_provider();
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| AuthSetupError::new(issuer, e.to_string()))
}

pub(crate) fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one first; either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The bearer token of an `Authorization` header value, if it is one.
pub(crate) fn bearer(value: &http::HeaderValue) -> Option<&str> {
    let value = value.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}
