//! The agent loop of `capability` (ADR-105, "MCP agent loop governance"):
//! `alert → agent loop → model tool_use → MCP tool_result → final decision`.
//!
//! - [`model`]: the provider-neutral conversation ([`Message`], [`ToolCall`], [`ToolResult`]),
//!   the tools a model is shown ([`ToolSpec`]) and the [`Model`] seam (one turn).
//! - [`provider`]: the three wire formats, both directions: Anthropic Messages,
//!   OpenAI-compatible chat completions, Ollama `/api/chat`.
//! - `http` (feature `http`): a [`Model`] over HTTP for each format.
//! - [`driver`]: the loop: the role's visible tools computed once and converted, every tool call
//!   through the audited dispatch, `max_iterations`, typed degrades.
//! - [`breaker`]: the per-provider circuit breaker.
//! - [`guard`]: one loop per incident across replicas (a lease) and the stable result cache.
//! - [`shadow`]: shadow mode, whose result can only carry metadata.

//!
#![doc = include_str!("../../docs/agent-loop.md")]
#![forbid(unsafe_code)]

pub mod breaker;
pub mod driver;
pub mod guard;
#[cfg(feature = "http")]
pub mod http;
pub mod model;
pub mod provider;
pub mod shadow;

pub use model::{
    Arguments, Message, Model, ModelError, ModelErrorKind, ToolCall, ToolResult, ToolSpec, Turn,
};
