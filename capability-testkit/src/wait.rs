//! Waiting for something a test started to happen, without a fixed sleep.

use std::time::{Duration, Instant};

/// Polls `done` every 20 ms until it holds (`true`) or ten seconds pass (`false`).
pub fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
