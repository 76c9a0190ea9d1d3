//! OAuth 2.1 access tokens as JWTs (RFC 9068): typed `at+jwt` (or `JWT` where `[auth]
//! allow_typ_jwt` says), the signature checked against the issuer's keys, then `iss`, `aud`,
//! `exp` and `nbf`; then who the token is for (`sub`, never `client_id` in its place), the scopes
//! it carries, and the role they give under the policy's `[auth]`.

use std::collections::HashSet;
use std::time::Duration;

use capability_audit::Principal;
use capability_core::authz::AuthSettings;
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
        super::install_crypto_provider();
        let client = super::http_client(settings.issuer())?;
        let keys = KeyCache::discover(
            client,
            settings.issuer(),
            Duration::from_secs(settings.jwks_refresh_secs()),
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
        let now = jsonwebtoken::get_current_timestamp();
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
        let time = |name: &str| claims.get(name).and_then(serde_json::Value::as_u64);
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
        validation.leeway = self.settings.leeway_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[self.settings.issuer()]);
        validation.set_audience(&[self.settings.audience()]);
        validation.required_spec_claims = ["exp", "iss", "aud"]
            .into_iter()
            .map(str::to_owned)
            .collect::<HashSet<String>>();
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation)
            .map_err(|e| describe(&e, &self.settings))?;
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
    use super::words;
    use serde_json::json;

    #[test]
    fn scopes_come_as_a_string_or_an_array() {
        assert_eq!(words(Some(&json!("b a  a"))), ["a", "b"]);
        assert_eq!(words(Some(&json!(["x", 3, "w"]))), ["w", "x"]);
        assert!(words(Some(&json!(7))).is_empty());
        assert!(words(None).is_empty());
    }
}
