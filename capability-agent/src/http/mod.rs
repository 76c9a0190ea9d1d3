//! A [`Model`](crate::Model) over HTTP for each wire format (feature `http`), on one small
//! blocking client (`ureq`, rustls):
//!
//! - [`AnthropicModel`]: `POST {base}/v1/messages`, headers `x-api-key` and
//!   `anthropic-version`;
//! - [`OpenAiModel`]: `POST {base}/chat/completions` (the base includes `/v1`, as the OpenAI
//!   SDKs take it: `https://api.openai.com/v1`), header `Authorization: Bearer`;
//! - [`OllamaModel`]: `POST {base}/api/chat`, no key.
//!
//! Every failure is a [`ModelError`]: the connection ([`Transport`]), an HTTP error status
//! ([`Status`], with the body's error message), a body that is not the format ([`Malformed`]),
//! or an answer that says the model takes no tools ([`NoToolSupport`]). The API key is sent in a
//! header and nowhere else: it is never logged, never in an error message, and `Debug` shows it
//! redacted.
//!
//! [`Transport`]: crate::ModelErrorKind::Transport
//! [`Status`]: crate::ModelErrorKind::Status
//! [`Malformed`]: crate::ModelErrorKind::Malformed
//! [`NoToolSupport`]: crate::ModelErrorKind::NoToolSupport

mod models;

use std::fmt;
use std::time::Duration;

use serde_json::Value;

pub use models::{ANTHROPIC_VERSION, AnthropicModel, DEFAULT_MAX_TOKENS, OllamaModel, OpenAiModel};

use crate::model::{ModelError, ModelErrorKind};
use crate::provider::{error_message, says_no_tool_support};

/// How long one turn may take, connection to last byte, unless configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How much of a non-JSON error body an error message quotes.
const QUOTED: usize = 200;

/// One provider endpoint: the URL to post to, its headers, and the secret to keep out of every
/// message.
#[derive(Clone)]
pub(crate) struct Endpoint {
    agent: ureq::Agent,
    url: String,
    headers: Vec<(&'static str, String)>,
    secret: Option<String>,
}

impl Endpoint {
    /// `base` (a trailing `/` is dropped) joined with `path`.
    pub(crate) fn new(base: &str, path: &str) -> Self {
        Endpoint {
            agent: agent(DEFAULT_TIMEOUT),
            url: format!("{}{path}", base.trim_end_matches('/')),
            headers: Vec::new(),
            secret: None,
        }
    }

    /// A header for every request.
    pub(crate) fn header(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }

    /// A secret (the API key) that no error message may contain.
    pub(crate) fn secret(mut self, secret: &str) -> Self {
        if !secret.is_empty() {
            self.secret = Some(secret.to_owned());
        }
        self
    }

    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.agent = agent(timeout);
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// POSTs `body` and returns the answer's JSON, or the typed failure.
    pub(crate) fn post(&self, body: &Value) -> Result<Value, ModelError> {
        let mut request = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json");
        for (name, value) in &self.headers {
            request = request.header(*name, value.as_str());
        }
        let mut response = request
            .send(body.to_string())
            .map_err(|error| self.error(ModelErrorKind::Transport, error.to_string()))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|error| self.error(ModelErrorKind::Transport, error.to_string()))?;
        let json = serde_json::from_str::<Value>(&text);
        if !(200..300).contains(&status) {
            let message = json
                .ok()
                .as_ref()
                .and_then(error_message)
                .unwrap_or_else(|| quote(&text));
            let kind = if says_no_tool_support(&message) {
                ModelErrorKind::NoToolSupport
            } else {
                ModelErrorKind::Status(status)
            };
            return Err(self.error(kind, message));
        }
        match json {
            Ok(value) => Ok(value),
            Err(error) => Err(self.error(
                ModelErrorKind::Malformed,
                format!("the body is not JSON ({error}): {}", quote(&text)),
            )),
        }
    }

    /// A format error of a 2xx answer, or one that says the model takes no tools.
    pub(crate) fn classify(&self, body: &Value, error: ModelError) -> ModelError {
        let kind = match error_message(body) {
            Some(message) if says_no_tool_support(&message) => ModelErrorKind::NoToolSupport,
            _ => error.kind,
        };
        self.error(kind, error.message)
    }

    /// An error whose message never contains the secret.
    fn error(&self, kind: ModelErrorKind, message: String) -> ModelError {
        let message = match &self.secret {
            Some(secret) => message.replace(secret.as_str(), "[redacted]"),
            None => message,
        };
        ModelError::new(kind, message)
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(name, _)| *name).collect();
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("headers", &headers)
            .field("secret", &self.secret.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

/// The agent: HTTP error statuses are answers (read for their message), not errors; redirects
/// are not followed (a redirect would carry the `x-api-key` header to wherever it points: a
/// 3xx is an answer like any other non-2xx status).
fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(timeout))
        .build()
        .into()
}

/// At most [`QUOTED`] characters of `text`.
fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTED).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    quoted
}
