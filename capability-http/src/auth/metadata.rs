//! What a client needs to get a token: the protected resource metadata (RFC 9728), found from
//! the `WWW-Authenticate` challenge of a `401`, and the challenges themselves (RFC 6750).

use serde::Serialize;

use super::keys::split_origin;

/// The well-known path of protected resource metadata (RFC 9728 section 3).
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The protected resource metadata document of this resource (RFC 9728 section 2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProtectedResource {
    /// The resource identifier: the `[auth] audience`.
    pub resource: String,
    /// The authorization servers that issue tokens for it: the `[auth] issuer`.
    pub authorization_servers: Vec<String>,
    /// The scopes the policy gives roles for, and those the tools require.
    pub scopes_supported: Vec<String>,
    /// How a token is sent: in the `Authorization` header only.
    pub bearer_methods_supported: Vec<String>,
}

/// The URL of the metadata of `resource`: the well-known path inserted between its host and
/// its path (`https://mcp.example.com/mcp` gives
/// `https://mcp.example.com/.well-known/oauth-protected-resource/mcp`).
///
/// ```
/// use capability_http::metadata_url;
///
/// assert_eq!(
///     metadata_url("http://127.0.0.1:8931/mcp").as_deref(),
///     Some("http://127.0.0.1:8931/.well-known/oauth-protected-resource/mcp")
/// );
/// ```
pub fn metadata_url(resource: &str) -> Option<String> {
    let (origin, path) = split_origin(resource)?;
    Some(format!(
        "{origin}{WELL_KNOWN}{}",
        path.trim_end_matches('/')
    ))
}

/// The paths the metadata is served at: with the resource's path appended, and the bare
/// well-known path (clients try both).
pub fn metadata_path(resource: &str) -> (String, &'static str) {
    let path = split_origin(resource).map_or("", |(_, path)| path);
    (
        format!("{WELL_KNOWN}{}", path.trim_end_matches('/')),
        WELL_KNOWN,
    )
}

/// A `WWW-Authenticate: Bearer` challenge (RFC 6750 section 3), its parameters in order.
pub(crate) fn challenge(params: &[(&str, &str)]) -> String {
    let mut value = String::from("Bearer");
    for (i, (name, text)) in params.iter().enumerate() {
        value.push_str(if i == 0 { " " } else { ", " });
        value.push_str(name);
        value.push_str("=\"");
        value.push_str(&quoted(text));
        value.push('"');
    }
    value
}

/// Text as the inside of a quoted-string: `"` and `\` escaped, anything not visible ASCII (a
/// header value is bytes, and an injected line break would start a header) made `?`.
fn quoted(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            ' '..='~' => vec![c],
            _ => vec!['?'],
        })
        .collect()
}

/// The protected resource metadata document (its bytes and paths) and its URL, in OAuth mode.
#[allow(clippy::type_complexity)]
pub(crate) fn served_metadata(
    credentials: &super::Credentials,
) -> (Option<(bytes::Bytes, String, &'static str)>, Option<String>) {
    let Some(jwt) = credentials.jwt() else {
        return (None, None);
    };
    let settings = jwt.settings();
    let mut scopes: Vec<String> = settings
        .scope_roles()
        .iter()
        .map(|(scope, _)| scope.clone())
        .collect();
    scopes.sort();
    let document = ProtectedResource {
        resource: settings.audience().to_owned(),
        authorization_servers: vec![settings.issuer().to_owned()],
        scopes_supported: scopes,
        bearer_methods_supported: vec!["header".to_owned()],
    };
    let text = serde_json::to_vec(&document).unwrap_or_default();
    let (long, short) = metadata_path(settings.audience());
    (
        Some((bytes::Bytes::from(text), long, short)),
        metadata_url(settings.audience()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_cannot_break_its_header() {
        assert_eq!(
            challenge(&[
                ("error", "invalid_token"),
                ("error_description", "a \"b\"\r\nX: y")
            ]),
            r#"Bearer error="invalid_token", error_description="a \"b\"??X: y""#
        );
        assert_eq!(
            metadata_path("https://mcp.example.com/"),
            (
                "/.well-known/oauth-protected-resource".to_owned(),
                WELL_KNOWN
            )
        );
        assert_eq!(metadata_url("mcp.example.com"), None);
    }
}
