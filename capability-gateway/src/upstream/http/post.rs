//! A request of rmcp's client POSTed to a Streamable HTTP server, and its answer read, by the
//! gateway rather than by rmcp's reqwest client: the one difference is a JSON body that holds
//! several JSON texts, one after another (a server that writes its notifications before the
//! answer, one per line, as the MCP conformance project's reference server does with a call's
//! progress). rmcp reads a JSON body as exactly one message (`serde_json::from_slice`:
//! "trailing characters") and fails the call; here those messages are rmcp's in order, as the
//! events of a stream would be, so the progress goes where any progress goes and the answer
//! answers the call. One JSON text is rmcp's `Json` answer, as before.
//!
//! Everything else is rmcp's, adapted from rmcp 3.11.0 (MIT, `transport/common/reqwest/
//! streamable_http_client.rs`, `post_message_with_response_limits`, and the helpers it calls
//! in `client_side_http.rs` and `http_header.rs`), because rmcp offers no seam between sending
//! a POST and reading its answer: the request's headers (both media types accepted, the
//! bearer, the custom headers but the reserved ones, the session), a 401 or 403 challenge,
//! 202 and 204, a session's 404, 429 and 5xx with a bounded `Retry-After`, a failure's JSON
//! body read within `max_json_response_size` for the JSON-RPC error it holds and any other
//! failure's body cut at `max_error_response_size`, an event stream read with its bound per
//! event ([`super::events`], keeping each event's `id`, `retry` and name, with which rmcp
//! resumes it).
//!
//! The tests hold the copy to rmcp's client: a loopback server writes the same bytes to both,
//! answer after answer, and what each makes of them must be the same.
//!
//! Only requests come here, and not `server/discover`: a POST that awaits no answer, and the
//! legacy server's refusal of `server/discover`, rmcp reads by rules of its own
//! ([`posts_itself`]). Where an event stream is read differently: a field rmcp's parser
//! (`sse-stream`) refuses, and which would end the stream, is read as the HTML standard says
//! (an unknown field ignored, the last `id` kept); the events before one over the bound are
//! given even when they came in the same chunk (rmcp's reader drops that chunk whole); and
//! rmcp cannot tell an event over the bound from a broken stream (its own error type is
//! private), so it tries once to resume the stream from the last event id the server gave, if
//! it gave one, with a GET of its own, bounded as rmcp bounds it.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::rmcp::model::{ClientJsonRpcMessage, ClientRequest, ServerJsonRpcMessage};
use ::rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_MCP_PROTOCOL_VERSION, HEADER_SESSION_ID,
    JSON_MIME_TYPE,
};
use ::rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use futures_core::Stream;
use futures_core::stream::BoxStream;
use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE,
};
use sse_stream::Sse;

use super::body::{Unread, json_texts, read_bounded, read_prefix};
use super::events::Events;

type Error = StreamableHttpError<reqwest::Error>;
type Answer = Result<StreamableHttpPostResponse, Error>;

/// Whether the gateway POSTs `message` itself: a request, but `server/discover`.
pub(super) fn posts_itself(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, ClientJsonRpcMessage::Request(request)
        if !matches!(request.request, ClientRequest::DiscoverRequest(_)))
}

/// What rmcp's client sends with a POST.
pub(super) struct Post {
    pub(super) uri: Arc<str>,
    pub(super) message: ClientJsonRpcMessage,
    pub(super) session_id: Option<Arc<str>>,
    pub(super) auth: Option<String>,
    pub(super) headers: HashMap<HeaderName, HeaderValue>,
    pub(super) limits: StreamableHttpResponseLimits,
}

/// Headers a caller's own may not set (rmcp's list; `MCP-Protocol-Version` is one, which
/// rmcp's worker sets after the handshake and so lets through).
const RESERVED: [&str; 3] = ["accept", HEADER_SESSION_ID, HEADER_LAST_EVENT_ID];

/// How much of a body that is no JSON-RPC message a failure's text shows.
const PREVIEW_BYTES: usize = 256;

/// POSTs `post` over `client` and reads the answer as rmcp's client would, but for a JSON
/// body of several messages (see the module's documentation).
pub(super) async fn post(client: &reqwest::Client, post: Post) -> Answer {
    let limits = post.limits;
    let mut request = client
        .post(post.uri.as_ref())
        .header(ACCEPT, [EVENT_STREAM_MIME_TYPE, JSON_MIME_TYPE].join(", "));
    if let Some(token) = post.auth {
        request = request.bearer_auth(token);
    }
    for (name, value) in post.headers {
        let reserved = RESERVED
            .iter()
            .any(|r| name.as_str().eq_ignore_ascii_case(r));
        if reserved
            && !name
                .as_str()
                .eq_ignore_ascii_case(HEADER_MCP_PROTOCOL_VERSION)
        {
            return Err(StreamableHttpError::ReservedHeaderConflict(
                name.to_string(),
            ));
        }
        request = request.header(name, value);
    }
    let attached = post.session_id.is_some();
    if let Some(id) = post.session_id {
        request = request.header(HEADER_SESSION_ID, id.as_ref());
    }
    let body = serde_json::to_vec(&post.message)?;
    let mut response = request
        .header(CONTENT_TYPE, JSON_MIME_TYPE)
        .body(body)
        .send()
        .await?;
    let status = response.status();
    if let Some(challenge) = challenge(status, response.headers()) {
        return Err(challenge);
    }
    if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    if status == StatusCode::NOT_FOUND && attached {
        return Err(StreamableHttpError::SessionExpired);
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .map(|ct| String::from_utf8_lossy(ct.as_bytes()).into_owned());
    let is = |expected: &str| {
        content_type
            .as_deref()
            .is_some_and(|ct| media_type_is(ct, expected))
    };
    let is_json = is(JSON_MIME_TYPE);
    // A rate limit and a failure that is not JSON are answered by their status alone.
    let status_error = match (http_status_error(status, response.headers()), is_json) {
        (Some(error), false) => return Err(error.into()),
        (Some(error), true) if status == StatusCode::TOO_MANY_REQUESTS => {
            return Err(error.into());
        }
        (error, _) => error,
    };
    let session = response
        .headers()
        .get(HEADER_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if !status.is_success() {
        return failure(response, is_json, status_error, session, limits).await;
    }
    if is(EVENT_STREAM_MIME_TYPE) {
        let stream = EventStream::reading(response, limits.max_sse_event_size);
        return Ok(StreamableHttpPostResponse::Sse(Box::pin(stream), session));
    }
    if !is_json {
        tracing::error!("unexpected content type: {content_type:?}");
        return Err(StreamableHttpError::UnexpectedContentType(content_type));
    }
    let body = match read_bounded(&mut response, limits.max_json_response_size).await {
        Ok(body) => body,
        Err(Unread::TooLong) => return Err(too_large(limits)),
        Err(Unread::Failed(error)) => return Err(error.into()),
    };
    match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
        Ok(message) => Ok(StreamableHttpPostResponse::Json(message, session)),
        Err(error) => match several(&body) {
            Some(events) => {
                let stream = EventStream::read(events);
                Ok(StreamableHttpPostResponse::Sse(Box::pin(stream), session))
            }
            None => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!(
                    "could not parse JSON response as ServerJsonRpcMessage: {error}: {}",
                    preview(&body)
                ),
            ))),
        },
    }
}

fn too_large(limits: StreamableHttpResponseLimits) -> Error {
    StreamableHttpError::ResponseBodyTooLarge {
        max_size: limits.max_json_response_size,
    }
}

/// The messages of a JSON body of two JSON-RPC messages or more, each the data of one event;
/// `None` when it holds fewer, or anything that is not a message.
fn several(body: &[u8]) -> Option<VecDeque<Sse>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut events = VecDeque::new();
    for message in json_texts(text) {
        let message = message.ok()?;
        serde_json::from_str::<ServerJsonRpcMessage>(message).ok()?;
        events.push_back(Sse::default().data(message));
    }
    (events.len() > 1).then_some(events)
}

/// A failed request's answer: the JSON-RPC error its JSON body holds, or its status and what
/// its body says.
async fn failure(
    mut response: reqwest::Response,
    is_json: bool,
    status_error: Option<HttpStatusError>,
    session: Option<String>,
    limits: StreamableHttpResponseLimits,
) -> Answer {
    let status = response.status();
    let content_type = response.headers().get(CONTENT_TYPE).cloned();
    let cut = limits.max_error_response_size;
    // A 401 or 403 without a challenge keeps its status: its body is a diagnostic.
    let auth_failure = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
    let body = if is_json && !auth_failure {
        match read_bounded(&mut response, limits.max_json_response_size).await {
            Ok(raw) => {
                let prefix = (raw.len() > cut).then(|| raw[..cut].to_vec());
                let full = decode(raw, content_type.clone(), cut).await;
                if let Ok(message @ ServerJsonRpcMessage::Error(_)) =
                    serde_json::from_str::<ServerJsonRpcMessage>(&full)
                {
                    return Ok(StreamableHttpPostResponse::Json(message, session));
                }
                tracing::warn!("HTTP {status}: could not parse JSON body as a JSON-RPC error");
                match prefix {
                    Some(prefix) => decode(prefix, content_type, cut).await,
                    None => full,
                }
            }
            Err(Unread::TooLong) => {
                return Err(status_error.map_or_else(|| too_large(limits), Error::from));
            }
            Err(Unread::Failed(_)) => read_failure(cut),
        }
    } else {
        match read_prefix(&mut response, cut).await {
            Ok(prefix) => decode(prefix, content_type, cut).await,
            Err(_) => read_failure(cut),
        }
    };
    if let Some(error) = status_error {
        return Err(error.into());
    }
    Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
        format!("HTTP {status}: {body}"),
    )))
}

/// A body read into memory as text, in the charset its content type names (reqwest's rules).
async fn decode(body: Vec<u8>, content_type: Option<HeaderValue>, cut: usize) -> String {
    if body.is_empty() {
        return String::new();
    }
    let mut buffered = http::Response::new(body);
    if let Some(content_type) = content_type {
        buffered.headers_mut().insert(CONTENT_TYPE, content_type);
    }
    reqwest::Response::from(buffered)
        .text()
        .await
        .unwrap_or_else(|_| read_failure(cut))
}

fn read_failure(cut: usize) -> String {
    let failure = "<failed to read response body>";
    failure[..failure.len().min(cut)].to_owned()
}

/// The first bytes of a body that is no message, as text.
fn preview(body: &[u8]) -> Cow<'static, str> {
    if body.is_empty() {
        return Cow::Borrowed("<empty>");
    }
    let lossy = String::from_utf8_lossy(body);
    let mut end = lossy.len().min(PREVIEW_BYTES);
    while !lossy.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(lossy[..end].to_owned())
}

/// A 401's or 403's challenge, as rmcp's error.
fn challenge(status: StatusCode, headers: &HeaderMap) -> Option<Error> {
    let header = headers.get(WWW_AUTHENTICATE)?;
    let header = match (status, header.to_str()) {
        (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN, Ok(header)) => header,
        (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN, Err(_)) => {
            return Some(StreamableHttpError::UnexpectedServerResponse(Cow::from(
                "invalid www-authenticate header value",
            )));
        }
        _ => return None,
    };
    Some(if status == StatusCode::UNAUTHORIZED {
        StreamableHttpError::AuthRequired(AuthRequiredError::new(header.to_owned()))
    } else {
        StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
            header.to_owned(),
            scope_of(header),
        ))
    })
}

/// The `scope=` of a challenge, quoted or not.
fn scope_of(header: &str) -> Option<String> {
    let at = header.to_ascii_lowercase().find("scope=")? + "scope=".len();
    let value = &header[at..];
    if let Some(quoted) = value.strip_prefix('"') {
        return quoted.find('"').map(|end| quoted[..end].to_owned());
    }
    let end = value
        .find(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .unwrap_or(value.len());
    (end > 0).then(|| value[..end].to_owned())
}

/// A 429's or 5xx's status and `Retry-After` (which [`HttpStatusError::new`] keeps only when
/// short).
fn http_status_error(status: StatusCode, headers: &HeaderMap) -> Option<HttpStatusError> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|value| std::str::from_utf8(value.as_bytes()).ok())
        .map(str::to_owned);
    Some(HttpStatusError::new(status.as_u16(), retry_after))
}

/// Whether a `Content-Type` names `expected`, whatever its case and parameters.
fn media_type_is(value: &str, expected: &str) -> bool {
    value.split(';').next().is_some_and(|essence| {
        essence
            .trim_matches([' ', '\t'])
            .eq_ignore_ascii_case(expected)
    })
}

/// The events rmcp's client reads: of a stream being read (each within the bound), or of a
/// JSON body already read.
struct EventStream {
    reading: Option<(BoxStream<'static, reqwest::Result<bytes::Bytes>>, Events)>,
    ready: VecDeque<Sse>,
    /// Why the stream ended, given after the events read before.
    failed: Option<SseError>,
}

impl EventStream {
    fn reading(response: reqwest::Response, limit: usize) -> EventStream {
        EventStream {
            reading: Some((Box::pin(response.bytes_stream()), Events::new(limit))),
            ready: VecDeque::new(),
            failed: None,
        }
    }

    fn read(ready: VecDeque<Sse>) -> EventStream {
        EventStream {
            reading: None,
            ready,
            failed: None,
        }
    }
}

impl Stream for EventStream {
    type Item = Result<Sse, SseError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            let Some((body, events)) = this.reading.as_mut() else {
                return Poll::Ready(this.failed.take().map(Err));
            };
            let chunk = match body.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) => chunk,
                Poll::Ready(None) => {
                    this.reading = None;
                    continue;
                }
                Poll::Ready(Some(Err(error))) => {
                    this.reading = None;
                    this.failed = Some(SseError::Body(Box::new(error)));
                    continue;
                }
            };
            let mut complete = Vec::new();
            let read = events.feed(&chunk, &mut complete);
            this.ready.extend(complete);
            if let Err(why) = read {
                // Nothing more is read after an event over the bound.
                this.reading = None;
                this.failed = Some(SseError::Body(why.into()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The gateway's POST against rmcp's own, answer for answer: a loopback server writes the
    //! same bytes to both, and what each makes of them must be the same, but for what the
    //! gateway reads differently (a JSON body of several messages, the text of an event over
    //! the bound).

    use std::sync::{Arc, Mutex};

    use ::rmcp::transport::streamable_http_client::StreamableHttpClient;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    use super::*;

    const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#;
    const RESULT: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
    const ERROR: &str = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no"}}"#;
    const PROGRESS: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;

    /// A server that answers every request with `answer` (a status line's code and reason,
    /// headers, body) and keeps each request's head.
    async fn server(answer: String) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (answer, kept) = (answer.clone(), kept.clone());
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut read = BufReader::new(read);
                    let (mut head, mut length) = (String::new(), 0);
                    loop {
                        let mut line = String::new();
                        if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if let Some(value) =
                            line.to_ascii_lowercase().strip_prefix("content-length:")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                        head.push_str(&line);
                    }
                    let mut body = vec![0; length];
                    let _ = read.read_exact(&mut body).await;
                    kept.lock().expect("heads").push(head);
                    let _ = write.write_all(answer.as_bytes()).await;
                    let _ = write.shutdown().await;
                });
            }
        });
        (url, heads)
    }

    fn canned(status: &str, headers: &[&str], body: &str) -> String {
        let mut answer = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
        for header in headers {
            answer.push_str(header);
            answer.push_str("\r\n");
        }
        answer + &format!("content-length: {}\r\n\r\n{body}", body.len())
    }

    fn limits() -> StreamableHttpResponseLimits {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_json_response_size = 1024;
        limits.max_error_response_size = 16;
        limits.max_sse_event_size = 200;
        limits
    }

    fn request(uri: &str, session: Option<&str>, headers: &[(&'static str, &str)]) -> Post {
        Post {
            uri: uri.into(),
            message: serde_json::from_str(CALL).expect("a request"),
            session_id: session.map(Into::into),
            auth: Some("the-token".to_owned()),
            headers: headers
                .iter()
                .map(|(name, value)| {
                    (
                        HeaderName::from_static(name),
                        HeaderValue::from_str(value).expect("a value"),
                    )
                })
                .collect(),
            limits: limits(),
        }
    }

    /// What an answer is, as text: each event of a stream, read to its end.
    async fn described(answer: Answer) -> String {
        match answer {
            Ok(StreamableHttpPostResponse::Sse(mut stream, session)) => {
                let mut out = format!("Sse({session:?})");
                while let Some(item) =
                    std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await
                {
                    match item {
                        Ok(event) => out.push_str(&format!(" {event:?}")),
                        Err(error) => out.push_str(&format!(" error: {error}")),
                    }
                }
                out
            }
            Ok(other) => format!("{other:?}"),
            Err(error) => format!("{error:?}"),
        }
    }

    fn client() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::new()
    }

    /// What the gateway and rmcp make of `answer` to the same request.
    async fn both(answer: String, session: Option<&str>) -> (String, String) {
        let (url, _) = server(answer).await;
        let client = client();
        let ours = described(post(&client, request(&url, session, &[])).await).await;
        let Post {
            uri,
            message,
            session_id,
            auth,
            headers,
            limits,
        } = request(&url, session, &[]);
        let rmcps = client
            .post_message_with_response_limits(uri, message, session_id, auth, headers, limits)
            .await;
        (ours, described(rmcps).await)
    }

    #[tokio::test]
    async fn every_answer_rmcp_reads_is_read_as_rmcp_reads_it() {
        let long = "x".repeat(100);
        let huge = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"t":"{}"}}}}"#,
            "x".repeat(2000)
        );
        let sse = format!(
            "id: 1\nretry: 1500\ndata:\n\n: a comment\nevent: message\nid: 2\ndata: {RESULT}\n\n"
        );
        let json = "content-type: application/json";
        let cases = [
            canned(
                "401 Unauthorized",
                &[r#"www-authenticate: Bearer realm="mcp""#],
                "",
            ),
            canned("401 Unauthorized", &["content-type: text/plain"], &long),
            canned(
                "403 Forbidden",
                &[r#"www-authenticate: Bearer error="insufficient_scope", scope="a b""#],
                "",
            ),
            canned(
                "403 Forbidden",
                &["www-authenticate: Bearer scope=files:read, x=1"],
                "",
            ),
            canned("403 Forbidden", &[json], ERROR),
            canned("202 Accepted", &[], ""),
            canned("204 No Content", &[], ""),
            canned("404 Not Found", &[json], ERROR),
            canned("404 Not Found", &["content-type: text/html"], &long),
            canned("429 Too Many Requests", &[json, "retry-after: 7"], ERROR),
            canned(
                "503 Service Unavailable",
                &[json, "mcp-session-id: s2"],
                ERROR,
            ),
            canned(
                "503 Service Unavailable",
                &[json, &format!("retry-after: {}", "9".repeat(129))],
                &long,
            ),
            canned(
                "500 Internal Server Error",
                &["content-type: text/plain", "retry-after: 3"],
                &long,
            ),
            canned("500 Internal Server Error", &[json], &huge),
            canned("400 Bad Request", &[json], &huge),
            canned(
                "400 Bad Request",
                &["content-type: application/json; charset=utf-8"],
                &format!("{{\"not\":\"{long}\"}}"),
            ),
            canned("400 Bad Request", &[], ""),
            canned(
                "200 OK",
                &[
                    "content-type: Application/JSON; charset=utf-8",
                    "mcp-session-id: s1",
                ],
                RESULT,
            ),
            canned("200 OK", &[json], &huge),
            canned("200 OK", &[json], "<html>not JSON</html>"),
            canned("200 OK", &[json], ""),
            canned("200 OK", &[json], &format!("{RESULT}\nnot JSON")),
            canned("200 OK", &["content-type: text/html"], RESULT),
            canned("200 OK", &[], RESULT),
            canned(
                "200 OK",
                &["content-type: text/event-stream", "mcp-session-id: s3"],
                &sse,
            ),
            canned(
                "200 OK",
                &["content-type: text/event-stream"],
                "data: a\r\rdata: b\r\n\r\n",
            ),
        ];
        for case in cases {
            for session in [None, Some("s0")] {
                let (ours, rmcps) = both(case.clone(), session).await;
                assert_eq!(ours, rmcps, "{case} (session {session:?})");
            }
        }
    }

    #[tokio::test]
    async fn a_json_body_of_several_messages_is_a_stream_of_them_in_order() {
        let body = format!("{PROGRESS}\n{RESULT}\n");
        let answer = canned(
            "200 OK",
            &["content-type: application/json", "mcp-session-id: s"],
            &body,
        );
        let (ours, rmcps) = both(answer, None).await;
        let expected = format!(
            "Sse(Some(\"s\")) {:?} {:?}",
            Sse::default().data(PROGRESS),
            Sse::default().data(RESULT)
        );
        assert_eq!(ours, expected);
        assert!(rmcps.contains("trailing characters"), "{rmcps}");
        // Still within the bound for a JSON body, all texts counted.
        let bound = limits().max_json_response_size;
        let many = format!("{PROGRESS}\n").repeat(bound / PROGRESS.len()) + RESULT;
        let answer = canned("200 OK", &["content-type: application/json"], &many);
        let (ours, rmcps) = both(answer, None).await;
        assert_eq!(
            ours,
            format!("ResponseBodyTooLarge {{ max_size: {bound} }}")
        );
        assert_eq!(ours, rmcps);
        // A text that is no message among them fails as rmcp fails one body that is none.
        for body in [
            format!("{PROGRESS}\n{{\"a\":1}}"),
            format!("{PROGRESS} {RESULT} ]"),
        ] {
            let answer = canned("200 OK", &["content-type: application/json"], &body);
            let (ours, rmcps) = both(answer, None).await;
            assert!(ours.contains("could not parse JSON response"), "{ours}");
            assert_eq!(ours, rmcps);
        }
    }

    /// The events before one over the bound are read, then the stream ends with an error
    /// (rmcp's own reader drops those that came in the same chunk as the long one: here one
    /// chunk holds all).
    #[tokio::test]
    async fn an_event_over_the_bound_ends_the_stream_with_an_error() {
        let sse = format!(
            "data: {RESULT}\n\ndata: {}\n\ndata: {RESULT}\n\n",
            "x".repeat(300)
        );
        let answer = canned("200 OK", &["content-type: text/event-stream"], &sse);
        let (ours, rmcps) = both(answer, None).await;
        let first = format!("Sse(None) {:?}", Sse::default().data(RESULT));
        assert_eq!(
            ours,
            format!(
                "{first} error: body error: an event of the server's stream is longer than \
                 200 bytes (--max-message)"
            )
        );
        assert_eq!(
            rmcps,
            "Sse(None) error: body error: SSE event exceeded the maximum size of 200 bytes"
        );
    }

    #[tokio::test]
    async fn the_request_carries_what_rmcps_carries_and_no_reserved_header_of_the_caller() {
        let (url, heads) = server(canned("202 Accepted", &[], "")).await;
        let client = client();
        let headers = [("mcp-protocol-version", "2026-07-28"), ("x-custom", "1")];
        let sent = post(&client, request(&url, Some("s9"), &headers)).await;
        assert!(matches!(sent, Ok(StreamableHttpPostResponse::Accepted)));
        let head = heads.lock().expect("heads").join("").to_ascii_lowercase();
        for line in [
            "accept: text/event-stream, application/json",
            "authorization: bearer the-token",
            "content-type: application/json",
            "mcp-session-id: s9",
            "mcp-protocol-version: 2026-07-28",
            "x-custom: 1",
        ] {
            assert!(head.contains(line), "{line} in {head}");
        }
        for reserved in ["accept", "mcp-session-id", "last-event-id"] {
            let refused = post(&client, request(&url, None, &[(reserved, "x")])).await;
            assert!(
                matches!(&refused, Err(StreamableHttpError::ReservedHeaderConflict(name)) if name == reserved),
                "{reserved}: {:?}",
                refused.map(|_| ())
            );
        }
        assert_eq!(
            heads.lock().expect("heads").len(),
            1,
            "nothing sent when refused"
        );
    }

    #[test]
    fn posted_here_are_requests_but_discover() {
        let message =
            |text: &str| serde_json::from_str::<ClientJsonRpcMessage>(text).expect("a message");
        assert!(posts_itself(&message(CALL)));
        assert!(posts_itself(&message(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#
        )));
        assert!(!posts_itself(&message(
            r#"{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{}}"#
        )));
        assert!(!posts_itself(&message(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        )));
        assert!(!posts_itself(&message(
            r#"{"jsonrpc":"2.0","id":4,"result":{}}"#
        )));
    }
}
