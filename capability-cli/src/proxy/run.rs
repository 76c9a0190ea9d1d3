//! Running the proxy: connect to the server, then serve the client over stdio (here) or the
//! clients over Streamable HTTP (`http.rs`) until either side goes.

use std::sync::Arc;
use std::time::Duration;

use ::rmcp::service::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use capability::authz::{Action, Authorize};
use capability::rmcp::{FixedRole, ToolListings};

use super::connected::{
    Connected, Pending, dispatch, forwards, governed, review, server_gone, terminated,
};
use super::gone::Gone;
use super::upstream::{ServerRequests, Upstream};
use super::{Front, Proxy, RunError, backend, front, http, note};

/// How long the last lines get to be written to the client.
const FLUSH: Duration = Duration::from_secs(2);

/// Runs the proxy between `input`/`output` (the client) and a spawned server.
pub(super) async fn run<R, W>(proxy: Proxy, input: R, output: W) -> Result<(), RunError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let sink = Arc::clone(&proxy.sink);
    let result = serve(proxy, input, output).await;
    // The trail is closed (what is pending written) on every path.
    if let Err(error) = sink.close() {
        note(format_args!("the audit trail could not be closed: {error}"));
    }
    result
}

async fn serve<R, W>(mut proxy: Proxy, input: R, output: W) -> Result<(), RunError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Over HTTP, who may call is known before the server is started: an authorization server
    // that cannot be used stops the proxy here.
    let credentials = match &proxy.front {
        Front::Http { .. } => Some(
            capability_http::Credentials::from_policy(&proxy.policy)
                .await
                .map_err(RunError::Spawn)?,
        ),
        Front::Stdio { .. } => None,
    };
    let (events_tx, events) = mpsc::unbounded_channel();
    let dispatch = dispatch(&proxy);
    let stdio_role = match &proxy.front {
        Front::Stdio { role } => Some(role.as_str()),
        Front::Http { .. } => None,
    };
    let requests = Arc::new(ServerRequests::new(
        proxy.server.name(),
        &proxy.policy,
        stdio_role,
        Arc::clone(&dispatch),
    ));
    let progress = super::progress::Relay::default();
    let upstream = Upstream {
        events: events_tx,
        requests: Arc::clone(&requests),
        progress: progress.clone(),
    };
    let (mut backend, upstream, tools) = backend::connect(&proxy, upstream).await?;
    review(&proxy.server, proxy.lock.as_deref(), &tools);
    let listings = ToolListings::new(proxy.server.clone(), proxy.lock.clone());
    if let Err(error) = listings.set(tools) {
        backend.stop().await;
        return Err(RunError::Connect(format!(
            "the server's tool list is refused: {}",
            crate::escape::escape(&error.message)
        )));
    }
    let connected = Connected {
        backend,
        upstream: upstream.peer().clone(),
        upstream_stop: upstream.cancellation_token(),
        upstream_done: tokio::spawn(async move {
            let _ = upstream.waiting().await;
        }),
        events,
        listings,
        gone: Gone::default(),
        dispatch,
        requests,
        progress,
    };
    let front = std::mem::replace(
        &mut proxy.front,
        Front::Stdio {
            role: String::new(),
        },
    );
    match (front, credentials) {
        (Front::Http { listener }, Some(credentials)) => {
            http::serve(&proxy, connected, listener, credentials).await
        }
        (Front::Stdio { role }, _) => serve_stdio(&proxy, connected, role, input, output).await,
        (Front::Http { .. }, None) => Err(RunError::Spawn(
            "no credentials for the HTTP front".to_owned(),
        )),
    }
}

async fn serve_stdio<R, W>(
    proxy: &Proxy,
    mut connected: Connected,
    role: String,
    input: R,
    output: W,
) -> Result<(), RunError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let governed = governed(proxy, &connected, FixedRole::new(role.clone()), None, None);
    let filter = front::start(input, output);
    let front = tokio::select! {
        front = governed.serve(filter.transport) => front,
        why = server_gone(&mut connected.backend, &connected.gone) => {
            return Err(RunError::ServerGone(format!("{why} before the client connected")));
        }
    };
    let front = match front {
        Ok(front) => front,
        Err(error) => {
            // Most often the client went away before its handshake.
            connected.upstream_stop.cancel();
            connected.backend.stop().await;
            finish(filter.reader, filter.writer).await;
            return Err(RunError::Client(error.to_string()));
        }
    };
    note(format_args!(
        "serving `{}` to role `{role}` ({} tools listed by the server)",
        proxy.server.name(),
        connected.listings.tools().len()
    ));
    let front_peer = front.peer().clone();
    connected.requests.connected(front_peer.clone());
    let reader = proxy
        .policy
        .context(&role, format!("mcp:{}/{role}", proxy.server.name()));
    let front_stop = front.cancellation_token();
    let mut front_done = tokio::spawn(front.waiting());

    // Watched from here on, once: a signal between two turns of the loop is not lost.
    let signalled = terminated();
    tokio::pin!(signalled);
    let ending = loop {
        tokio::select! {
            _ = &mut front_done => break Err("the client disconnected"),
            signal = &mut signalled => break Err(signal),
            why = server_gone(&mut connected.backend, &connected.gone) => break Ok(why),
            // Most often it is exiting: its status says more, if it comes soon.
            _ = &mut connected.upstream_done => break Ok(connected.backend.why_closed().await),
            Some(event) = connected.events.recv() => {
                let Pending { changed, updated } = connected.coalesce(event);
                for list in changed {
                    let tell = connected.changed(proxy, list).await;
                    if tell && !list.tell_peer(&front_peer).await {
                        note(format_args!("cannot tell the client that a list changed"));
                    }
                }
                // A resource the role may read: the client may have subscribed to it.
                for params in updated {
                    let readable = reader.as_ref().is_some_and(|r| {
                        r.decide_action(&Action::Resource {
                            server: proxy.server.name(),
                            uri: &params.uri,
                        })
                        .is_allowed()
                    });
                    if readable && forwards(proxy, true) {
                        let _ = front_peer.notify_resource_updated(params).await;
                    }
                }
            }
        }
    };
    match ending {
        Err(cause) => {
            // The client went, or the proxy was asked to stop: stop the server (its input is
            // closed, then it is killed).
            front_stop.cancel();
            connected.upstream_stop.cancel();
            connected.backend.stop().await;
            finish(filter.reader, filter.writer).await;
            note(format_args!("{cause}; the server was stopped"));
            Ok(())
        }
        Ok(why) => {
            let error = connected.gone(why, || front_stop.cancel()).await;
            finish(filter.reader, filter.writer).await;
            Err(error)
        }
    }
}

/// Stops reading the client and lets the last lines out.
async fn finish(reader: tokio::task::JoinHandle<()>, writer: tokio::task::JoinHandle<()>) {
    reader.abort();
    let _ = tokio::time::timeout(FLUSH, writer).await;
}
