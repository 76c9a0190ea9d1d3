//! What `capability proxy` and `capability gateway` share below the engine: the client's side over
//! stdio (a line filter, an outbox with room for the answers in flight, the standard streams),
//! the pooled HTTP client of every Streamable HTTP connection, the relay of a server's progress,
//! the gate of a server's requests to the client, the audit trail's opening, the clients of an
//! HTTP front, and the protocol revisions spoken to a server.

mod audit;
mod clients;
mod completed;
mod front;
mod http;
mod outbox;
mod pooled;
mod progress;
mod protocol;

pub(crate) use audit::{checkpoint_key, open as open_audit};
pub(crate) use clients::{Changed, Clients};
pub(crate) use completed::Completed;
pub(crate) use front::{
    Held, Hook as FrontHook, Outbox, standard_streams, start_threaded as filter_client_threaded,
    start_with as filter_client_with,
};
pub use http::check_credentials;
pub(crate) use http::config as http_config;
pub(crate) use pooled::{client as http_client, transport_with as http_transport_with};
pub(crate) use progress::{Relay as ProgressRelay, Relaying, send_call};
pub(crate) use protocol::lifecycle;
pub(crate) use upstream::{ServerRequests, ask_client};
pub mod secrets;
#[cfg(unix)]
mod socket;
mod upstream;

use std::fmt;

pub use clients::PROXY_NAME;

/// What the engine says to its operator (see [`crate::gateway`]'s `note`): printed by the
/// command as `<who>: <message>`.
pub(crate) fn note(message: fmt::Arguments<'_>) {
    crate::gateway::note(message);
}
