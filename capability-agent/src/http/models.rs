//! The three HTTP [`Model`]s.

use std::time::Duration;

use super::Endpoint;
use crate::model::{Message, Model, ModelError, ModelErrorKind, ToolSpec, Turn};
use crate::provider::{anthropic, ollama, openai};

/// The `anthropic-version` header the Messages format is written against.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How many tokens an Anthropic answer may take, unless configured.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A model that takes no tools was given some: refused before anything is sent.
fn no_tools(provider: &str) -> ModelError {
    ModelError::new(
        ModelErrorKind::NoToolSupport,
        format!("{provider}: this model is configured without tools"),
    )
}

/// What the three models share: the endpoint, the model's name, whether it takes tools, and
/// the provider name the breaker and degrade reasons use.
#[derive(Clone, Debug)]
struct Common {
    endpoint: Endpoint,
    model: String,
    tools: bool,
    provider: String,
}

impl Common {
    fn new(endpoint: Endpoint, model: &str, provider: &str) -> Self {
        Common {
            endpoint,
            model: model.to_owned(),
            tools: true,
            provider: provider.to_owned(),
        }
    }

    /// Refuses tools to a model without them, then posts and parses.
    fn turn(
        &self,
        tools: &[ToolSpec],
        body: impl FnOnce() -> serde_json::Value,
        parse: impl FnOnce(&serde_json::Value) -> Result<Turn, ModelError>,
    ) -> Result<Turn, ModelError> {
        if !self.tools && !tools.is_empty() {
            return Err(no_tools(&self.provider));
        }
        let answer = self.endpoint.post(&body())?;
        parse(&answer).map_err(|error| self.endpoint.classify(&answer, error))
    }
}

macro_rules! builders {
    ($model:ident) => {
        impl $model {
            /// The same model, without tools: [`Model::supports_tools`] is `false` (the loop
            /// degrades at once), and a turn given tools fails with
            /// [`NoToolSupport`](ModelErrorKind::NoToolSupport) before anything is sent.
            pub fn without_tools(mut self) -> Self {
                self.common.tools = false;
                self
            }

            /// The same model, with a turn timeout other than
            /// [`DEFAULT_TIMEOUT`](super::DEFAULT_TIMEOUT).
            pub fn with_timeout(mut self, timeout: Duration) -> Self {
                self.common.endpoint.set_timeout(timeout);
                self
            }

            /// The same model under another provider name (its breaker key), e.g. two
            /// OpenAI-compatible servers.
            pub fn with_provider_name(mut self, name: &str) -> Self {
                self.common.provider = name.to_owned();
                self
            }

            /// The URL each turn is posted to.
            pub fn url(&self) -> &str {
                self.common.endpoint.url()
            }
        }
    };
}

/// Anthropic Messages over HTTP: `POST {base_url}/v1/messages` with `x-api-key` and
/// `anthropic-version`. Provider name `anthropic`.
#[derive(Clone, Debug)]
pub struct AnthropicModel {
    common: Common,
    max_tokens: u32,
}

impl AnthropicModel {
    /// `model` at `base_url` (e.g. `https://api.anthropic.com`) with `api_key`.
    pub fn new(base_url: &str, api_key: &str, model: &str) -> Self {
        let endpoint = Endpoint::new(base_url, "/v1/messages")
            .header("x-api-key", api_key.to_owned())
            .header("anthropic-version", ANTHROPIC_VERSION.to_owned())
            .secret(api_key);
        AnthropicModel {
            common: Common::new(endpoint, model, "anthropic"),
            max_tokens: DEFAULT_MAX_TOKENS,
        }
    }

    /// The same model, answering in at most `max_tokens` tokens (default
    /// [`DEFAULT_MAX_TOKENS`](super::DEFAULT_MAX_TOKENS)).
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }
}

builders!(AnthropicModel);

impl Model for AnthropicModel {
    fn provider(&self) -> &str {
        &self.common.provider
    }

    fn supports_tools(&self) -> bool {
        self.common.tools
    }

    fn turn(&mut self, messages: &[Message], tools: &[ToolSpec]) -> Result<Turn, ModelError> {
        let common = &self.common;
        common.turn(
            tools,
            || anthropic::request(&common.model, self.max_tokens, messages, tools),
            anthropic::parse_response,
        )
    }
}

/// OpenAI-compatible chat completions over HTTP: `POST {base_url}/chat/completions` with
/// `Authorization: Bearer <key>` (no header for an empty key: local servers). Provider name
/// `openai`.
#[derive(Clone, Debug)]
pub struct OpenAiModel {
    common: Common,
}

impl OpenAiModel {
    /// `model` at `base_url`, which includes the API version (e.g.
    /// `https://api.openai.com/v1`, `http://localhost:8000/v1`), with `api_key`.
    pub fn new(base_url: &str, api_key: &str, model: &str) -> Self {
        let mut endpoint = Endpoint::new(base_url, "/chat/completions").secret(api_key);
        if !api_key.is_empty() {
            endpoint = endpoint.header("authorization", format!("Bearer {api_key}"));
        }
        OpenAiModel {
            common: Common::new(endpoint, model, "openai"),
        }
    }
}

builders!(OpenAiModel);

impl Model for OpenAiModel {
    fn provider(&self) -> &str {
        &self.common.provider
    }

    fn supports_tools(&self) -> bool {
        self.common.tools
    }

    fn turn(&mut self, messages: &[Message], tools: &[ToolSpec]) -> Result<Turn, ModelError> {
        let common = &self.common;
        common.turn(
            tools,
            || openai::request(&common.model, messages, tools),
            openai::parse_response,
        )
    }
}

/// Ollama over HTTP: `POST {base_url}/api/chat` (`stream: false`), no key. Tool calls get
/// `call_<n>` ids numbered across the conversation. Provider name `ollama`.
#[derive(Clone, Debug)]
pub struct OllamaModel {
    common: Common,
}

impl OllamaModel {
    /// `model` at `base_url` (e.g. `http://localhost:11434`).
    pub fn new(base_url: &str, model: &str) -> Self {
        OllamaModel {
            common: Common::new(Endpoint::new(base_url, "/api/chat"), model, "ollama"),
        }
    }
}

builders!(OllamaModel);

impl Model for OllamaModel {
    fn provider(&self) -> &str {
        &self.common.provider
    }

    fn supports_tools(&self) -> bool {
        self.common.tools
    }

    fn turn(&mut self, messages: &[Message], tools: &[ToolSpec]) -> Result<Turn, ModelError> {
        let common = &self.common;
        let first = ollama::calls_so_far(messages);
        common.turn(
            tools,
            || ollama::request(&common.model, messages, tools),
            |body| ollama::parse_response_from(body, first),
        )
    }
}
