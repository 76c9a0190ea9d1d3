//! The lane's calls still ending, counted: the gateway closes its trail only once none is.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A count of the lane's calls not ended yet, and a way to wait for none.
#[derive(Default)]
pub(crate) struct Open {
    count: Mutex<usize>,
    none: Condvar,
}

/// One call counted in [`Open`] until this is dropped (at the end of the call's end, or with
/// the call when its end never runs).
pub(crate) struct OpenCall(Arc<Open>);

impl Open {
    pub(crate) fn enter(self: &Arc<Self>) -> OpenCall {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        OpenCall(self.clone())
    }

    /// Waits until no call is open, or `within` has passed: how many are still open.
    pub(crate) fn wait(&self, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        let mut count = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        while *count > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            count = self
                .none
                .wait_timeout(count, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *count
    }
}

impl Drop for OpenCall {
    fn drop(&mut self) {
        let mut count = self.0.count.lock().unwrap_or_else(PoisonError::into_inner);
        *count = count.saturating_sub(1);
        if *count == 0 {
            self.0.none.notify_all();
        }
    }
}
