//! Time for the gate: seconds since the Unix epoch, from a clock that tests can replace.

use std::time::{SystemTime, UNIX_EPOCH};

/// A clock in seconds since the Unix epoch.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> u64;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// How far back the clock may step (NTP corrections) before the gate refuses to decide.
pub const CLOCK_TOLERANCE_SECS: u64 = 5;
