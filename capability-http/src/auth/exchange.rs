//! RFC 8693 token exchange, for a program behind the edge that calls another resource server
//! on the caller's behalf: the caller's access token (the subject token, which never leaves
//! this process except to its own issuer) is traded at the issuer's token endpoint for a token
//! whose audience is the other server, so that server sees who is calling (the token's `sub`,
//! with `act` naming this program) and the caller's own token never reaches it.
//!
//! Exchanged tokens are kept until a little before they expire, per subject token.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capability_core::clock::{SharedClock, SystemClock};

use serde_json::Value;

use super::AuthSetupError;
use super::keys::metadata;

/// The grant type of RFC 8693.
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The token type of an access token (RFC 8693 section 3).
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// An exchanged token is used until this long before it expires.
const MARGIN: Duration = Duration::from_secs(10);
/// The most exchanged tokens kept.
const MAX_KEPT: usize = 4_096;
/// The largest token response read.
const MAX_RESPONSE: usize = 64 * 1024;
/// The longest an exchanged token is kept, whatever the issuer's `expires_in` says (a lifetime
/// past what the clock can hold would otherwise overflow it).
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// The caller's access token, kept by the edge in the request's extensions (only when
/// [`EdgeConfig::keep_subject_token`](crate::EdgeConfig::keep_subject_token) asks): for an
/// exchange at its issuer, never to be sent anywhere else. Its `Debug` does not show it.
#[derive(Clone)]
pub struct SubjectToken(pub(crate) Arc<str>);

impl SubjectToken {
    /// The token, for the exchange.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SubjectToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SubjectToken(..)")
    }
}

/// A token the issuer gave in exchange. Its `Debug` does not show it.
#[derive(Clone)]
pub struct Exchanged {
    token: Arc<str>,
    /// When to stop using it.
    pub good_until: Instant,
}

impl Exchanged {
    /// The token, for the other server's `Authorization: Bearer` header.
    pub fn secret(&self) -> &str {
        &self.token
    }
}

impl fmt::Debug for Exchanged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exchanged")
            .field("good_until", &self.good_until)
            .finish_non_exhaustive()
    }
}

/// This program as a client of the issuer, exchanging callers' tokens for `audience`.
pub struct TokenExchange {
    client: reqwest::Client,
    token_endpoint: String,
    client_id: String,
    client_secret: String,
    audience: String,
    kept: Mutex<HashMap<String, Exchanged>>,
    /// Where how long an exchanged token is kept is timed.
    clock: SharedClock,
}

impl fmt::Debug for TokenExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenExchange")
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl TokenExchange {
    /// Finds `issuer`'s token endpoint (its RFC 8414 or OpenID metadata, whose `issuer` must be
    /// `issuer`), as client `client_id` authenticating with `client_secret` (in the form,
    /// `client_secret_post`), for tokens whose audience is `audience`. An issuer whose metadata
    /// lists `grant_types_supported` without the token-exchange grant is refused now, not at
    /// the first call.
    pub async fn discover(
        issuer: &str,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
        audience: impl Into<String>,
    ) -> Result<TokenExchange, AuthSetupError> {
        let client = super::http_client(issuer)?;
        let metadata = metadata(&client, issuer).await?;
        let token_endpoint = metadata
            .get("token_endpoint")
            .and_then(Value::as_str)
            .ok_or_else(|| AuthSetupError::new(issuer, "its metadata names no token_endpoint"))?
            .to_owned();
        if let Some(grants) = metadata
            .get("grant_types_supported")
            .and_then(Value::as_array)
            && !grants
                .iter()
                .any(|g| g.as_str() == Some(TOKEN_EXCHANGE_GRANT))
        {
            return Err(AuthSetupError::new(
                issuer,
                format!(
                    "it does not support token exchange ({TOKEN_EXCHANGE_GRANT} is not among its grant_types_supported)"
                ),
            ));
        }
        Ok(TokenExchange {
            client,
            token_endpoint,
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            audience: audience.into(),
            kept: Mutex::new(HashMap::new()),
            clock: SystemClock::shared(),
        })
    }

    /// Times how long an exchanged token is kept with `clock` (the system clock unless told:
    /// tests move a [`ManualClock`](capability_core::clock::ManualClock)).
    #[must_use]
    pub fn with_clock(mut self, clock: SharedClock) -> TokenExchange {
        self.clock = clock;
        self
    }

    /// The audience the exchanged tokens are for.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// A token for the audience on behalf of `subject`: one kept from an earlier exchange of the
    /// same subject token while it is good, else a new one from the issuer. The error says why
    /// the issuer refused (its `error` and `error_description`), never a token.
    pub async fn exchange(&self, subject: &SubjectToken) -> Result<Exchanged, String> {
        let key = capability_rules::sha256_hex(subject.secret().as_bytes());
        let now = self.clock.instant();
        if let Some(kept) = self.lock().get(&key).filter(|e| e.good_until > now) {
            return Ok(kept.clone());
        }
        let form = [
            ("grant_type", TOKEN_EXCHANGE_GRANT),
            ("subject_token", subject.secret()),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("requested_token_type", ACCESS_TOKEN_TYPE),
            ("audience", &self.audience),
            ("client_id", &self.client_id),
            ("client_secret", &self.client_secret),
        ];
        let body = form
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let response = self
            .client
            .post(&self.token_endpoint)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "the token endpoint {} did not answer: {e}",
                    self.token_endpoint
                )
            })?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| format!("the token endpoint's answer could not be read: {e}"))?;
        if bytes.len() > MAX_RESPONSE {
            return Err("the token endpoint's answer is larger than 64 KiB".to_owned());
        }
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let text = |name: &str| answer.get(name).and_then(Value::as_str);
        if !status.is_success() {
            return Err(format!(
                "the issuer refused the exchange (HTTP {status}): {}{}",
                text("error").unwrap_or("no error code"),
                text("error_description")
                    .map(|d| format!(": {}", printable(d)))
                    .unwrap_or_default()
            ));
        }
        let token = text("access_token")
            .filter(|t| !t.is_empty())
            .ok_or("the issuer's answer has no access_token")?;
        if let Some(kind) = text("token_type")
            && !kind.eq_ignore_ascii_case("bearer")
        {
            return Err(format!(
                "the issuer gave a `{}` token, not a bearer token",
                printable(kind)
            ));
        }
        let lifetime = answer
            .get("expires_in")
            .and_then(Value::as_u64)
            .map_or(Duration::ZERO, Duration::from_secs)
            .min(MAX_LIFETIME);
        let exchanged = Exchanged {
            token: Arc::from(token),
            good_until: now + lifetime.saturating_sub(MARGIN),
        };
        let mut kept = self.lock();
        kept.retain(|_, e| e.good_until > now);
        if kept.len() < MAX_KEPT {
            kept.insert(key, exchanged.clone());
        }
        Ok(exchanged)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Exchanged>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Text from the issuer, for a message: control characters shown as `?`, at most 200 chars.
fn printable(text: &str) -> String {
    text.chars()
        .take(200)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// `application/x-www-form-urlencoded`: unreserved bytes as they are, the rest `%XX`.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(byte));
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_value_is_percent_encoded() {
        assert_eq!(encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(encode("urn:ietf:x"), "urn%3Aietf%3Ax");
    }

    /// An issuer on a loopback port that exchanges every subject token for `exchanged-<n>`,
    /// its answers saying `expires_in`: its URL and how many exchanges it made.
    fn issuer_saying(expires_in: Value) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::io::{BufRead, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("bound"));
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (issuer, made) = (url.clone(), Arc::clone(&count));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = std::io::BufReader::new(&stream);
                let (mut head, mut line, mut length) = (String::new(), String::new(), 0);
                let _ = reader.read_line(&mut head);
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = n.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let answer = if head.starts_with("POST") {
                    let n = made.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    serde_json::json!({"access_token": format!("exchanged-{n}"),
                        "token_type": "Bearer", "expires_in": expires_in})
                } else {
                    serde_json::json!({"issuer": issuer, "token_endpoint": format!("{issuer}/token"),
                        "grant_types_supported": [TOKEN_EXCHANGE_GRANT]})
                }
                .to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        (url, count)
    }

    /// With an issuer whose answers say `expires_in`: the token is kept until `kept` has passed
    /// on the given clock (asked again a second before, no new exchange), and exchanged again
    /// a second after, without anyone waiting.
    async fn kept_for(expires_in: Value, kept: Duration) {
        let (url, exchanges) = issuer_saying(expires_in);
        let clock = Arc::new(capability_core::clock::ManualClock::new());
        let exchange = TokenExchange::discover(&url, "gateway", "secret", "https://api.test")
            .await
            .expect("the issuer is discovered")
            .with_clock(clock.clone());
        let subject = SubjectToken(Arc::from("eyJcaller"));
        let first = exchange.exchange(&subject).await.expect("exchanged");
        assert_eq!(first.secret(), "exchanged-1");
        clock.advance(kept - Duration::from_secs(1));
        let again = exchange.exchange(&subject).await.expect("kept");
        assert_eq!(again.secret(), "exchanged-1");
        assert_eq!(exchanges.load(std::sync::atomic::Ordering::SeqCst), 1);
        clock.advance(Duration::from_secs(2));
        let again = exchange.exchange(&subject).await.expect("exchanged again");
        assert_eq!(again.secret(), "exchanged-2");
        assert_eq!(exchanges.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_exchanged_token_is_kept_until_its_expiry_less_the_margin_on_the_given_clock() {
        // 120 s, less the margin of 10.
        kept_for(serde_json::json!(120), Duration::from_secs(110)).await;
    }

    /// An issuer whose `expires_in` is past what the clock can hold (`u64::MAX` seconds) is
    /// kept a day, not added to the clock: before, the addition overflowed and panicked.
    #[tokio::test(flavor = "current_thread")]
    async fn a_lifetime_past_the_clock_is_kept_a_day_and_panics_nothing() {
        kept_for(serde_json::json!(u64::MAX), MAX_LIFETIME - MARGIN).await;
    }

    #[test]
    fn neither_token_shows_in_debug() {
        let subject = SubjectToken(Arc::from("eyJsecret"));
        assert_eq!(format!("{subject:?}"), "SubjectToken(..)");
        let exchanged = Exchanged {
            token: Arc::from("eyJother"),
            good_until: Instant::now(),
        };
        assert!(!format!("{exchanged:?}").contains("eyJ"));
    }
}
