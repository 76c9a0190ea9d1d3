//! The issuer's signing keys: its metadata discovered once (RFC 8414, then OpenID Connect
//! Discovery), its JWKS fetched once and kept, and fetched again for a token signed by a key
//! not among them (a rotated key), at most once per interval, so a stream of tokens with
//! made-up key ids cannot make the edge hammer the issuer.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use capability_core::clock::SharedClock;
use jsonwebtoken::jwk::{Jwk, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;

use super::AuthSetupError;

/// The largest metadata document or key set read from the issuer.
const MAX_DOCUMENT: usize = 1024 * 1024;

/// One key of the issuer: how to verify with it, and the algorithm it is for, when its JWK
/// says (`alg`).
pub(super) struct Key {
    pub(super) decoding: DecodingKey,
    pub(super) algorithm: Option<Algorithm>,
}

/// The keys by `kid`, and when they were fetched.
struct Keys {
    by_kid: HashMap<String, std::sync::Arc<Key>>,
    fetched: Instant,
}

/// The issuer's keys, as last fetched.
pub(super) struct KeyCache {
    client: reqwest::Client,
    jwks_uri: String,
    refresh: Duration,
    keys: RwLock<Keys>,
    /// Held while keys are fetched again, so concurrent requests wait for one fetch.
    refetch: tokio::sync::Mutex<()>,
    last_attempt: Mutex<Instant>,
    /// Counts the fetches that changed the keys: what was verified under an older generation
    /// is verified again.
    generation: std::sync::atomic::AtomicU64,
    /// Where the interval between two fetches is timed.
    clock: SharedClock,
}

impl KeyCache {
    /// Discovers the issuer's `jwks_uri` and fetches its keys.
    pub(super) async fn discover(
        client: reqwest::Client,
        issuer: &str,
        refresh: Duration,
        clock: SharedClock,
    ) -> Result<KeyCache, AuthSetupError> {
        let metadata = metadata(&client, issuer).await?;
        let jwks_uri = metadata
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or_else(|| AuthSetupError::new(issuer, "its metadata names no `jwks_uri`"))?
            .to_owned();
        let keys = fetch(&client, &jwks_uri)
            .await
            .map_err(|why| AuthSetupError::new(issuer, format!("its keys ({jwks_uri}): {why}")))?;
        Ok(KeyCache {
            client,
            jwks_uri,
            refresh,
            keys: RwLock::new(Keys {
                by_kid: keys,
                fetched: clock.instant(),
            }),
            refetch: tokio::sync::Mutex::new(()),
            last_attempt: Mutex::new(clock.instant()),
            generation: std::sync::atomic::AtomicU64::new(0),
            clock,
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Keys> {
        self.keys.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The key `kid` names; for a token without `kid`, the one key there is. Fetches the keys
    /// again when `kid` is unknown and the last fetch (or attempt) is older than the interval.
    pub(super) async fn key(&self, kid: Option<&str>) -> Result<std::sync::Arc<Key>, String> {
        if let Some(key) = self.known(kid) {
            return Ok(key);
        }
        let Some(kid) = kid else {
            return Err(
                "the token names no key (`kid`) and the issuer has more than one".to_owned(),
            );
        };
        let _one_fetch = self.refetch.lock().await;
        // Another request may have fetched them while this one waited.
        if let Some(key) = self.known(Some(kid)) {
            return Ok(key);
        }
        {
            let mut last = self
                .last_attempt
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let now = self.clock.instant();
            if now.saturating_duration_since(*last) < self.refresh {
                return Err(format!(
                    "it is signed by a key the issuer does not publish (`kid` {kid:?})"
                ));
            }
            *last = now;
        }
        match fetch(&self.client, &self.jwks_uri).await {
            Ok(keys) => {
                let mut now = self.keys.write().unwrap_or_else(PoisonError::into_inner);
                *now = Keys {
                    by_kid: keys,
                    fetched: self.clock.instant(),
                };
                self.generation
                    .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                tracing::info!(
                    target: "capability::http",
                    jwks_uri = %self.jwks_uri,
                    keys = now.by_kid.len(),
                    "fetched the issuer's keys again"
                );
            }
            Err(why) => tracing::warn!(
                target: "capability::http",
                jwks_uri = %self.jwks_uri,
                %why,
                "cannot fetch the issuer's keys; keeping those fetched before"
            ),
        }
        self.known(Some(kid)).ok_or_else(|| {
            format!("it is signed by a key the issuer does not publish (`kid` {kid:?})")
        })
    }

    fn known(&self, kid: Option<&str>) -> Option<std::sync::Arc<Key>> {
        let keys = self.read();
        match kid {
            Some(kid) => keys.by_kid.get(kid).cloned(),
            None if keys.by_kid.len() == 1 => keys.by_kid.values().next().cloned(),
            None => None,
        }
    }

    /// The generation of the keys now: it changes whenever they are fetched again.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// How long ago the keys were fetched.
    pub(super) fn age(&self) -> Duration {
        self.clock
            .instant()
            .saturating_duration_since(self.read().fetched)
    }
}

/// The issuer's metadata: RFC 8414 (`/.well-known/oauth-authorization-server`, inserted before
/// the issuer's path), else OpenID Connect Discovery (`/.well-known/openid-configuration`
/// appended). Its `issuer` must be the issuer asked for (RFC 8414 section 3.3).
pub(super) async fn metadata(
    client: &reqwest::Client,
    issuer: &str,
) -> Result<Value, AuthSetupError> {
    let (origin, path) = split_origin(issuer)
        .ok_or_else(|| AuthSetupError::new(issuer, "not an http or https URL"))?;
    let path = path.trim_end_matches('/');
    let urls = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ];
    let mut failures = Vec::new();
    for url in &urls {
        match get_json(client, url).await {
            Ok(document) => {
                let said = document.get("issuer").and_then(Value::as_str);
                if said != Some(issuer) {
                    return Err(AuthSetupError::new(
                        issuer,
                        format!(
                            "its metadata ({url}) says the issuer is {said:?}: a token's `iss` \
                             would not be what [auth] issuer names"
                        ),
                    ));
                }
                return Ok(document);
            }
            Err(why) => failures.push(format!("{url}: {why}")),
        }
    }
    Err(AuthSetupError::new(
        issuer,
        format!("no metadata found ({})", failures.join("; ")),
    ))
}

/// `https://host:port` and the path of a URL.
pub(crate) fn split_origin(url: &str) -> Option<(&str, &str)> {
    let scheme_end = url
        .strip_prefix("https://")
        .map(|_| 8)
        .or_else(|| url.strip_prefix("http://").map(|_| 7))?;
    let path_start = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |i| scheme_end + i);
    Some((&url[..path_start], &url[path_start..]))
}

async fn get_json(client: &reqwest::Client, url: &str) -> Result<Value, String> {
    let response = client
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("HTTP {status}"));
    }
    if response
        .content_length()
        .is_some_and(|n| n > MAX_DOCUMENT as u64)
    {
        return Err("the document is larger than 1 MiB".to_owned());
    }
    let bytes = response.bytes().await.map_err(|e| e.to_string())?;
    if bytes.len() > MAX_DOCUMENT {
        return Err("the document is larger than 1 MiB".to_owned());
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))
}

/// The keys of a JWKS document by `kid`: public signature keys only (a symmetric key is
/// skipped: it would let anyone who can read the key set mint tokens).
async fn fetch(
    client: &reqwest::Client,
    url: &str,
) -> Result<HashMap<String, std::sync::Arc<Key>>, String> {
    let document = get_json(client, url).await?;
    let set: JwkSet = serde_json::from_value(document).map_err(|e| format!("not a JWKS: {e}"))?;
    let mut keys = HashMap::new();
    for (i, jwk) in set.keys.iter().enumerate() {
        let symmetric = matches!(
            jwk.algorithm,
            jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_)
        );
        let encryption = matches!(
            jwk.common.public_key_use,
            Some(jsonwebtoken::jwk::PublicKeyUse::Encryption)
        );
        if symmetric || encryption {
            continue;
        }
        let Ok(decoding) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        let kid = jwk.common.key_id.clone().unwrap_or_else(|| format!("#{i}"));
        keys.insert(
            kid,
            std::sync::Arc::new(Key {
                decoding,
                algorithm: algorithm(jwk),
            }),
        );
    }
    if keys.is_empty() {
        return Err("it holds no public signature key".to_owned());
    }
    Ok(keys)
}

fn algorithm(jwk: &Jwk) -> Option<Algorithm> {
    Some(match jwk.common.key_algorithm? {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::split_origin;

    #[test]
    fn an_issuer_splits_into_origin_and_path() {
        assert_eq!(
            split_origin("https://auth.example.com/tenant/1"),
            Some(("https://auth.example.com", "/tenant/1"))
        );
        assert_eq!(
            split_origin("http://127.0.0.1:9000"),
            Some(("http://127.0.0.1:9000", ""))
        );
        assert_eq!(split_origin("ftp://x"), None);
    }
}
