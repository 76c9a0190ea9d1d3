//! The client of an HTTP server's rmcp connection, which keeps what the lane needs to send on
//! the same session: the endpoint, the session id the server issued, and the headers rmcp
//! sends with each message (the agreed `MCP-Protocol-Version` among them). A request is POSTed
//! and its answer read by the gateway ([`super::post`]: a JSON answer of several messages is
//! read as those messages); everything else is the process's pooled client
//! ([`crate::upstream::pooled`]) as rmcp would use it. Every rmcp connection of the engine to
//! an HTTP server goes through one: the server's own, the session of 2025-11-25 kept for older
//! clients (`legacy.rs`), a caller's own connection (`delegate.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ::rmcp::model::ClientJsonRpcMessage;
use ::rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use futures_core::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use sse_stream::Sse;

use super::post;

/// What rmcp last sent a message of its session with.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub(crate) uri: Arc<str>,
    pub(crate) id: Arc<str>,
    pub(crate) auth: Option<String>,
    pub(crate) headers: HashMap<HeaderName, HeaderValue>,
}

/// The pooled client, seeing rmcp's session.
#[derive(Clone)]
pub(crate) struct Seen {
    client: reqwest::Client,
    session: Arc<Mutex<Option<Arc<Session>>>>,
}

impl Seen {
    pub(crate) fn new(client: reqwest::Client) -> Seen {
        Seen {
            client,
            session: Arc::default(),
        }
    }

    /// The pooled client itself.
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The session rmcp sends on, once the server issued one (`None` before, after it was
    /// deleted, and for a server that issues none).
    pub(crate) fn session(&self) -> Option<Arc<Session>> {
        self.session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether rmcp sends on a session now.
    pub(crate) fn has_session(&self) -> bool {
        self.session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    fn saw(
        &self,
        uri: &Arc<str>,
        id: Option<&Arc<str>>,
        auth: Option<&String>,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) {
        let mut session = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        *session = id.map(|id| {
            Arc::new(Session {
                uri: uri.clone(),
                id: id.clone(),
                auth: auth.cloned(),
                headers: headers.clone(),
            })
        });
    }
}

impl StreamableHttpClient for Seen {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    /// A request (but `server/discover`) is POSTed by [`super::post`], which reads a JSON
    /// answer of several messages; anything else by rmcp's client.
    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.saw(
            &uri,
            session_id.as_ref(),
            auth_header.as_ref(),
            &custom_headers,
        );
        if post::posts_itself(&message) {
            let post = post::Post {
                uri,
                message,
                session_id,
                auth: auth_header,
                headers: custom_headers,
                limits,
            };
            return post::post(&self.client, post).await;
        }
        self.client
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.saw(&uri, None, None, &custom_headers);
        self.client
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.client
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
