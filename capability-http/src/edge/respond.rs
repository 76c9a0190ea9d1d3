//! The edge's own answers: JSON bodies, with the `WWW-Authenticate` challenge or `Retry-After`
//! where the status calls for one.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use serde_json::json;

use super::EdgeResponse;
use crate::auth::{AuthFailure, challenge};

fn response(status: StatusCode, body: Bytes) -> EdgeResponse {
    let mut response = Response::new(Full::new(body).map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// `status` with a JSON document.
pub(super) fn json(status: StatusCode, body: Bytes) -> EdgeResponse {
    response(status, body)
}

/// `status` with `{"error": message}`.
pub(super) fn status(status: StatusCode, message: &str) -> EdgeResponse {
    let body = json!({ "error": message }).to_string();
    response(status, Bytes::from(body))
}

/// `429 Too Many Requests`, `Retry-After: seconds`.
/// `413`: a body over `[http] max_body_bytes`.
pub(super) fn too_large(limit: usize) -> EdgeResponse {
    status(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("the request body is larger than {limit} bytes ([http] max_body_bytes)"),
    )
}

pub(super) fn retry_after(seconds: u64, message: &str) -> EdgeResponse {
    let mut answer = status(StatusCode::TOO_MANY_REQUESTS, message);
    answer
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    answer
}

/// An OAuth error (RFC 6750): the challenge in `WWW-Authenticate`, and `{"error",
/// "error_description"}` in the body.
pub(super) fn oauth_error(
    status: StatusCode,
    params: &[(&str, &str)],
    error: &str,
    description: &str,
) -> EdgeResponse {
    let body = json!({ "error": error, "error_description": description }).to_string();
    let mut answer = response(status, Bytes::from(body));
    if let Ok(value) = HeaderValue::from_str(&challenge(params)) {
        answer.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    answer
}

/// `401` (no token, or one not valid) or `403` (a valid token that gives no role, or
/// several), with the challenge that tells the client where to get a token.
pub(super) fn unauthenticated(failure: &AuthFailure, metadata: Option<&str>) -> EdgeResponse {
    let description = failure.to_string();
    let mut params: Vec<(&str, &str)> = Vec::new();
    // A token that gives several roles is valid and has scopes enough: the policy must say
    // which role it is, so no error code asks the client for another token.
    let (status, error) = match failure {
        AuthFailure::Missing => (StatusCode::UNAUTHORIZED, None),
        AuthFailure::Invalid(_) => (StatusCode::UNAUTHORIZED, Some("invalid_token")),
        AuthFailure::NoRole { .. } => (StatusCode::FORBIDDEN, Some("insufficient_scope")),
        AuthFailure::SeveralRoles { .. } => (StatusCode::FORBIDDEN, None),
    };
    let scope;
    if let Some(error) = error {
        params.push(("error", error));
    }
    if !matches!(failure, AuthFailure::Missing) {
        params.push(("error_description", &description));
    }
    if let AuthFailure::NoRole { scopes, .. } = failure {
        scope = scopes.join(" ");
        params.push(("scope", &scope));
    }
    match metadata {
        Some(url) => params.push(("resource_metadata", url)),
        None => params.push(("realm", "mcp")),
    }
    oauth_error(
        status,
        &params,
        error.unwrap_or("invalid_request"),
        &description,
    )
}

/// `403 insufficient_scope`: every scope the tool requires, so that one new token is enough.
pub(super) fn insufficient_scope(
    tool: &str,
    required: &[String],
    missing: &[String],
    metadata: Option<&str>,
) -> EdgeResponse {
    let description = format!(
        "calling `{tool}` needs the scopes {}; the token lacks {}",
        required.join(" "),
        missing.join(" ")
    );
    let scope = required.join(" ");
    let mut params = vec![
        ("error", "insufficient_scope"),
        ("scope", scope.as_str()),
        ("error_description", description.as_str()),
    ];
    if let Some(url) = metadata {
        params.push(("resource_metadata", url));
    }
    oauth_error(
        StatusCode::FORBIDDEN,
        &params,
        "insufficient_scope",
        &description,
    )
}
