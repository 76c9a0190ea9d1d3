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

    /// Waits until no call is open, or `within` has passed (a `within` past what the clock
    /// can hold, such as `Duration::MAX`, is no bound): how many are still open.
    pub(crate) fn wait(&self, within: Duration) -> usize {
        let deadline = Instant::now().checked_add(within);
        let mut count = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        while *count > 0 {
            count = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    self.none
                        .wait_timeout(count, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self
                    .none
                    .wait(count)
                    .unwrap_or_else(PoisonError::into_inner),
            };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_the_clock_cannot_hold_waits_for_the_last_call_and_does_not_panic() {
        let open = Arc::new(Open::default());
        assert_eq!(open.wait(Duration::MAX), 0, "nothing open: no wait");
        let call = open.enter();
        let ended = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(call);
        });
        assert_eq!(open.wait(Duration::MAX), 0, "waited until the call ended");
        ended.join().expect("the call's thread");
    }

    #[test]
    fn a_call_that_does_not_end_is_counted_once_the_bound_has_passed() {
        let open = Arc::new(Open::default());
        let _call = open.enter();
        let _other = open.enter();
        let started = Instant::now();
        assert_eq!(open.wait(Duration::from_millis(50)), 2);
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(
            open.wait(Duration::ZERO),
            2,
            "a bound of zero does not wait"
        );
    }
}
