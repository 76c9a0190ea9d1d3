//! How a program sets the engine up: [`builder`] from the policy and an audited dispatch, the
//! servers and the rest chosen, then [`Builder::serve`] on a [`Front`].

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use capability::Policy;
use capability::audit::AuditedDispatch;

use crate::metrics::Metrics;
use crate::run::{Ended, Engine, Front};
use crate::{GATEWAY_NAME, GatewayError, Servers};

/// A future that, when it completes, stops the engine as a signal would.
type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Starts setting up an engine: `policy` (read from `policy_path`, which a reload reads
/// again and relative paths in it are relative to) decides every request, `dispatch` records
/// each. By default it serves the policy's `[servers]` as `capability-gateway`, starts a
/// server that dies again, and reloads on `SIGHUP` only.
pub fn builder(
    policy: Policy,
    policy_path: impl Into<PathBuf>,
    dispatch: Arc<AuditedDispatch>,
) -> Builder {
    Builder {
        engine: Engine {
            name: GATEWAY_NAME,
            servers: Servers::Policy,
            restart: true,
            drain: crate::run::DRAIN,
        },
        policy,
        policy_path: policy_path.into(),
        dispatch,
        store: String::new(),
        watch: false,
        shutdown: None,
        metrics: None,
    }
}

/// An engine being set up (see [`builder`]).
#[must_use = "an engine serves nothing until `serve` is awaited"]
pub struct Builder {
    engine: Engine,
    policy: Policy,
    policy_path: PathBuf,
    dispatch: Arc<AuditedDispatch>,
    store: String,
    watch: bool,
    shutdown: Option<Shutdown>,
    metrics: Option<Arc<Metrics>>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("engine", &self.engine)
            .field("policy_path", &self.policy_path)
            .field("watch", &self.watch)
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// The name the engine gives itself, to clients and servers and in its refusals
    /// (`capability-gateway`, `capability-proxy`).
    pub fn name(mut self, name: &'static str) -> Builder {
        self.engine.name = name;
        self
    }

    /// Where its servers come from: the policy's `[servers]`, or given.
    pub fn servers(mut self, servers: Servers) -> Builder {
        self.engine.servers = servers;
        self
    }

    /// Whether a server that dies is started again, with backoff (the default); else the
    /// engine stops and [`Ended::ServerGone`] says why (`capability proxy`, whose client sees
    /// its one server go).
    pub fn restart(mut self, restart: bool) -> Builder {
        self.engine.restart = restart;
        self
    }

    /// How long, once a signal (or the client's leaving) has stopped the servers, the engine
    /// waits for the calls still ending to record their outcomes, and for a stdio client to be
    /// written every answer, before [`serve`](Builder::serve) returns
    /// ([`DRAIN`](crate::DRAIN), 10 s, by default). Only a
    /// call whose client stopped reading its answer takes that long: the engine then says how
    /// many calls it gave up on, and their intents stay on record without outcomes. Keep it
    /// under the time a supervisor allows between `SIGTERM` and `SIGKILL`, so that the trail
    /// is closed whole. `Duration::MAX` waits for every call, however long.
    pub fn drain(mut self, drain: std::time::Duration) -> Builder {
        self.engine.drain = drain;
        self
    }

    /// The trail's target when it is a store (a SQLite file, a PostgreSQL URL): approvals are
    /// kept there unless the policy's `[approvals]` names a ledger, and each tool version the
    /// engine serves is recorded there. A JSON Lines path, or none, records no versions.
    pub fn store(mut self, target: impl Into<String>) -> Builder {
        self.store = target.into();
        self
    }

    /// Reload when the policy file or a server's lockfile changes and has then stayed the same
    /// for a second, as on `SIGHUP`.
    pub fn watch(mut self, watch: bool) -> Builder {
        self.watch = watch;
        self
    }

    /// The counters of a metrics endpoint, fed by a [`MeteredSink`](crate::metrics::MeteredSink)
    /// around the trail's sink: the engine adds the gauge of the proposals waiting for its
    /// approvers (read from its store at each scrape).
    pub fn metrics(mut self, metrics: Option<Arc<Metrics>>) -> Builder {
        self.metrics = metrics;
        self
    }

    /// Stop when `signal` completes, as on `SIGTERM`: the servers are stopped and the calls
    /// in flight end before [`serve`](Builder::serve) returns.
    pub fn shutdown(mut self, signal: impl Future<Output = ()> + Send + 'static) -> Builder {
        self.shutdown = Some(Box::pin(signal));
        self
    }

    /// Starts every server and serves `front` until its stdio client goes, a signal (or the
    /// [`shutdown`](Builder::shutdown) future) stops it, or, when servers are not started
    /// again, a server goes. Every server is stopped and waited for before it returns.
    ///
    /// # Errors
    ///
    /// [`GatewayError`]: the configuration refused, a server that cannot be started, reached
    /// or listed (nothing is served then), or the client that did not connect.
    pub async fn serve(self, front: Front) -> Result<Ended, GatewayError> {
        crate::run::serve(
            &self.engine,
            self.policy,
            &self.policy_path,
            front,
            self.dispatch,
            self.watch,
            &self.store,
            self.metrics,
            self.shutdown
                .unwrap_or_else(|| Box::pin(std::future::pending())),
        )
        .await
    }
}
