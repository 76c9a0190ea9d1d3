//! [`EdgeConfig`]: how an [`Edge`](super::Edge) works (its credentials, limits, endpoint, where
//! it records refusals, how it closes sessions downstream).

use std::sync::Arc;

use capability_audit::AuditedDispatch;
use capability_core::authz::HttpSettings;
use capability_core::clock::{SharedClock, SystemClock};
use capability_mcp::Server;
use capability_mcp::rmcp::ToolListings;
use rmcp::transport::streamable_http_server::SessionManager;

use super::Closer;
use super::record::Recording;
use crate::auth::Credentials;

/// How an [`Edge`](super::Edge) works: the credentials it takes, its limits, and where it records refusals.
pub struct EdgeConfig {
    pub(super) credentials: Credentials,
    pub(super) http: HttpSettings,
    pub(super) endpoint: String,
    pub(super) recording: Option<Recording>,
    pub(super) closer: Option<Closer>,
    pub(super) keep_subject_token: bool,
    pub(super) hosts: Option<Vec<String>>,
    pub(super) pages: Vec<String>,
    pub(super) clock: SharedClock,
}

impl EdgeConfig {
    /// An edge taking `credentials`, within the limits of `http`, serving the MCP endpoint at
    /// `/mcp`.
    pub fn new(credentials: Credentials, http: HttpSettings) -> Self {
        EdgeConfig {
            credentials,
            http,
            endpoint: "/mcp".to_owned(),
            recording: None,
            closer: None,
            keep_subject_token: false,
            hosts: None,
            pages: Vec::new(),
            clock: SystemClock::shared(),
        }
    }

    /// Reads the time from `clock` (the system clock unless told): how long a session sat
    /// idle, how full a caller's rate bucket is again. A reload keeps the clock the edge was
    /// made with. A token's `exp` is read from its credentials' clock
    /// ([`JwtAuth::discover_with_clock`](crate::JwtAuth::discover_with_clock)).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The `Host` names the edge answers ([`crate::listen::allowed_hosts`] of the address
    /// listened on: `None` for any); a request for another gets `403` before anything else.
    /// Given them, the edge also takes a request whose `Origin` is its own (the same
    /// `host[:port]` as its checked `Host`).
    pub fn hosts(mut self, hosts: Option<Vec<String>>) -> Self {
        self.hosts = hosts;
        self
    }

    /// Keeps an authenticated caller's access token in the request's extensions, as a
    /// [`SubjectToken`](crate::SubjectToken), for a server behind the edge that exchanges it at
    /// the issuer ([`TokenExchange`](crate::TokenExchange)). The `Authorization` header is
    /// still removed: the token goes no further than this process and its issuer.
    pub fn keep_subject_token(mut self) -> Self {
        self.keep_subject_token = true;
        self
    }

    /// Also serves the paths under `prefix` (`/approvals`, and what is below it): a page for
    /// people, behind the same `Host` and `Origin` checks, body limits, authentication and
    /// rate as the MCP endpoint, and no session. A request without an `Authorization` header
    /// goes on without an [`Authenticated`](crate::Authenticated) caller (a browser loading
    /// the page's own files sends none): the service behind the edge refuses it what needs
    /// one. A request with a token that is not valid is refused here (`401`), as on the
    /// endpoint. Called again, serves another prefix too.
    pub fn page(mut self, prefix: impl Into<String>) -> Self {
        self.pages.push(prefix.into());
        self
    }

    /// Serves the MCP endpoint at `path` instead.
    pub fn endpoint(mut self, path: impl Into<String>) -> Self {
        self.endpoint = path.into();
        self
    }

    /// Records each call, read or get the edge refuses, through `dispatch`, as a request to
    /// `server`, decided under the policy `version` (the governed server's own dispatch: one
    /// trail, one budget per session).
    pub fn recording(
        mut self,
        dispatch: Arc<AuditedDispatch>,
        server: &Server,
        version: Option<&str>,
    ) -> Self {
        let listings = self.recording.take().and_then(|r| r.listings);
        self.recording = Some(Recording {
            dispatch,
            server: server.name().to_owned(),
            policy_version: version.map(str::to_owned),
            listings,
        });
        self
    }

    /// Reads the scopes a tool requires from the governed server's listing
    /// ([`GovernedServer::listings`](capability_mcp::rmcp::GovernedServer::listings)), so that a
    /// `tools/call` whose token lacks one is answered `403 insufficient_scope` (needs
    /// [`recording`](Self::recording) first).
    pub fn tools(self, listings: ToolListings) -> Self {
        self.tool_manifests(move |name| listings.manifest(name))
    }

    /// Finds the manifest of the tool a `tools/call` names with `find` (the name as the client
    /// sent it; for a gateway, its shown name), for its required scopes (a token lacking one is
    /// answered `403 insufficient_scope`) and for the record of a refusal (its provider and own
    /// name). Needs [`recording`](Self::recording) first.
    pub fn tool_manifests(
        mut self,
        find: impl Fn(&str) -> Option<capability_core::manifest::CapabilityManifest>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        if let Some(recording) = &mut self.recording {
            recording.listings = Some(Arc::new(find));
        }
        self
    }

    /// Closes, in `manager`, the sessions the edge lets expire (its `SessionConfig::keep_alive`
    /// at the same limit, or off and [`Edge::close_idle`](super::Edge::close_idle) on a timer if some requests skip it).
    pub fn sessions<M: SessionManager>(mut self, manager: Arc<M>) -> Self {
        self.closer = Some(Arc::new(move |id: String| {
            let manager = Arc::clone(&manager);
            Box::pin(async move {
                let _ = manager.close_session(&id.into()).await;
            })
        }));
        self
    }
}
