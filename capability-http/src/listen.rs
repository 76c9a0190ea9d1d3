//! The one accept loop of every HTTP listener (the gateway's and the proxy's MCP front, the
//! metrics endpoint): what a connection gets before any request of it is authenticated.
//!
//! - **A head within a few seconds.** A connection that has not sent a complete request head
//!   within [`Limits::header_timeout`] of opening (or of its previous answer) is closed: hyper's
//!   own `header_read_timeout` on tokio's timer, which runs while hyper waits for a head, so it
//!   bounds the first request, a slow head and an idle keep-alive alike (not an answer being
//!   streamed). The body is the edge's to bound.
//! - **A cap below the descriptor limit.** At most [`Limits::max_connections`] connections are
//!   open, and never more than the process's descriptor limit allows
//!   ([`Limits::under_descriptor_limit`]). At the cap, the oldest connection that never carried
//!   an authenticated request is closed to make room; when every one did, the newcomer is.
//!   The service says a request was authenticated through the [`Connection`] in its extensions.
//! - **A failing `accept` backs off** (10 ms, doubling to 1 s) and closes the oldest
//!   unauthenticated connection (out of descriptors, that gives one back); it is said at most
//!   once per [`REPORT_EVERY`], with how many failed since.
//!
//! Reports are `tracing` events (target `capability_http::listen`, `warn`); nothing is printed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// How often, at most, a failing `accept` or a full house is reported.
pub const REPORT_EVERY: Duration = Duration::from_secs(10);

/// The first pause after a failed `accept`; it doubles while `accept` keeps failing.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause after a failed `accept`.
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// The limits of one listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A connection without a complete request head this long after it opened (or after its
    /// last answer) is closed.
    pub header_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl Default for Limits {
    /// A head within 5 s, 1,024 connections (see [`Limits::under_descriptor_limit`]).
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(5),
            max_connections: 1024,
        }
    }
}

impl Limits {
    /// The policy's `[http]` limits (`header_timeout_secs`, `max_connections`).
    pub fn of(http: &capability_core::authz::HttpSettings) -> Self {
        Limits {
            header_timeout: Duration::from_secs(http.header_timeout_secs()),
            max_connections: http.max_connections(),
        }
    }

    /// These limits with the cap lowered below the process's descriptor limit (its soft
    /// `RLIMIT_NOFILE`): a quarter of it, between 16 and 256 descriptors, is kept for
    /// everything else (servers' pipes, the trail, the ledger), so an `accept` never takes the
    /// last descriptor another part needs. Where the limit cannot be read, the cap stays.
    pub fn under_descriptor_limit(mut self) -> Self {
        if let Some(limit) = descriptor_limit() {
            let kept = (limit / 4).clamp(16, 256);
            let room = usize::try_from(limit.saturating_sub(kept)).unwrap_or(usize::MAX);
            self.max_connections = self.max_connections.min(room.max(1));
        }
        self
    }
}

/// The process's soft limit of open descriptors.
#[cfg(unix)]
fn descriptor_limit() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit};
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    Some(soft)
}

#[cfg(not(unix))]
fn descriptor_limit() -> Option<u64> {
    None
}

/// The `Host` names a listener on `address` answers, against DNS rebinding: the loopback names
/// (`localhost`, `127.0.0.1`, `::1`, as rmcp's Streamable HTTP service takes by default), and
/// for an address that is not loopback that address too. `None` on the unspecified address
/// (`0.0.0.0`, `::`): the names clients use are not known there, and any is taken.
pub fn allowed_hosts(address: std::net::SocketAddr) -> Option<Vec<String>> {
    let ip = address.ip();
    if ip.is_unspecified() {
        return None;
    }
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .map(str::to_owned)
        .to_vec();
    if !ip.is_loopback() {
        hosts.push(ip.to_string());
    }
    Some(hosts)
}

/// Whether a request's `Host` header names one of `hosts` (any port; letter case aside), or
/// `hosts` is `None` (any host). A request without a `Host`, or with two, is refused.
pub fn host_allowed(headers: &http::HeaderMap, hosts: Option<&[String]>) -> bool {
    let Some(hosts) = hosts else {
        return true;
    };
    let mut values = headers.get_all(http::header::HOST).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    let Ok(authority) = value.to_str().map(str::trim) else {
        return false;
    };
    let Ok(authority) = authority.parse::<http::uri::Authority>() else {
        return false;
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    hosts
        .iter()
        .any(|allowed| allowed.eq_ignore_ascii_case(host))
}

/// The connection a request came on, in the request's extensions: the service behind the loop
/// calls [`Connection::authenticated`] once it knows who is calling, so that at the cap this
/// connection is not among the first closed.
#[derive(Clone, Debug)]
pub struct Connection {
    authenticated: Arc<AtomicBool>,
}

impl Connection {
    /// Says that a request of this connection was authenticated.
    pub fn authenticated(&self) {
        self.authenticated.store(true, Ordering::Relaxed);
    }

    /// Whether a request of this connection was authenticated.
    pub fn is_authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Relaxed)
    }
}

/// The open connections, oldest first.
#[derive(Default)]
struct Open {
    next: u64,
    connections: BTreeMap<u64, Entry>,
}

struct Entry {
    connection: Connection,
    close: Option<oneshot::Sender<()>>,
}

impl Open {
    /// Closes the oldest connection that never carried an authenticated request; whether there
    /// was one.
    fn close_oldest_stranger(&mut self) -> bool {
        let Some(id) = self
            .connections
            .iter()
            .find(|(_, entry)| !entry.connection.is_authenticated())
            .map(|(id, _)| *id)
        else {
            return false;
        };
        if let Some(mut entry) = self.connections.remove(&id)
            && let Some(close) = entry.close.take()
        {
            let _ = close.send(());
        }
        true
    }
}

/// Takes a connection off the open ones when its task ends, however it ends.
struct Registered {
    open: Arc<Mutex<Open>>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        lock(&self.open).connections.remove(&self.id);
    }
}

fn lock(open: &Mutex<Open>) -> std::sync::MutexGuard<'_, Open> {
    open.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Something said at most once per [`REPORT_EVERY`], with how often it happened since.
struct Report {
    last: Option<Instant>,
    since: u64,
}

impl Report {
    const fn new() -> Self {
        Report {
            last: None,
            since: 0,
        }
    }

    /// Counts one more; `Some(count)` when it is time to say it (the count since last said).
    fn happened(&mut self) -> Option<u64> {
        self.since += 1;
        let due = self.last.is_none_or(|last| last.elapsed() >= REPORT_EVERY);
        due.then(|| {
            self.last = Some(Instant::now());
            std::mem::take(&mut self.since)
        })
    }
}

/// Serves HTTP/1.1 on `listener` with the service `make` gives for each connection, within
/// `limits` (lowered below the descriptor limit), until the task is dropped. `what` names the
/// listener in reports (`the MCP endpoint`, `the metrics endpoint`).
///
/// Each request carries its [`Connection`] in its extensions. Accepted sockets send small
/// writes at once (`TCP_NODELAY`): JSON-RPC answers are one write each.
pub async fn serve<S, B>(
    listener: TcpListener,
    make: impl Fn() -> S,
    limits: Limits,
    what: &'static str,
) where
    S: hyper::service::Service<http::Request<Incoming>, Response = http::Response<B>>
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limits = limits.under_descriptor_limit();
    let open = Arc::new(Mutex::new(Open::default()));
    let mut failing = Report::new();
    let mut full = Report::new();
    let mut pause = FIRST_PAUSE;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                pause = FIRST_PAUSE;
                stream
            }
            Err(error) => {
                // Out of descriptors (or memory): a stranger's connection gives one back.
                lock(&open).close_oldest_stranger();
                if let Some(count) = failing.happened() {
                    tracing::warn!(
                        target: "capability_http::listen",
                        "{what}: cannot accept a connection ({count} failed since last said): \
                         {error}; pausing up to {} ms between tries",
                        LONGEST_PAUSE.as_millis()
                    );
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LONGEST_PAUSE);
                continue;
            }
        };
        let (close, closed) = oneshot::channel();
        let connection = Connection {
            authenticated: Arc::new(AtomicBool::new(false)),
        };
        let id = {
            let mut guard = lock(&open);
            if guard.connections.len() >= limits.max_connections && !guard.close_oldest_stranger() {
                drop(guard);
                if let Some(count) = full.happened() {
                    tracing::warn!(
                        target: "capability_http::listen",
                        "{what}: {} connections are open, each with an authenticated request: \
                         a new one was closed ({count} since last said); raise [http] \
                         max_connections or the descriptor limit",
                        limits.max_connections
                    );
                }
                drop(stream);
                continue;
            }
            let id = guard.next;
            guard.next += 1;
            guard.connections.insert(
                id,
                Entry {
                    connection: connection.clone(),
                    close: Some(close),
                },
            );
            id
        };
        let registered = Registered {
            open: Arc::clone(&open),
            id,
        };
        let _ = stream.set_nodelay(true);
        let service = Marked {
            inner: make(),
            connection,
        };
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            let _registered = registered;
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = served => {}
                // Closed to make room: dropping the connection closes its socket.
                _ = closed => {}
            }
        });
    }
}

/// A connection's service, putting the [`Connection`] into each request's extensions.
struct Marked<S> {
    inner: S,
    connection: Connection,
}

impl<S> hyper::service::Service<http::Request<Incoming>> for Marked<S>
where
    S: hyper::service::Service<http::Request<Incoming>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, mut request: http::Request<Incoming>) -> Self::Future {
        request.extensions_mut().insert(self.connection.clone());
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_due_once_per_interval_with_the_count_since() {
        let mut report = Report::new();
        assert_eq!(report.happened(), Some(1));
        for _ in 0..1000 {
            assert_eq!(report.happened(), None);
        }
        report.last = Instant::now().checked_sub(REPORT_EVERY);
        assert_eq!(report.happened(), Some(1001));
    }

    #[test]
    fn the_oldest_stranger_goes_first_and_an_authenticated_connection_never() {
        let mut open = Open::default();
        let mut closed = Vec::new();
        for id in 0..3 {
            let (close, rx) = oneshot::channel();
            closed.push(rx);
            let connection = Connection {
                authenticated: Arc::new(AtomicBool::new(id == 0)),
            };
            open.connections.insert(
                id,
                Entry {
                    connection,
                    close: Some(close),
                },
            );
        }
        assert!(open.close_oldest_stranger());
        assert!(closed[1].try_recv().is_ok(), "the oldest stranger");
        assert!(open.close_oldest_stranger());
        assert!(closed[2].try_recv().is_ok());
        assert!(
            !open.close_oldest_stranger(),
            "only the authenticated one is left"
        );
        assert!(closed[0].try_recv().is_err());
    }

    #[test]
    fn a_host_is_one_of_the_addresses_names_and_a_missing_or_double_one_is_refused() {
        let loopback = allowed_hosts("127.0.0.1:9000".parse().expect("address"));
        let hosts = loopback.as_deref();
        let with = |values: &[&str]| {
            let mut headers = http::HeaderMap::new();
            for value in values {
                headers.append(
                    http::header::HOST,
                    http::HeaderValue::from_str(value).expect("value"),
                );
            }
            host_allowed(&headers, hosts)
        };
        assert!(with(&["127.0.0.1:9000"]));
        assert!(with(&["LOCALHOST:1"]));
        assert!(with(&["[::1]:9000"]));
        assert!(!with(&["evil.example:9000"]));
        assert!(!with(&["127.0.0.1.evil.example"]));
        assert!(!with(&[]));
        assert!(!with(&["localhost", "evil.example"]));
        let lan = allowed_hosts("10.0.0.5:80".parse().expect("address"));
        assert!(
            lan.as_deref()
                .is_some_and(|h| h.contains(&"10.0.0.5".to_owned()))
        );
        assert_eq!(allowed_hosts("0.0.0.0:80".parse().expect("address")), None);
    }

    #[test]
    fn the_cap_stays_below_the_descriptor_limit() {
        let limits = Limits {
            max_connections: usize::MAX,
            ..Limits::default()
        }
        .under_descriptor_limit();
        if let Some(limit) = descriptor_limit() {
            assert!((limits.max_connections as u64) < limit.max(2), "{limits:?}");
        }
    }
}
