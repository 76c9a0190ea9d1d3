//! Running the proxy: connect to the server, then serve the client over stdio (here) or the
//! clients over Streamable HTTP (`http.rs`) until either side goes.

use std::sync::Arc;
use std::time::Duration;

use ::rmcp::service::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use capability::rmcp::FixedRole;

use super::connected::{Connected, governed, review, server_gone, terminated};
use super::forward::{Gone, ToolCache};
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
    let (changed_tx, changed) = mpsc::unbounded_channel();
    let (backend, upstream, tools) = backend::connect(&proxy, changed_tx).await?;
    review(&proxy.server, proxy.lock.as_deref(), &tools);
    let cache = ToolCache::default();
    cache.set(tools);
    let connected = Connected {
        backend,
        upstream: upstream.peer().clone(),
        upstream_stop: upstream.cancellation_token(),
        upstream_done: tokio::spawn(async move {
            let _ = upstream.waiting().await;
        }),
        changed,
        cache,
        gone: Gone::default(),
    };
    let front = std::mem::replace(
        &mut proxy.front,
        Front::Stdio {
            role: String::new(),
        },
    );
    match front {
        Front::Stdio { role } => serve_stdio(&proxy, connected, role, input, output).await,
        Front::Http { listener, tokens } => http::serve(&proxy, connected, listener, tokens).await,
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
    let governed = governed(proxy, &connected, FixedRole::new(role.clone()), None);
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
        connected.cache.get().len()
    ));
    let front_peer = front.peer().clone();
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
            Some(()) = connected.changed.recv() => {
                if connected.relist(&proxy.server, proxy.lock.as_deref()).await
                    && let Err(error) = front_peer.notify_tool_list_changed().await
                {
                    note(format_args!("cannot tell the client the tools changed: {error}"));
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
