//! [`Gone`]: why the server can no longer answer, set by the task that supervises it, and the
//! first call whose connection to it failed, for that task.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// How long a call whose connection to the server broke waits to learn why (the supervising
/// task reads the server's exit status), so the client's error can say it.
const WHY_WAIT: Duration = Duration::from_millis(500);

/// Why the server can no longer answer, once it is gone; set by the supervising task. And,
/// for the supervising task, the first call whose connection to the server failed.
#[derive(Clone, Debug)]
pub(crate) struct Gone {
    why: Arc<watch::Sender<Option<String>>>,
    broken: Arc<watch::Sender<Option<String>>>,
}

impl Default for Gone {
    fn default() -> Self {
        Gone {
            why: Arc::new(watch::Sender::new(None)),
            broken: Arc::new(watch::Sender::new(None)),
        }
    }
}

/// Keeps the first value sent.
fn first(sender: &watch::Sender<Option<String>>, value: String) {
    sender.send_if_modified(|slot| {
        let first = slot.is_none();
        slot.get_or_insert(value);
        first
    });
}

/// Waits up to `wait` (forever: `None`) for a value.
async fn wait_for(
    sender: &watch::Sender<Option<String>>,
    wait: Option<Duration>,
) -> Option<String> {
    let mut watching = sender.subscribe();
    let known = watching.wait_for(Option::is_some);
    let known = match wait {
        Some(wait) => tokio::time::timeout(wait, known).await.ok()?,
        None => known.await,
    };
    known.ok().and_then(|why| why.clone())
}

impl Gone {
    pub(crate) fn set(&self, why: String) {
        first(&self.why, why);
    }

    /// Why, waiting up to [`WHY_WAIT`] for it.
    pub(super) async fn why(&self) -> Option<String> {
        wait_for(&self.why, Some(WHY_WAIT)).await
    }

    /// A call's connection to the server failed.
    pub(super) fn broke(&self, error: String) {
        first(&self.broken, error);
    }

    /// Resolves with the error of the first call whose connection to the server failed.
    pub(crate) async fn broken(&self) -> String {
        match wait_for(&self.broken, None).await {
            Some(error) => error,
            None => std::future::pending().await,
        }
    }
}
