//! OAuth 2.1 access tokens as JWTs (RFC 9068): typed `at+jwt` (or `JWT` where `[auth]
//! allow_typ_jwt` says), the signature checked against the issuer's keys, then `iss`, `aud`,
//! `exp` and `nbf`; then who the token is for (`sub`, never `client_id` in its place), the scopes
//! it carries, and the role they give under the policy's `[auth]`.

use std::collections::HashSet;
use std::time::Duration;

use capability_audit::Principal;
use capability_core::authz::AuthSettings;
use capability_core::clock::{SharedClock, SystemClock};
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

use super::keys::KeyCache;
use super::{AuthFailure, AuthSetupError, Authenticated};

/// Verified tokens kept before the cache starts afresh.
const MAX_VERIFIED: usize = 10_000;

/// What a verified token gave, until it expires or the issuer's keys change.
struct Verified {
    outcome: Result<Authenticated, AuthFailure>,
    exp: u64,
    nbf: u64,
    generation: u64,
}

/// A resource server of one issuer, for tokens of one audience (the policy's `[auth]`).
///
/// A token's signature is checked once: what it gave is kept (by the token's SHA-256) until
/// its `exp`, or until the issuer's keys are fetched again, so a client that sends its token
/// with every request pays for one verification, not one per request.
pub struct JwtAuth {
    settings: AuthSettings,
    keys: KeyCache,
    algorithms: Vec<Algorithm>,
    verified: std::sync::Mutex<std::collections::HashMap<String, Verified>>,
    /// Where `exp` and `nbf` are checked against.
    clock: SharedClock,
}

impl std::fmt::Debug for JwtAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAuth")
            .field("issuer", &self.settings.issuer())
            .field("audience", &self.settings.audience())
            .finish_non_exhaustive()
    }
}

impl JwtAuth {
    /// Discovers the issuer's metadata and fetches its keys: an issuer that cannot be reached,
    /// whose metadata names another issuer, or that publishes no public key is an error now,
    /// not at the first request.
    pub async fn discover(settings: &AuthSettings) -> Result<JwtAuth, AuthSetupError> {
        JwtAuth::discover_with_clock(settings, SystemClock::shared()).await
    }

    /// [`discover`](Self::discover), reading the time from `clock`: a token's `exp` and `nbf`
    /// are checked against it, and the interval between two fetches of the issuer's keys is
    /// timed by it (tests move a [`ManualClock`](capability_core::clock::ManualClock)).
    pub async fn discover_with_clock(
        settings: &AuthSettings,
        clock: SharedClock,
    ) -> Result<JwtAuth, AuthSetupError> {
        super::install_crypto_provider();
        let client = super::http_client(settings.issuer())?;
        let keys = KeyCache::discover(
            client,
            settings.issuer(),
            Duration::from_secs(settings.jwks_refresh_secs()),
            std::sync::Arc::clone(&clock),
        )
        .await?;
        let algorithms = settings
            .algorithms()
            .iter()
            .filter_map(|name| name.parse::<Algorithm>().ok())
            .filter(|alg| !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512))
            .collect();
        Ok(JwtAuth {
            settings: settings.clone(),
            keys,
            algorithms,
            verified: std::sync::Mutex::default(),
            clock,
        })
    }

    /// The settings this resource server checks tokens against.
    pub fn settings(&self) -> &AuthSettings {
        &self.settings
    }

    /// How long ago the issuer's keys were fetched.
    pub fn keys_age(&self) -> Duration {
        self.keys.age()
    }

    /// Who presents `token`, with the role and scopes it gives, or why it is refused.
    pub async fn authenticate(&self, token: &str) -> Result<Authenticated, AuthFailure> {
        let digest = capability_rules::sha256_hex(token.as_bytes());
        let now = self.clock.unix_secs();
        let leeway = self.settings.leeway_secs();
        let generation = self.keys.generation();
        if let Some(known) = self.cached().get(&digest)
            && known.generation == generation
            && now <= known.exp.saturating_add(leeway)
            && now.saturating_add(leeway) >= known.nbf
        {
            return known.outcome.clone();
        }
        let claims = self.verify(token).await.map_err(AuthFailure::Invalid)?;
        let outcome = self.identify(&claims);
        let time = |name: &str| numeric_date(&claims, name);
        let mut cache = self.cached();
        if cache.len() >= MAX_VERIFIED {
            cache.clear();
        }
        cache.insert(
            digest,
            Verified {
                outcome: outcome.clone(),
                exp: time("exp").unwrap_or(0),
                nbf: time("nbf").unwrap_or(0),
                generation,
            },
        );
        outcome
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Verified>> {
        self.verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The token's claims, once its signature, issuer, audience and times are checked.
    async fn verify(&self, token: &str) -> Result<Map<String, Value>, String> {
        // An unknown `alg` (`none` among them) is not an `Algorithm`: the header does not
        // parse, and the token is refused here.
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| format!("not a signed JWT ({e})"))?;
        // RFC 9068 section 4: an access token is typed `at+jwt`, so that an ID token or any other
        // JWT the issuer signs is not taken for one.
        let typ = header.typ.as_deref().map(str::to_ascii_lowercase);
        let typed = matches!(typ.as_deref(), Some("at+jwt" | "application/at+jwt"))
            || (self.settings.allow_typ_jwt() && matches!(typ.as_deref(), None | Some("jwt")));
        if !typed {
            return Err(format!(
                "its header says `typ: {}`, not `at+jwt`: it is not an access token (RFC 9068); \
                 for an issuer that cannot type its access tokens, set `[auth] allow_typ_jwt = \
                 true`",
                header.typ.as_deref().unwrap_or("(none)")
            ));
        }
        if !self.algorithms.contains(&header.alg) {
            return Err(format!(
                "signed with {:?}, which is not among the algorithms taken ({})",
                header.alg,
                self.settings.algorithms().join(", ")
            ));
        }
        let key = self.keys.key(header.kid.as_deref()).await?;
        if let Some(expected) = key.algorithm
            && expected != header.alg
        {
            return Err(format!(
                "its header says {:?}, but its key is for {expected:?}",
                header.alg
            ));
        }
        let mut validation = Validation::new(header.alg);
        // `exp` and `nbf` are checked below, against this resource server's clock.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.set_issuer(&[self.settings.issuer()]);
        validation.set_audience(&[self.settings.audience()]);
        validation.required_spec_claims = ["exp", "iss", "aud"]
            .into_iter()
            .map(str::to_owned)
            .collect::<HashSet<String>>();
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation)
            .map_err(|e| describe(&e, &self.settings))?;
        in_time(
            &data.claims,
            self.clock.unix_secs(),
            self.settings.leeway_secs(),
        )?;
        Ok(data.claims)
    }

    /// The principal, role and scopes of verified claims.
    fn identify(&self, claims: &Map<String, Value>) -> Result<Authenticated, AuthFailure> {
        let text = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_owned);
        let client_id = text("client_id").or_else(|| text("azp"));
        // No identity from `client_id`: a client whose id equals a user's `sub` would become
        // that user. RFC 9068 access tokens always name their subject (the client itself for a
        // client credentials grant).
        let Some(subject) = text("sub").filter(|sub| !sub.is_empty()) else {
            return Err(AuthFailure::Invalid(
                "it names no subject (`sub`), which every access token must (RFC 9068); its \
                 `client_id` is not taken as one"
                    .to_owned(),
            ));
        };
        let mut principal = Principal::new(subject).issuer(self.settings.issuer());
        principal.client_id = client_id;
        let scopes = words(claims.get("scope").or_else(|| claims.get("scp")));
        let mut roles: Vec<String> = self
            .settings
            .scope_roles()
            .iter()
            .filter(|(scope, _)| scopes.contains(scope))
            .map(|(_, role)| role.clone())
            .collect();
        if let Some(claim) = self.settings.roles_claim() {
            roles.extend(words(claims.get(claim)));
        }
        roles.sort();
        roles.dedup();
        let role = match roles.as_slice() {
            [] => {
                return Err(AuthFailure::NoRole {
                    principal,
                    scopes: self
                        .settings
                        .scope_roles()
                        .iter()
                        .map(|(scope, _)| scope.clone())
                        .collect(),
                });
            }
            [one] => one.clone(),
            several => match self
                .settings
                .role_precedence()
                .iter()
                .find(|r| several.contains(r))
            {
                Some(first) => first.clone(),
                None => {
                    return Err(AuthFailure::SeveralRoles {
                        principal,
                        roles: several.to_vec(),
                    });
                }
            },
        };
        Ok(Authenticated {
            principal,
            role: Some(role),
            scopes: Some(scopes),
        })
    }
}

/// A time claim (`exp`, `nbf`): seconds since the Unix epoch, the fraction of a second dropped.
fn numeric_date(claims: &Map<String, Value>, name: &str) -> Option<u64> {
    let value = claims.get(name)?;
    value.as_u64().or_else(|| {
        let secs = value.as_f64().filter(|f| f.is_finite() && *f >= 0.0)?;
        // Within u64 for any time a JWT writes; `as` saturates beyond it.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Some(secs.trunc() as u64)
    })
}

/// Whether `now` is within the token's `exp` (required) and `nbf` (when present), each
/// `leeway` seconds wider, as jsonwebtoken checks them.
fn in_time(claims: &Map<String, Value>, now: u64, leeway: u64) -> Result<(), String> {
    let exp = numeric_date(claims, "exp").ok_or("it has no `exp` claim")?;
    if exp.saturating_add(leeway) < now {
        return Err("it has expired (`exp`)".to_owned());
    }
    if let Some(nbf) = numeric_date(claims, "nbf")
        && nbf > now.saturating_add(leeway)
    {
        return Err("it is not valid yet (`nbf`)".to_owned());
    }
    Ok(())
}

/// A claim holding words: one space-separated string, or an array of strings.
fn words(claim: Option<&Value>) -> Vec<String> {
    let mut words: Vec<String> = match claim {
        Some(Value::String(text)) => text.split_whitespace().map(str::to_owned).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    words.sort();
    words.dedup();
    words
}

/// Why jsonwebtoken refused a token, in the operator's words.
fn describe(error: &jsonwebtoken::errors::Error, settings: &AuthSettings) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::ExpiredSignature => "it has expired (`exp`)".to_owned(),
        ErrorKind::ImmatureSignature => "it is not valid yet (`nbf`)".to_owned(),
        ErrorKind::InvalidIssuer => format!(
            "it was issued by another issuer than {} (`iss`)",
            settings.issuer()
        ),
        ErrorKind::InvalidAudience => format!(
            "it is for another audience than {} (`aud`)",
            settings.audience()
        ),
        ErrorKind::InvalidSignature => "its signature does not verify".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("it has no `{claim}` claim"),
        ErrorKind::InvalidAlgorithm => "its algorithm does not fit its key".to_owned(),
        _ => format!("it does not verify ({error})"),
    }
}

#[cfg(test)]
mod tests {
    use super::{Algorithm, AuthFailure, Authenticated, Duration, JwtAuth, SharedClock};
    use super::{in_time, words};
    use capability_core::clock::Clock;
    use serde_json::{Value, json};

    /// An issuer in this process: its metadata, and its keys (which the test rotates).
    struct Issuer {
        url: String,
        keys: std::sync::Arc<std::sync::Mutex<Value>>,
    }

    /// Two Ed25519 signing keys (PKCS#8 DER) and their public halves (JWK `x`): test keys.
    const FIRST: ([u8; 48], &str) = (
        [
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20, 0x78, 0x44, 0x45, 0x4d, 0x63, 0xd3, 0x1f, 0x60, 0x2f, 0x54, 0xa5, 0x2a,
            0x80, 0x95, 0x6a, 0x40, 0xc4, 0x52, 0x67, 0x92, 0x30, 0xb9, 0x61, 0x34, 0x64, 0xbf,
            0x6d, 0x27, 0x48, 0xd8, 0xb7, 0x38,
        ],
        "iezp49LSvcmAerTbouGp6tgu6lAvGJE3w93pRS2fp48",
    );
    const SECOND: ([u8; 48], &str) = (
        [
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20, 0x0e, 0xc5, 0xec, 0x05, 0x00, 0x92, 0xa3, 0x5a, 0xda, 0x84, 0xd7, 0x79,
            0xdf, 0x99, 0x1a, 0xf9, 0x87, 0x88, 0xa3, 0xed, 0x1b, 0x4f, 0xe8, 0x36, 0xd5, 0x38,
            0xe3, 0x59, 0xce, 0x6e, 0x11, 0x5e,
        ],
        "rm5X6MGV85E29zxmHxNaKyenvQdedQHAcCjQWulzz0M",
    );
    const AUDIENCE: &str = "https://mcp.test/mcp";

    fn jwk(kid: &str, x: &str) -> Value {
        json!({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": kid, "x": x})
    }

    impl Issuer {
        /// Serves `/.well-known/oauth-authorization-server` and `/jwks` on a loopback port, one
        /// request per connection, on a thread of its own.
        fn start() -> Issuer {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
            let url = format!("http://{}", listener.local_addr().expect("bound"));
            let keys = std::sync::Arc::new(std::sync::Mutex::new(
                json!({"keys": [jwk("first", FIRST.1)]}),
            ));
            let (served, issuer) = (std::sync::Arc::clone(&keys), url.clone());
            std::thread::spawn(move || {
                use std::io::{BufRead, Write};
                for stream in listener.incoming() {
                    let Ok(mut stream) = stream else { continue };
                    let mut reader = std::io::BufReader::new(&stream);
                    let mut head = String::new();
                    let _ = reader.read_line(&mut head);
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                        line.clear();
                    }
                    let body = if head.contains("/jwks") {
                        served.lock().map(|k| k.to_string()).unwrap_or_default()
                    } else {
                        json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")}).to_string()
                    };
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                }
            });
            Issuer { url, keys }
        }

        fn sign(&self, (der, _): &([u8; 48], &str), kid: &str, claims: &Value) -> String {
            let mut header = jsonwebtoken::Header::new(Algorithm::EdDSA);
            header.typ = Some("at+jwt".to_owned());
            header.kid = Some(kid.to_owned());
            let key = jsonwebtoken::EncodingKey::from_ed_der(der);
            jsonwebtoken::encode(&header, claims, &key).expect("signed")
        }

        async fn resource_server(&self, clock: SharedClock) -> JwtAuth {
            let policy = capability_core::Policy::from_toml_str(&format!(
                "[roles.viewer]\nceiling = \"read-only\"\nallow = [\"*\"]\n\n[auth]\n\
                 issuer = \"{}\"\naudience = \"{AUDIENCE}\"\nleeway_secs = 0\n\
                 jwks_refresh_secs = 60\n\n[auth.scope_roles]\n\"mcp:read\" = \"viewer\"\n",
                self.url
            ))
            .expect("policy");
            let settings = policy.auth().expect("[auth]");
            JwtAuth::discover_with_clock(settings, clock)
                .await
                .expect("the issuer is discovered")
        }
    }

    fn refused(outcome: Result<Authenticated, AuthFailure>) -> String {
        match outcome {
            Err(AuthFailure::Invalid(why)) => why,
            other => panic!("not refused as invalid: {other:?}"),
        }
    }

    /// What `tests/it/proxy_oauth.rs` proves of the binary with a token that expired, here on
    /// the resource server's own clock: no wait for the token to run out.
    #[tokio::test(flavor = "current_thread")]
    async fn a_token_holds_from_its_nbf_to_its_exp_on_the_resource_servers_clock() {
        let issuer = Issuer::start();
        let clock = std::sync::Arc::new(capability_core::clock::ManualClock::new());
        let auth = issuer.resource_server(clock.clone()).await;
        let now = clock.unix_secs();
        let claims = json!({"iss": issuer.url, "aud": AUDIENCE, "sub": "alice",
            "scope": "mcp:read", "nbf": now + 10, "exp": now + 70});
        let token = issuer.sign(&FIRST, "first", &claims);

        assert_eq!(
            refused(auth.authenticate(&token).await),
            "it is not valid yet (`nbf`)"
        );
        clock.advance(Duration::from_secs(10));
        let alice = auth.authenticate(&token).await.expect("valid from its nbf");
        assert_eq!(alice.role.as_deref(), Some("viewer"));
        clock.advance(Duration::from_secs(60));
        assert!(
            auth.authenticate(&token).await.is_ok(),
            "still valid at its exp (kept)"
        );
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            refused(auth.authenticate(&token).await),
            "it has expired (`exp`)",
            "a second past its exp: the kept verification does not outlive it"
        );
        let fresh = issuer.sign(
            &FIRST,
            "first",
            &json!({"iss": issuer.url, "aud": AUDIENCE,
            "sub": "alice", "scope": "mcp:read", "exp": clock.unix_secs() - 1}),
        );
        assert_eq!(
            refused(auth.authenticate(&fresh).await),
            "it has expired (`exp`)",
            "never seen before, already expired"
        );
    }

    /// What `tests/it/proxy_oauth.rs` proves of the binary with a rotated key, the refresh
    /// interval timed on the resource server's clock: an unknown `kid` fetches the keys again
    /// only once the interval has passed, and a key the issuer dropped is refused after that.
    #[tokio::test(flavor = "current_thread")]
    async fn a_rotated_key_is_fetched_once_the_interval_passed_and_a_retired_one_refused() {
        let issuer = Issuer::start();
        let clock = std::sync::Arc::new(capability_core::clock::ManualClock::new());
        let auth = issuer.resource_server(clock.clone()).await;
        let claims = json!({"iss": issuer.url, "aud": AUDIENCE, "sub": "alice",
            "scope": "mcp:read", "exp": clock.unix_secs() + 3_600});
        let first = issuer.sign(&FIRST, "first", &claims);
        assert!(auth.authenticate(&first).await.is_ok());

        *issuer.keys.lock().expect("keys") = json!({"keys": [jwk("second", SECOND.1)]});
        let second = issuer.sign(&SECOND, "second", &claims);
        assert!(
            refused(auth.authenticate(&second).await).contains("does not publish"),
            "within the interval: the keys are not fetched again"
        );
        clock.advance(Duration::from_secs(61));
        assert!(
            auth.authenticate(&second).await.is_ok(),
            "past the interval: fetched again, the new key verifies"
        );
        assert!(
            refused(auth.authenticate(&first).await).contains("does not publish"),
            "the retired key's token, verified before, is verified again and refused"
        );
    }

    fn claims(value: Value) -> serde_json::Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn exp_and_nbf_hold_to_the_second_with_the_leeway_both_ways() {
        let token = claims(json!({"exp": 1_000, "nbf": 900}));
        assert_eq!(in_time(&token, 1_000, 0), Ok(()), "until its exp");
        assert_eq!(
            in_time(&token, 1_001, 0),
            Err("it has expired (`exp`)".to_owned())
        );
        assert_eq!(in_time(&token, 1_030, 30), Ok(()), "the leeway");
        assert!(in_time(&token, 1_031, 30).is_err());
        assert_eq!(
            in_time(&token, 899, 0),
            Err("it is not valid yet (`nbf`)".to_owned())
        );
        assert_eq!(in_time(&token, 870, 30), Ok(()));
        assert_eq!(
            in_time(&claims(json!({"exp": 1_000.9})), 1_001, 0),
            Err("it has expired (`exp`)".to_owned()),
            "a fraction of a second is no extra second"
        );
        assert!(in_time(&claims(json!({"exp": "tomorrow"})), 0, 0).is_err());
        assert!(in_time(&claims(json!({})), 0, 0).is_err());
    }

    #[test]
    fn scopes_come_as_a_string_or_an_array() {
        assert_eq!(words(Some(&json!("b a  a"))), ["a", "b"]);
        assert_eq!(words(Some(&json!(["x", 3, "w"]))), ["w", "x"]);
        assert!(words(Some(&json!(7))).is_empty());
        assert!(words(None).is_empty());
    }
}
