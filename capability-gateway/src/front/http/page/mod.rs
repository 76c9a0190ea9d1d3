//! The approvals page of `capability gateway --listen`: at [`PREFIX`] (`/approvals`), for
//! approvers, the proposals waiting for this gateway, each approved or rejected in a browser.
//!
//! - **Who may.** The edge takes the page's requests through the MCP endpoint's own steps
//!   ([`EdgeConfig::page`](capability_http::EdgeConfig::page): `Host` and `Origin` checked,
//!   bodies bounded, the policy's `[bearer_tokens]` or `[auth]`, rates). The page's data and
//!   actions (`api/...`) need a caller whose role `[approvals] page_roles` lists: `401`
//!   without a token, `403` for any other role. Its own files (HTML, script, style) are served
//!   to anyone: they hold nothing.
//! - **Signing.** In the browser (WebCrypto Ed25519), with the key the approver gives the page
//!   (their key file, or its 64 hex digits), which the page never sends: the signed bytes are
//!   the ones `capability approve` signs (`Approval::signed_bytes`: the tag `capability
//!   approval v3` and the canonical JSON of the approval's fields). The gateway checks what it
//!   is given with the gate, as the call's retry will, and keeps it for the retry
//!   (`serve/approving.rs`). It holds no approver's secret key.
//! - **Safety.** The script writes every text of a proposal with `textContent` (never as
//!   HTML), hidden and bidirectional characters shown as `\u{..}`; a Content-Security-Policy
//!   lets the page run only its own script and style, reach only its own origin, and be framed
//!   by nobody. The token travels in the `Authorization` header, never in a cookie, so another
//!   site cannot act with it (no CSRF), and an action must be `application/json`.
//! - **On record.** Each approval taken, each rejection and each refusal of the page's data is a
//!   notice on the trail (`approvals/approve`, `approvals/reject`, `approvals/list`) naming
//!   the caller's principal.
//!
//! Beside it, at [`receipts::PREFIX`] (`/receipts`), a call's proof for the principal that
//! holds its receipt (`receipts.rs`).

mod api;
pub(crate) mod receipts;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use capability_http::{Authenticated, EdgeResponse};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};

use crate::serve::gateway::Gateway;

/// Where the page is served.
pub(crate) const PREFIX: &str = "/approvals";

const HTML: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");
const ICON: &str = include_str!("icon.svg");

/// What the page's answers allow a browser: its own script and style, requests to its own
/// origin, nothing else (no inline script, no frames, no forms, no plugins).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; form-action 'none'; base-uri 'none'; \
    frame-ancestors 'none'";

/// The MCP front's service `S`, with the page's paths served here.
#[derive(Clone)]
pub(crate) struct Paged<S> {
    mcp: S,
    gateway: Gateway,
    proofs: Option<receipts::Proofs>,
}

impl<S> Paged<S> {
    /// `mcp`, the page of `gateway`'s approvals, and the receipts' proofs from `proofs`.
    pub(crate) fn new(mcp: S, gateway: Gateway, proofs: Option<receipts::Proofs>) -> Self {
        Paged {
            mcp,
            gateway,
            proofs,
        }
    }
}

impl<S> tower_service::Service<Request<Full<Bytes>>> for Paged<S>
where
    S: tower_service::Service<
            Request<Full<Bytes>>,
            Response = EdgeResponse,
            Error = Infallible,
            Future = Pin<Box<dyn Future<Output = Result<EdgeResponse, Infallible>> + Send>>,
        > + Clone
        + Send
        + 'static,
{
    type Response = EdgeResponse;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<EdgeResponse, Infallible>> + Send>>;

    fn poll_ready(
        &mut self,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        self.mcp.poll_ready(context)
    }

    fn call(&mut self, request: Request<Full<Bytes>>) -> Self::Future {
        if let Some(rest) = request.uri().path().strip_prefix(receipts::PREFIX) {
            let (rest, proofs) = (rest.to_owned(), self.proofs.clone());
            let get = request.method() == Method::GET;
            return Box::pin(async move {
                let caller = request.extensions().get::<Authenticated>();
                Ok(receipts::serve(proofs.as_ref(), get, &rest, caller).await)
            });
        }
        let Some(rest) = request.uri().path().strip_prefix(PREFIX) else {
            return self.mcp.call(request);
        };
        let rest = rest.to_owned();
        let gateway = self.gateway.clone();
        Box::pin(async move { Ok(serve(&gateway, &rest, request).await) })
    }
}

/// One request of the page: `rest` is its path after [`PREFIX`].
async fn serve(gateway: &Gateway, rest: &str, request: Request<Full<Bytes>>) -> EdgeResponse {
    let (parts, body) = request.into_parts();
    let caller = parts.extensions.get::<Authenticated>();
    let get = parts.method == Method::GET;
    match rest {
        "" | "/" if get => file(HTML, "text/html; charset=utf-8"),
        "/page.js" if get => file(SCRIPT, "text/javascript; charset=utf-8"),
        "/page.css" if get => file(STYLE, "text/css; charset=utf-8"),
        "/icon.svg" if get => file(ICON, "image/svg+xml"),
        "/api/proposals" if get => api::list(gateway, caller),
        "/api/approve" | "/api/reject" if parts.method == Method::POST => {
            let json = parts
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.trim().starts_with("application/json"));
            if !json {
                return error(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "send the action as `application/json`",
                );
            }
            let Ok(collected) = body.collect().await;
            let body = collected.to_bytes();
            if rest == "/api/approve" {
                api::approve(gateway, caller, &body)
            } else {
                api::reject(gateway, caller, &body)
            }
        }
        "" | "/" | "/page.js" | "/page.css" | "/icon.svg" | "/api/proposals" | "/api/approve"
        | "/api/reject" => error(StatusCode::METHOD_NOT_ALLOWED, "not with this method"),
        _ => error(StatusCode::NOT_FOUND, "not found"),
    }
}

/// An answer of the page, with the headers every one of them carries.
fn answer(status: StatusCode, content_type: &'static str, body: Bytes) -> EdgeResponse {
    let mut response = Response::new(Full::new(body).map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (
            header::HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn file(text: &'static str, content_type: &'static str) -> EdgeResponse {
    answer(
        StatusCode::OK,
        content_type,
        Bytes::from_static(text.as_bytes()),
    )
}

/// `status` with a JSON document.
fn json(status: StatusCode, value: &serde_json::Value) -> EdgeResponse {
    answer(status, "application/json", Bytes::from(value.to_string()))
}

/// `status` with `{"error": message}`.
fn error(status: StatusCode, message: &str) -> EdgeResponse {
    let mut response = json(status, &serde_json::json!({ "error": message }));
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}
