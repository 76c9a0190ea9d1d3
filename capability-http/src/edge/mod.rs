//! The HTTP edge: [`Edge`] and the steps every request goes through (listed on it).

mod config;
mod record;
mod respond;
mod sessions;

pub use config::EdgeConfig;

pub(crate) mod rate;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use capability_core::authz::DenyReason;
use http::{Method, Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};

use crate::auth::AuthFailure;
use record::Peek;
use respond::json;
use sessions::{Known, Sessions};

/// The session a request's `Mcp-Session-Id` names, once the edge checked it was issued to this
/// request's principal: the only session id the governed server counts
/// ([`EdgeRoles`](crate::EdgeRoles)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedSession(pub String);

/// A response of the edge or of the service behind it.
pub type EdgeResponse = Response<BoxBody<Bytes, Infallible>>;

type CloseFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Closes a session downstream (rmcp's session manager) when the edge lets it expire.
pub(super) type Closer = Arc<dyn Fn(String) -> CloseFuture + Send + Sync>;

struct Shared {
    config: EdgeConfig,
    sessions: Sessions,
    rate: rate::RateLimits,
    /// The protected resource metadata document and its paths, in OAuth mode.
    metadata: Option<(Bytes, String, &'static str)>,
    /// The URL of that document, for the challenges.
    metadata_url: Option<String>,
}

/// The HTTP edge in front of `S` (rmcp's `StreamableHttpService`). Cheap to clone.
///
/// What stands between a client's HTTP request and rmcp's Streamable HTTP service.
/// In order, for every request:
///
/// 1. the protected resource metadata is served at its well-known paths (OAuth mode), and only
///    the MCP endpoint is served besides, and a page's paths when given ([`EdgeConfig::page`]:
///    no session and no scope step; without a token, on to the page unauthenticated);
/// 2. the `Host` must be one of the listener's names, when it gave them
///    ([`EdgeConfig::hosts`]), and a present `Origin` must be allowed, or the request's own
///    origin on such a Host (`403`);
/// 3. the body is read up to its limit (`413`), within its time (`408`);
/// 4. the caller is authenticated (`401` with `WWW-Authenticate: Bearer resource_metadata=..`,
///    `403` for a valid token that gives no role, or several), and its connection marked so
///    ([`Connection::authenticated`](crate::Connection::authenticated));
/// 5. its rate is checked (`429` with `Retry-After`);
/// 6. a session id counts only if it was issued to this principal (`404` unknown or expired,
///    `403` another's); a new session needs a place under the caps (`429`);
/// 7. a `tools/call` needs the scopes the tool requires among the token's (`403
///    insufficient_scope` naming all of them);
/// 8. the request goes on without its `Authorization` header (no token passes the edge), with
///    the [`Authenticated`](crate::Authenticated) caller in its extensions.
///
/// A call, read or get refused on the way is recorded, as the governed server records one.
/// Nothing reaches rmcp before the caller is known: no session is made for a stranger.
pub struct Edge<S> {
    inner: S,
    shared: Arc<std::sync::RwLock<Arc<Shared>>>,
}

impl<S: Clone> Clone for Edge<S> {
    fn clone(&self) -> Self {
        Edge {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S> Edge<S> {
    /// The edge `config` in front of `inner`.
    pub fn new(inner: S, config: EdgeConfig) -> Self {
        let http = &config.http;
        let sessions = Sessions::new(
            http.max_sessions(),
            http.max_sessions_per_principal(),
            Duration::from_secs(http.session_idle_secs()),
            Arc::clone(&config.clock),
        );
        let rate = rate::RateLimits::new(
            http.rate_per_second(),
            http.rate_burst(),
            Arc::clone(&config.clock),
        );
        let (metadata, metadata_url) = crate::auth::served_metadata(&config.credentials);
        Edge {
            inner,
            shared: Arc::new(std::sync::RwLock::new(Arc::new(Shared {
                config,
                sessions,
                rate,
                metadata,
                metadata_url,
            }))),
        }
    }

    /// Works from now on as `config` says (its credentials, limits, recording), for a reload:
    /// a request already past authentication finishes under the config it started with. The
    /// sessions issued and the callers' rates are kept (under the new caps and rates): a
    /// session stays its principal's, and a reload does not give anyone a fresh budget.
    pub fn reload(&self, config: EdgeConfig) {
        let mut current = self
            .shared
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let http = &config.http;
        let sessions = current.sessions.with_limits(
            http.max_sessions(),
            http.max_sessions_per_principal(),
            Duration::from_secs(http.session_idle_secs()),
        );
        let rate = current
            .rate
            .with_limits(http.rate_per_second(), http.rate_burst());
        let (metadata, metadata_url) = crate::auth::served_metadata(&config.credentials);
        *current = Arc::new(Shared {
            config,
            sessions,
            rate,
            metadata,
            metadata_url,
        });
    }

    fn current(&self) -> Arc<Shared> {
        self.shared
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl<S, B> tower_service::Service<Request<B>> for Edge<S>
where
    S: tower_service::Service<Request<Full<Bytes>>, Response = EdgeResponse, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = EdgeResponse;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<EdgeResponse, Infallible>> + Send>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let edge = self.clone();
        Box::pin(async move { Ok(edge.serve(request).await) })
    }
}

impl<S> Edge<S>
where
    S: tower_service::Service<Request<Full<Bytes>>, Response = EdgeResponse, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    /// One request, through every step listed on [`Edge`].
    pub async fn serve<B>(self, request: Request<B>) -> EdgeResponse
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let shared = self.current();
        let shared = &*shared;
        let (mut parts, body) = request.into_parts();
        let path = parts.uri.path();
        if let Some((document, long, short)) = &shared.metadata
            && (path == long || path == *short)
        {
            return if parts.method == Method::GET {
                json(StatusCode::OK, document.clone())
            } else {
                respond::status(StatusCode::METHOD_NOT_ALLOWED, "use GET")
            };
        }
        let page = shared.config.pages.iter().any(|prefix| {
            path.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        });
        if path != shared.config.endpoint && !page {
            return respond::status(
                StatusCode::NOT_FOUND,
                &format!("not found: the MCP endpoint is {}", shared.config.endpoint),
            );
        }
        // The Host first (against DNS rebinding; rmcp's service checks it again), when the
        // listener's names are known.
        if !crate::listen::host_allowed(&parts.headers, shared.config.hosts.as_deref()) {
            return respond::status(
                StatusCode::FORBIDDEN,
                "this Host is not served here: the endpoint answers the names of the address it \
                 listens on",
            );
        }
        if let Some(origin) = parts.headers.get(header::ORIGIN)
            && !origin_allowed(
                origin,
                shared.config.http.allowed_origins(),
                shared
                    .config
                    .hosts
                    .is_some()
                    .then(|| parts.headers.get(header::HOST))
                    .flatten(),
            )
        {
            return respond::status(
                StatusCode::FORBIDDEN,
                "this Origin may not call this server ([http] allowed_origins)",
            );
        }
        let limit = shared.config.http.max_body_bytes();
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return respond::too_large(limit);
        }
        let within = Duration::from_secs(shared.config.http.body_timeout_secs());
        let read = tokio::time::timeout(within, Limited::new(body, limit).collect()).await;
        let bytes = match read {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
                return respond::too_large(limit);
            }
            Err(_) => {
                return respond::status(
                    StatusCode::REQUEST_TIMEOUT,
                    &format!(
                        "the request body did not arrive within {} s ([http] body_timeout_secs)",
                        within.as_secs()
                    ),
                );
            }
            Ok(Err(error)) => {
                return respond::status(
                    StatusCode::BAD_REQUEST,
                    &format!("the request body could not be read: {error}"),
                );
            }
        };
        let peek = Peek::of(&bytes);
        let recording = shared.config.recording.as_ref();

        // Who is calling.
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(crate::auth::bearer);
        let authenticated = match token {
            // The page's own files: the service behind refuses what needs a caller.
            None if page => {
                return self.pass(parts, bytes).await;
            }
            None => Err(AuthFailure::Missing),
            Some(token) => shared.config.credentials.authenticate(token).await,
        };
        let subject_token = match (&authenticated, token) {
            (Ok(_), Some(token)) if shared.config.keep_subject_token => {
                Some(crate::SubjectToken(Arc::from(token)))
            }
            _ => None,
        };
        let caller = match authenticated {
            Ok(caller) => {
                // The connection carried a known caller: at the listener's cap, strangers'
                // connections are closed before this one.
                if let Some(connection) = parts.extensions.get::<crate::Connection>() {
                    connection.authenticated();
                }
                caller
            }
            Err(failure) => {
                if let Some(recording) = recording {
                    let why = failure.to_string();
                    let principal = failure.principal();
                    recording.refused(&peek, None, principal, DenyReason::Unauthenticated { why });
                }
                return respond::unauthenticated(&failure, shared.metadata_url.as_deref());
            }
        };
        let key = caller.principal.key();
        let refuse = |reason: DenyReason| {
            if let Some(recording) = recording {
                recording.refused(
                    &peek,
                    caller.role.as_deref(),
                    Some(&caller.principal),
                    reason,
                );
            }
        };

        if let Err(wait) = shared.rate.take(&key) {
            let seconds = wait.as_secs() + 1;
            refuse(DenyReason::Limited {
                why: format!("over its rate ([http] rate_per_second); retry in {seconds} s"),
            });
            return respond::retry_after(seconds, "too many requests from this caller");
        }

        if page {
            parts.headers.remove(header::AUTHORIZATION);
            parts.extensions.insert(caller);
            return self.pass(parts, bytes).await;
        }

        // Its session.
        let mut reservation = None;
        let session = parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        match &session {
            Some(id) => match shared.sessions.check(id, &key) {
                Known::Yours => {
                    parts.extensions.insert(VerifiedSession(id.clone()));
                }
                Known::Theirs => {
                    return respond::status(
                        StatusCode::FORBIDDEN,
                        "this session was issued to another caller",
                    );
                }
                Known::Unknown(expired) => {
                    if let Some(id) = expired {
                        self.close(id);
                    }
                    return respond::status(StatusCode::NOT_FOUND, "session not found");
                }
            },
            None if peek.is("initialize") => {
                let (place, expired) = shared.sessions.admit(&key);
                for id in expired {
                    self.close(id);
                }
                match place {
                    Ok(place) => reservation = Some(place),
                    Err(why) => return respond::retry_after(60, &why),
                }
            }
            None => {}
        }

        // The scopes a tool requires, among the token's.
        if let (Some(held), Some(tool)) = (&caller.scopes, peek.tool())
            && let Some(manifest) = recording.and_then(|r| r.listings.as_ref()?(tool))
        {
            let required = manifest.required_scopes();
            let missing: Vec<String> = required
                .iter()
                .filter(|s| !held.contains(s))
                .cloned()
                .collect();
            if !missing.is_empty() {
                refuse(DenyReason::MissingScopes {
                    scopes: missing.clone(),
                });
                return respond::insufficient_scope(
                    tool,
                    required,
                    &missing,
                    shared.metadata_url.as_deref(),
                );
            }
        }

        parts.headers.remove(header::AUTHORIZATION);
        let closing = (parts.method == Method::DELETE)
            .then(|| session.clone())
            .flatten();
        parts.extensions.insert(caller);
        if let Some(token) = subject_token {
            parts.extensions.insert(token);
        }
        let mut inner = self.inner.clone();
        let response = match inner
            .call(Request::from_parts(parts, Full::new(bytes)))
            .await
        {
            Ok(response) => response,
            Err(never) => match never {},
        };
        if let Some(place) = reservation {
            match response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                Some(id) => shared.sessions.issued(place, id),
                None => drop(place),
            }
        }
        if let Some(id) = closing
            && response.status().is_success()
        {
            shared.sessions.closed(&id);
        }
        response
    }

    /// Passes a request of the page on, as it is.
    fn pass(
        &self,
        parts: http::request::Parts,
        bytes: Bytes,
    ) -> impl Future<Output = EdgeResponse> + Send + use<S> {
        let mut inner = self.inner.clone();
        async move {
            match inner
                .call(Request::from_parts(parts, Full::new(bytes)))
                .await
            {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    }

    /// Closes downstream ([`EdgeConfig::sessions`]) each session idle past its limit: for a
    /// service that does not see every request (its own idle timeout off, the edge's counts).
    pub fn close_idle(&self) {
        for id in self.current().sessions.expire_idle() {
            self.close(id);
        }
    }

    fn close(&self, id: String) {
        if let Some(closer) = &self.current().config.closer {
            tokio::spawn(closer(id));
        }
    }
}

/// Whether `origin` is one of `allowed` (`scheme://host[:port]`, letter case aside), or the
/// request's own origin: the same `host[:port]` as its `Host`, given only when that Host was
/// checked against the listener's names (a page of `http://localhost:8931` calling the gateway
/// at `localhost:8931` is no rebinding: an attacker's name fails the Host check).
fn origin_allowed(
    origin: &http::HeaderValue,
    allowed: &[String],
    checked_host: Option<&http::HeaderValue>,
) -> bool {
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    let origin = origin.trim().to_ascii_lowercase();
    if allowed.contains(&origin) {
        return true;
    }
    let Some(host) = checked_host.and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let host = host.trim().to_ascii_lowercase();
    ["http://", "https://"]
        .iter()
        .any(|scheme| origin.strip_prefix(scheme) == Some(host.as_str()))
}
