//! A second connection to a Streamable HTTP server whose first one speaks 2026-07-28: a session
//! of 2025-11-25 (`initialize`), for the clients of 2025-11-25 and earlier, opened when the
//! first of them needs it.
//!
//! A server that speaks both revisions behaves as its revision says: on 2026-07-28 (stateless)
//! it cannot send a request during a call, nor keep a subscription or a log level; on a session
//! of 2025-11-25 it can. So a client of 2025-11-25 is served over a connection of its own
//! revision, and the server does for it what it would do for that client straight: its
//! sampling and elicitation during a call reach that client (`relay.rs` finds the call by the
//! stream it came on), its subscriptions and log level hold. A server that refuses the older
//! revision is said once, and those clients are served over the first connection, bridged
//! (`bridge.rs`).
//!
//! A spawned server has one connection (one process, one session): its clients of any revision
//! share it, bridged.

use std::sync::Arc;

use ::rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use ::rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use ::rmcp::{Peer, RoleClient};
use tokio::sync::OnceCell;

use crate::upstream::Watch;
use crate::upstream::progress::Relay as ProgressRelay;
use crate::upstream::relay::Calls;

/// What one connection to a server needs for a call: the peer, the relay of its progress, and
/// its calls in flight.
#[derive(Clone)]
pub(crate) struct Leg {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) progress: ProgressRelay,
    pub(crate) calls: Calls,
}

/// The session of 2025-11-25 of one HTTP server, opened on first use.
pub(crate) struct Legacy {
    server: String,
    url: String,
    token: Option<crate::spec::Secret>,
    watch: Watch,
    opened: OnceCell<Option<RunningService<RoleClient, Watch>>>,
}

impl Legacy {
    /// For `server` at `url`, whose handler is `watch` (its requests decided as the first
    /// connection's are; its progress and calls its own).
    pub(crate) fn new(
        server: &str,
        url: &str,
        token: Option<crate::spec::Secret>,
        watch: Watch,
    ) -> Arc<Legacy> {
        Arc::new(Legacy {
            server: server.to_owned(),
            url: url.to_owned(),
            token,
            watch,
            opened: OnceCell::new(),
        })
    }

    /// The connection, opened now if it is not yet; `None` when the server does not take the
    /// older revision (said once).
    pub(crate) async fn leg(&self) -> Option<Leg> {
        let opened = self
            .opened
            .get_or_init(|| async {
                let client = crate::upstream::pooled::client()
                    .map_err(|e| crate::note(format_args!("server `{}`: {e}", self.server)))
                    .ok()?;
                let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.as_str());
                if let Some(token) = &self.token {
                    config = config.auth_header(token.0.clone());
                }
                // The gateway's client, which reads a JSON answer of several messages.
                let client = crate::upstream::http::Seen::new(client);
                let transport = crate::upstream::pooled::transport_with(client, config);
                match self
                    .watch
                    .clone()
                    .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
                    .await
                {
                    Ok(service) => Some(service),
                    Err(error) => {
                        crate::note(format_args!(
                            "server `{}` takes no session of 2025-11-25 ({}): its clients of \
                             that revision are served over its 2026-07-28 connection, bridged",
                            self.server,
                            super::unconnected::why(&error, None)
                        ));
                        None
                    }
                }
            })
            .await;
        let service = opened.as_ref()?;
        if service.is_transport_closed() {
            return None;
        }
        Some(Leg {
            peer: service.peer().clone(),
            progress: service.service().progress.clone(),
            calls: service.service().calls.clone(),
        })
    }
}
