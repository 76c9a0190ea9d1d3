//! The `/metrics` endpoint: HTTP/1.1 on the `--metrics` address, `GET /metrics` only, through
//! the HTTP edge's one accept loop (`capability_http::listen`: a head within seconds, a cap on
//! connections). Its `Host` is checked as the MCP front's is (loopback names, and the address
//! listened on; any host on the unspecified address), and with `--metrics-token-file` a scrape
//! needs `Authorization: Bearer <that token>` (Prometheus: `authorization: credentials_file`).
//! The labels name roles, servers and tools: nothing a stranger should read. The counters are
//! the engine's ([`capability_gateway::metrics`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use capability_gateway::metrics::Metrics;

/// The `--metrics` endpoint, bound, with what it serves and who may read it.
pub struct Endpoint {
    listener: std::net::TcpListener,
    /// The counters it serves (fed by a
    /// [`MeteredSink`](capability_gateway::metrics::MeteredSink)).
    pub counters: Arc<Metrics>,
    access: Arc<Access>,
}

/// Who may read the metrics.
struct Access {
    /// The `Host` names taken (`None`: any, on the unspecified address).
    hosts: Option<Vec<String>>,
    /// SHA-256 (hex) of the token a scrape must present, if one is set.
    token_sha256: Option<String>,
}

impl Endpoint {
    /// Binds `address`; with `token_file`, a scrape must present the token it holds (its one
    /// line). The endpoint's URL is said on standard error as `who: metrics on ...`.
    pub fn bind(
        address: SocketAddr,
        token_file: Option<&Path>,
        who: &str,
    ) -> Result<Endpoint, String> {
        let token_sha256 = match token_file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!(
                        "cannot read the metrics token file `{}`: {e}",
                        path.display()
                    )
                })?;
                let token = text.trim();
                if token.len() < 16 || token.chars().any(char::is_whitespace) {
                    return Err(format!(
                        "the metrics token file `{}` must hold one token of at least 16 \
                         characters, without spaces",
                        path.display()
                    ));
                }
                Some(capability_rules::sha256_hex(token.as_bytes()))
            }
            None => None,
        };
        let listener = std::net::TcpListener::bind(address)
            .map_err(|e| format!("cannot serve the metrics on {address}: {e}"))?;
        let bound = listener
            .local_addr()
            .map_err(|e| format!("cannot read the metrics address: {e}"))?;
        {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr().lock(),
                "{who}: metrics on http://{bound}/metrics"
            );
        }
        Ok(Endpoint {
            listener,
            counters: Arc::new(Metrics::default()),
            access: Arc::new(Access {
                hosts: capability_http::listen::allowed_hosts(bound),
                token_sha256,
            }),
        })
    }

    /// Serves the metrics until the task is dropped.
    pub async fn serve(self) {
        let Endpoint {
            listener,
            counters,
            access,
        } = self;
        let listener = match listener
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpListener::from_std(listener))
        {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(target: "capability_cli::metrics", "the metrics endpoint cannot serve: {error}");
                return;
            }
        };
        capability_http::listen::serve(
            listener,
            move || {
                let counters = counters.clone();
                let access = access.clone();
                hyper::service::service_fn(move |request| {
                    let response = answer(&request, &counters, &access);
                    async move { Ok::<_, Infallible>(response) }
                })
            },
            capability_http::listen::Limits::default(),
            "the metrics endpoint",
        )
        .await;
    }
}

fn answer(request: &Request<Incoming>, metrics: &Metrics, access: &Access) -> Response<String> {
    let (status, body) =
        if !capability_http::listen::host_allowed(request.headers(), access.hosts.as_deref()) {
            (
                StatusCode::FORBIDDEN,
                "this Host is not served here (the metrics endpoint answers the names of the \
             address it listens on)\n"
                    .to_owned(),
            )
        } else if !access.token_sha256.as_deref().is_none_or(|expected| {
            presented_sha256(request).is_some_and(|presented| presented == expected)
        }) {
            (
                StatusCode::UNAUTHORIZED,
                "a scrape needs `Authorization: Bearer <the --metrics-token-file token>`\n"
                    .to_owned(),
            )
        } else {
            if let Some(connection) = request.extensions().get::<capability_http::Connection>() {
                connection.authenticated();
            }
            match (request.method(), request.uri().path()) {
                (&Method::GET, "/metrics") => (StatusCode::OK, metrics.render()),
                (_, "/metrics") => (
                    StatusCode::METHOD_NOT_ALLOWED,
                    "only GET /metrics\n".to_owned(),
                ),
                _ => (
                    StatusCode::NOT_FOUND,
                    "the metrics are at /metrics\n".to_owned(),
                ),
            }
        };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let content_type = if status == StatusCode::OK {
        "text/plain; version=0.0.4; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let headers = response.headers_mut();
    if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
        headers.insert(hyper::header::CONTENT_TYPE, value);
    }
    if status == StatusCode::UNAUTHORIZED {
        headers.insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

/// SHA-256 (hex) of the bearer token a request presents.
fn presented_sha256(request: &Request<Incoming>) -> Option<String> {
    let value = request
        .headers()
        .get(hyper::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| capability_rules::sha256_hex(token.trim().as_bytes()))
}
