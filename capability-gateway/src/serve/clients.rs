//! The clients of an HTTP front, told when a server's lists change: each session of 2025-11-25
//! (after its `notifications/initialized`) and each open `subscriptions/listen` of 2026-07-28.

use std::sync::{Arc, Mutex, PoisonError};

use ::rmcp::model::SubscriptionFilter;
use ::rmcp::service::{SubscriptionContext, SubscriptionSink};
use ::rmcp::{Peer, RoleServer};

/// The name the proxy gives itself, to the client and to the server.
pub const PROXY_NAME: &str = "capability-proxy";

/// The clients of an HTTP front, to tell each of them when the server's tools changed: the peer
/// of every session (protocol 2025-11-25, after its `notifications/initialized`) and every open
/// `subscriptions/listen` (2026-07-28, where requests are stateless).
#[derive(Clone, Debug, Default)]
pub(crate) struct Clients(Arc<Mutex<ClientList>>);

#[derive(Debug, Default)]
struct ClientList {
    peers: Vec<Peer<RoleServer>>,
    listening: Vec<(u64, SubscriptionSink)>,
    next: u64,
}

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, ClientList> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A session that has initialized (2025-11-25): told from now on. The sessions that ended
    /// since are forgotten, so the list holds only live ones.
    pub(crate) fn initialized(&self, peer: Peer<RoleServer>) {
        let mut clients = self.lock();
        clients.peers.retain(|peer| !peer.is_transport_closed());
        clients.peers.push(peer);
    }

    /// What an HTTP front accepts of a `subscriptions/listen` (2026-07-28): tool list changes.
    pub(crate) fn accepted() -> SubscriptionFilter {
        SubscriptionFilter::builder().tools_list_changed().build()
    }

    /// Keeps an open `subscriptions/listen` among the clients told until it is cancelled.
    pub(crate) async fn listen(&self, context: SubscriptionContext) {
        let key = {
            let mut list = self.lock();
            list.next += 1;
            let key = list.next;
            list.listening.push((key, context.sink().clone()));
            key
        };
        context.cancelled().await;
        self.lock().listening.retain(|(k, _)| *k != key);
    }

    /// Tells every client still connected that a list changed; forgets the others.
    pub(crate) async fn notify(&self, list: Changed) -> usize {
        let (peers, sinks) = {
            let mut clients = self.lock();
            clients.peers.retain(|peer| !peer.is_transport_closed());
            let sinks: Vec<_> = clients.listening.iter().map(|(_, s)| s.clone()).collect();
            (clients.peers.clone(), sinks)
        };
        let mut told = 0;
        for peer in peers {
            told += usize::from(list.tell_peer(&peer).await);
        }
        for sink in sinks {
            let sent = match list {
                Changed::Tools => sink.notify_tool_list_changed().await,
                Changed::Resources => sink.notify_resource_list_changed().await,
                Changed::Prompts => sink.notify_prompt_list_changed().await,
            };
            told += usize::from(sent.is_ok());
        }
        told
    }
}

/// A list of the server's that changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Changed {
    Tools,
    Resources,
    Prompts,
}

impl Changed {
    /// Every list.
    pub(crate) const ALL: [Changed; 3] = [Changed::Tools, Changed::Resources, Changed::Prompts];

    /// Tells one client; whether it could be told.
    pub(crate) async fn tell_peer(self, peer: &Peer<RoleServer>) -> bool {
        match self {
            Changed::Tools => peer.notify_tool_list_changed().await.is_ok(),
            Changed::Resources => peer.notify_resource_list_changed().await.is_ok(),
            Changed::Prompts => peer.notify_prompt_list_changed().await.is_ok(),
        }
    }
}
