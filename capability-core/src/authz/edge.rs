//! The policy's `[auth]` and `[http]` tables: who a caller over HTTP is (an OAuth 2.1 resource
//! server's settings) and the limits of the HTTP edge. Plain settings, read and checked here
//! with the rest of the file (line and column on every error); the edge that uses them
//! (`capability-http`) validates tokens and serves requests, and the decision never sees a
//! token.
//!
//! ```toml
//! [auth]
//! issuer = "https://auth.example.com"        # a token's `iss` must be exactly this
//! audience = "https://mcp.example.com/mcp"   # a token's `aud` must contain this
//! roles_claim = "roles"                      # optional: a claim naming roles directly
//! role_precedence = ["operator", "viewer"]   # optional: which role wins when several match
//! leeway_secs = 30                           # optional: clock skew allowed on exp and nbf
//! allow_typ_jwt = false                      # optional: also take `typ: JWT` (RFC 9068 wants `at+jwt`)
//!
//! [auth.scope_roles]                         # a token holding the scope has the role
//! "mcp:read" = "viewer"
//! "mcp:admin" = "operator"
//!
//! [http]
//! allowed_origins = ["https://app.example.com"]   # a request's Origin, when it has one
//! max_sessions = 1000                        # sessions alive at once, every caller together
//! max_sessions_per_principal = 16
//! session_idle_secs = 900                    # a session unused this long is closed
//! max_body_bytes = 4194304                   # a larger request is refused (413)
//! rate_per_second = 50                       # per principal: sustained rate ...
//! rate_burst = 100                           # ... and burst (429 with Retry-After beyond)
//! header_timeout_secs = 5                    # a connection without a request head this long is closed
//! body_timeout_secs = 30                     # a request body not read this long is refused (408)
//! max_connections = 1024                     # open at once (kept below the descriptor limit)
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::toml_file::TomlError;

/// The algorithms a token may be signed with when `[auth] algorithms` says nothing.
pub const DEFAULT_ALGORITHMS: [&str; 3] = ["RS256", "ES256", "EdDSA"];
/// Every algorithm `[auth] algorithms` may name: public-key signatures only (`none` and the
/// HMAC family would let anyone who knows the verification key mint tokens).
pub const SUPPORTED_ALGORITHMS: [&str; 9] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// The policy's `[auth]` table: this server is an OAuth 2.1 resource server of `issuer`, for
/// tokens whose audience is `audience`. With `[http]`, the limits of the edge:
///
/// ```toml
/// [auth]
/// issuer = "https://auth.example.com"        # a token's `iss` must be exactly this
/// audience = "https://mcp.example.com/mcp"   # a token's `aud` must contain this
/// roles_claim = "roles"                      # optional: a claim naming roles directly
/// role_precedence = ["operator", "viewer"]   # optional: which role wins when several match
/// leeway_secs = 30                           # optional: clock skew allowed on exp and nbf
/// allow_typ_jwt = false                      # optional: also take `typ: JWT` (RFC 9068 wants `at+jwt`)
///
/// [auth.scope_roles]                         # a token holding the scope has the role
/// "mcp:read" = "viewer"
/// "mcp:admin" = "operator"
///
/// [http]
/// allowed_origins = ["https://app.example.com"]   # a request's Origin, when it has one
/// max_sessions = 1000                        # sessions alive at once, every caller together
/// max_sessions_per_principal = 16
/// session_idle_secs = 900                    # a session unused this long is closed
/// max_body_bytes = 4194304                   # a larger request is refused (413)
/// rate_per_second = 50                       # per principal: sustained rate ...
/// rate_burst = 100                           # ... and burst (429 with Retry-After beyond)
/// header_timeout_secs = 5                    # a connection without a request head this long is closed
/// body_timeout_secs = 30                     # a request body not read this long is refused (408)
/// max_connections = 1024                     # open at once (kept below the descriptor limit)
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthSettings {
    issuer: String,
    audience: String,
    scope_roles: Vec<(String, String)>,
    roles_claim: Option<String>,
    role_precedence: Vec<String>,
    leeway_secs: u64,
    jwks_refresh_secs: u64,
    algorithms: Vec<String>,
    allow_typ_jwt: bool,
}

impl AuthSettings {
    /// The authorization server's issuer identifier: a token's `iss` must equal it, and its
    /// metadata is discovered from it (RFC 8414, OpenID Connect Discovery).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// This resource's identifier (RFC 8707): a token's `aud` must contain it. It is also the
    /// `resource` of the protected resource metadata (RFC 9728).
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// `[auth.scope_roles]`: (scope, role), in scope order. A token holding the scope has the
    /// role.
    pub fn scope_roles(&self) -> &[(String, String)] {
        &self.scope_roles
    }

    /// The claim whose values name roles directly, if any (`roles_claim = "roles"`): an array
    /// of strings, or one space-separated string.
    pub fn roles_claim(&self) -> Option<&str> {
        self.roles_claim.as_deref()
    }

    /// Which role a token that maps to several is given: the first of these it maps to. Empty
    /// (the default): such a token is refused, naming the roles, rather than given the widest.
    pub fn role_precedence(&self) -> &[String] {
        &self.role_precedence
    }

    /// How many seconds a token's `exp` and `nbf` may be off (clock skew); 30 by default.
    pub fn leeway_secs(&self) -> u64 {
        self.leeway_secs
    }

    /// How often, at most, the issuer's keys are fetched again for a token signed by a key
    /// not among those known (a rotated key); 30 seconds by default.
    pub fn jwks_refresh_secs(&self) -> u64 {
        self.jwks_refresh_secs
    }

    /// The signature algorithms a token may use (`RS256`, `ES256`, `EdDSA` by default).
    pub fn algorithms(&self) -> &[String] {
        &self.algorithms
    }

    /// Whether a token whose header says `typ: JWT` is taken too. RFC 9068 has a resource
    /// server refuse any access token not typed `at+jwt` (so an ID token or another JWT of the
    /// issuer is not taken for one); `false` by default, `true` only for an issuer that cannot
    /// type its access tokens.
    pub fn allow_typ_jwt(&self) -> bool {
        self.allow_typ_jwt
    }
}

/// The policy's `[http]` table: the limits of the HTTP edge, each with a default (shown on
/// [`AuthSettings`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpSettings {
    allowed_origins: Vec<String>,
    max_sessions: usize,
    max_sessions_per_principal: usize,
    session_idle_secs: u64,
    max_body_bytes: usize,
    rate_per_second: u32,
    rate_burst: u32,
    header_timeout_secs: u64,
    body_timeout_secs: u64,
    max_connections: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            allowed_origins: Vec::new(),
            max_sessions: 1000,
            max_sessions_per_principal: 16,
            session_idle_secs: 900,
            max_body_bytes: 4 * 1024 * 1024,
            rate_per_second: 50,
            rate_burst: 100,
            header_timeout_secs: 5,
            body_timeout_secs: 30,
            max_connections: 1024,
        }
    }
}

impl HttpSettings {
    /// The `Origin` values a request may carry (`scheme://host[:port]`, exact). A request
    /// without `Origin` (not from a browser) passes; one with an `Origin` not listed is
    /// refused with 403. Empty by default: no browser page may call.
    pub fn allowed_origins(&self) -> &[String] {
        &self.allowed_origins
    }

    /// Sessions alive at once, every caller together (1,000 by default).
    pub fn max_sessions(&self) -> usize {
        self.max_sessions
    }

    /// Sessions alive at once for one principal (16 by default).
    pub fn max_sessions_per_principal(&self) -> usize {
        self.max_sessions_per_principal
    }

    /// A session unused for this many seconds is closed (900 by default).
    pub fn session_idle_secs(&self) -> u64 {
        self.session_idle_secs
    }

    /// The largest request body taken, in bytes (4 MiB by default); a larger one gets 413.
    pub fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    /// Requests per second one principal may make, sustained (50 by default).
    pub fn rate_per_second(&self) -> u32 {
        self.rate_per_second
    }

    /// Requests one principal may make at once beyond the sustained rate (100 by default).
    pub fn rate_burst(&self) -> u32 {
        self.rate_burst
    }

    /// A connection that has not sent a complete request head this many seconds after it
    /// opened, or after its last answer, is closed (5 by default): idle and slow connections
    /// cannot hold the listener's places.
    pub fn header_timeout_secs(&self) -> u64 {
        self.header_timeout_secs
    }

    /// A request whose body has not arrived this many seconds after its head is refused with
    /// 408 (30 by default).
    pub fn body_timeout_secs(&self) -> u64 {
        self.body_timeout_secs
    }

    /// Connections open at once (1,024 by default, and never more than the process's
    /// descriptor limit leaves room for). At the cap, the oldest connection that never carried
    /// an authenticated request is closed first.
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// These settings with `origins` allowed, for a program that sets them in code.
    pub fn with_allowed_origins(mut self, origins: impl IntoIterator<Item = String>) -> Self {
        self.allowed_origins = origins.into_iter().collect();
        self
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuthFile {
    issuer: Spanned<String>,
    audience: Spanned<String>,
    #[serde(default)]
    scope_roles: BTreeMap<Spanned<String>, Spanned<String>>,
    roles_claim: Option<Spanned<String>>,
    #[serde(default)]
    role_precedence: Vec<Spanned<String>>,
    leeway_secs: Option<u64>,
    jwks_refresh_secs: Option<u64>,
    algorithms: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    allow_typ_jwt: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HttpFile {
    #[serde(default)]
    allowed_origins: Vec<Spanned<String>>,
    max_sessions: Option<Spanned<u64>>,
    max_sessions_per_principal: Option<Spanned<u64>>,
    session_idle_secs: Option<Spanned<u64>>,
    max_body_bytes: Option<Spanned<u64>>,
    rate_per_second: Option<Spanned<u64>>,
    rate_burst: Option<Spanned<u64>>,
    header_timeout_secs: Option<Spanned<u64>>,
    body_timeout_secs: Option<Spanned<u64>>,
    max_connections: Option<Spanned<u64>>,
}

/// An absolute `http` or `https` URL with a host and nothing after the path.
fn check_url(what: &str, url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("{what} `{url}` is not an http or https URL"))?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || url.contains(['?', '#']) || url.chars().any(char::is_whitespace) {
        return Err(format!(
            "{what} `{url}` is not an absolute URL with a host and no query or fragment"
        ));
    }
    Ok(())
}

impl AuthFile {
    pub(super) fn check(
        self,
        is_role: impl Fn(&str) -> bool,
        at: &impl Fn(usize, String) -> TomlError,
    ) -> Result<AuthSettings, TomlError> {
        let url = |field: &str, value: &Spanned<String>| {
            check_url(field, value.get_ref()).map_err(|m| at(value.span().start, m))
        };
        url("`issuer`", &self.issuer)?;
        if self.audience.get_ref().trim().is_empty() {
            return Err(at(
                self.audience.span().start,
                "`audience` is this resource's identifier (its URL); it cannot be empty".to_owned(),
            ));
        }
        let role = |value: &Spanned<String>, context: &str| {
            if is_role(value.get_ref()) {
                Ok(value.get_ref().clone())
            } else {
                Err(at(
                    value.span().start,
                    format!("{context}: no role `{}` in the policy", value.get_ref()),
                ))
            }
        };
        let mut scope_roles = Vec::with_capacity(self.scope_roles.len());
        for (scope, name) in &self.scope_roles {
            capability_rules::check_scope(scope.get_ref())
                .map_err(|v| at(scope.span().start, v.to_string()))?;
            let name = role(name, &format!("scope `{}`", scope.get_ref()))?;
            scope_roles.push((scope.get_ref().clone(), name));
        }
        let roles_claim = match self.roles_claim {
            Some(claim) if claim.get_ref().trim().is_empty() => {
                return Err(at(
                    claim.span().start,
                    "`roles_claim` names a claim; it cannot be empty".to_owned(),
                ));
            }
            other => other.map(Spanned::into_inner),
        };
        if scope_roles.is_empty() && roles_claim.is_none() {
            return Err(at(
                self.issuer.span().start,
                "[auth] gives no caller a role: add `[auth.scope_roles]` (\"<scope>\" = \
                 \"<role>\") or `roles_claim`"
                    .to_owned(),
            ));
        }
        let role_precedence = self
            .role_precedence
            .iter()
            .map(|r| role(r, "`role_precedence`"))
            .collect::<Result<Vec<String>, TomlError>>()?;
        let algorithms = match self.algorithms {
            None => DEFAULT_ALGORITHMS.map(str::to_owned).to_vec(),
            Some(list) => {
                let mut algorithms = Vec::with_capacity(list.len());
                for alg in list {
                    if !SUPPORTED_ALGORITHMS.contains(&alg.get_ref().as_str()) {
                        return Err(at(
                            alg.span().start,
                            format!(
                                "algorithm `{}` is not taken: a token is signed with a public \
                                 key ({}); `none` and HMAC are refused",
                                alg.get_ref(),
                                SUPPORTED_ALGORITHMS.join(", ")
                            ),
                        ));
                    }
                    algorithms.push(alg.into_inner());
                }
                algorithms
            }
        };
        Ok(AuthSettings {
            issuer: self.issuer.into_inner(),
            audience: self.audience.into_inner(),
            scope_roles,
            roles_claim,
            role_precedence,
            leeway_secs: self.leeway_secs.unwrap_or(30),
            jwks_refresh_secs: self.jwks_refresh_secs.unwrap_or(30),
            algorithms,
            allow_typ_jwt: self.allow_typ_jwt,
        })
    }
}

impl HttpFile {
    pub(super) fn check(
        self,
        at: &impl Fn(usize, String) -> TomlError,
    ) -> Result<HttpSettings, TomlError> {
        let defaults = HttpSettings::default();
        let mut allowed_origins = Vec::with_capacity(self.allowed_origins.len());
        for origin in self.allowed_origins {
            let text = origin.get_ref();
            let bare = check_url("origin", text).is_ok()
                && text
                    .split_once("://")
                    .is_some_and(|(_, rest)| !rest.contains('/'));
            if !bare {
                return Err(at(
                    origin.span().start,
                    format!(
                        "origin `{text}` is not `scheme://host[:port]` (no path, no trailing \
                         slash)"
                    ),
                ));
            }
            allowed_origins.push(text.to_ascii_lowercase());
        }
        let positive = |value: Option<Spanned<u64>>, default: u64, what: &str| match value {
            None => Ok(default),
            Some(v) if *v.get_ref() == 0 => {
                Err(at(v.span().start, format!("`{what}` must be at least 1")))
            }
            Some(v) => Ok(v.into_inner()),
        };
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        let count = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Ok(HttpSettings {
            allowed_origins,
            max_sessions: size(positive(
                self.max_sessions,
                defaults.max_sessions as u64,
                "max_sessions",
            )?),
            max_sessions_per_principal: size(positive(
                self.max_sessions_per_principal,
                defaults.max_sessions_per_principal as u64,
                "max_sessions_per_principal",
            )?),
            session_idle_secs: positive(
                self.session_idle_secs,
                defaults.session_idle_secs,
                "session_idle_secs",
            )?,
            max_body_bytes: size(positive(
                self.max_body_bytes,
                defaults.max_body_bytes as u64,
                "max_body_bytes",
            )?),
            rate_per_second: count(positive(
                self.rate_per_second,
                u64::from(defaults.rate_per_second),
                "rate_per_second",
            )?),
            rate_burst: count(positive(
                self.rate_burst,
                u64::from(defaults.rate_burst),
                "rate_burst",
            )?),
            header_timeout_secs: positive(
                self.header_timeout_secs,
                defaults.header_timeout_secs,
                "header_timeout_secs",
            )?,
            body_timeout_secs: positive(
                self.body_timeout_secs,
                defaults.body_timeout_secs,
                "body_timeout_secs",
            )?,
            max_connections: size(positive(
                self.max_connections,
                defaults.max_connections as u64,
                "max_connections",
            )?),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::authz::Policy;

    const ROLES: &str =
        "[roles.viewer]\nceiling = \"read-only\"\n[roles.operator]\nceiling = \"unrestricted\"\n";

    fn policy(extra: &str) -> Result<Policy, String> {
        Policy::from_toml_str(&format!("{ROLES}{extra}")).map_err(|e| e.to_string())
    }

    #[test]
    fn auth_and_http_read_back_with_their_defaults() {
        let p = policy(
            "[auth]\nissuer = \"http://127.0.0.1:9000\"\naudience = \"http://127.0.0.1:8931/mcp\"\n\
             [auth.scope_roles]\n\"mcp:read\" = \"viewer\"\n\"mcp:admin\" = \"operator\"\n\
             [http]\nallowed_origins = [\"http://localhost:3000\"]\nrate_burst = 5\n",
        )
        .expect("valid");
        let auth = p.auth().expect("[auth]");
        assert_eq!(auth.issuer(), "http://127.0.0.1:9000");
        assert_eq!(
            auth.scope_roles(),
            [
                ("mcp:admin".to_owned(), "operator".to_owned()),
                ("mcp:read".to_owned(), "viewer".to_owned())
            ]
        );
        assert_eq!(auth.algorithms(), ["RS256", "ES256", "EdDSA"]);
        assert_eq!((auth.leeway_secs(), auth.role_precedence().len()), (30, 0));
        let http = p.http();
        assert_eq!(http.allowed_origins(), ["http://localhost:3000"]);
        assert_eq!((http.rate_burst(), http.rate_per_second()), (5, 50));
        assert_eq!(
            (
                http.header_timeout_secs(),
                http.body_timeout_secs(),
                http.max_connections()
            ),
            (5, 30, 1024)
        );
        assert!(!auth.allow_typ_jwt());
        assert!(policy("").expect("valid").auth().is_none());
    }

    #[test]
    fn a_mistake_in_auth_or_http_names_its_line() {
        for (extra, says) in [
            (
                "[auth]\nissuer = \"auth.example.com\"\naudience = \"x\"\n[auth.scope_roles]\n\"a\" = \"viewer\"\n",
                "not an http or https URL",
            ),
            (
                "[auth]\nissuer = \"http://a\"\naudience = \"x\"\n[auth.scope_roles]\n\"a\" = \"admin\"\n",
                "no role `admin`",
            ),
            (
                "[auth]\nissuer = \"http://a\"\naudience = \"x\"\n",
                "gives no caller a role",
            ),
            (
                "[auth]\nissuer = \"http://a\"\naudience = \"x\"\nalgorithms = [\"HS256\"]\n[auth.scope_roles]\n\"a\" = \"viewer\"\n",
                "`none` and HMAC are refused",
            ),
            (
                "[auth]\nissuer = \"http://a\"\naudience = \"x\"\nalgorithms = [\"none\"]\n[auth.scope_roles]\n\"a\" = \"viewer\"\n",
                "is not taken",
            ),
            (
                "[auth]\nissuer = \"http://a\"\naudience = \"x\"\nrole_precedence = [\"root\"]\n[auth.scope_roles]\n\"a\" = \"viewer\"\n",
                "no role `root`",
            ),
            (
                "[http]\nallowed_origins = [\"http://localhost:3000/\"]\n",
                "is not `scheme://host[:port]`",
            ),
            ("[http]\nrate_burst = 0\n", "must be at least 1"),
            ("[http]\nheader_timeout_secs = 0\n", "must be at least 1"),
            ("[http]\nmax_connections = 0\n", "must be at least 1"),
            ("[http]\nmax_conns = 3\n", "unknown field"),
        ] {
            let error = policy(extra).expect_err(extra);
            assert!(error.contains(says), "{extra}: {error}");
            assert!(error.contains(':'), "{error}");
        }
    }
}
