//! The proxy's own credentials for an upstream server, read from a file or the environment:
//! never from the command line, where other users of the machine can read them.

use std::path::Path;

/// The environment variable holding the proxy's bearer token for `--upstream`.
pub const UPSTREAM_TOKEN_VAR: &str = "CAPABILITY_UPSTREAM_TOKEN";
/// The environment variable holding the exchange client's secret.
pub const CLIENT_SECRET_VAR: &str = "CAPABILITY_UPSTREAM_CLIENT_SECRET";

/// The proxy's token for `--upstream`: from `file`, else from [`UPSTREAM_TOKEN_VAR`]; `None`
/// when neither gives one.
pub fn upstream_token(file: Option<&Path>) -> Result<Option<String>, String> {
    read(file, UPSTREAM_TOKEN_VAR, "token")
}

/// The exchange client's secret: from `file`, else from [`CLIENT_SECRET_VAR`]; one of them
/// must give it.
pub fn client_secret(file: Option<&Path>) -> Result<String, String> {
    read(file, CLIENT_SECRET_VAR, "secret")?.ok_or_else(|| {
        format!(
            "the exchange client's secret is missing: give it in a file \
             (--upstream-exchange-secret-file) or in {CLIENT_SECRET_VAR}"
        )
    })
}

fn read(file: Option<&Path>, var: &str, what: &str) -> Result<Option<String>, String> {
    let (text, from) = match file {
        Some(path) => (
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
            path.display().to_string(),
        ),
        None => match std::env::var(var) {
            Ok(value) => (value, var.to_owned()),
            Err(_) => return Ok(None),
        },
    };
    let value = text.trim();
    if value.is_empty() || value.chars().any(|c| c.is_control() || c == ' ') {
        return Err(format!(
            "{from} holds no {what} (one line, no spaces or control characters)"
        ));
    }
    Ok(Some(value.to_owned()))
}
