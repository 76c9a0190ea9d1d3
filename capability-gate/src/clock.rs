//! Time for the gate: seconds since the Unix epoch, from a clock that tests can replace.
//!
//! Every clock of [`capability_core::clock`] is one for the gate too, so one clock (a
//! [`ManualClock`](capability_core::clock::ManualClock) in a test) drives the gate, the HTTP
//! edge and the agent loop's guards together.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use capability_core::clock as core;

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

impl Clock for core::SystemClock {
    fn now(&self) -> u64 {
        core::Clock::unix_secs(self)
    }
}

impl Clock for core::ManualClock {
    fn now(&self) -> u64 {
        core::Clock::unix_secs(self)
    }
}

/// A shared clock ([`SharedClock`](capability_core::clock::SharedClock), or an `Arc` of one).
impl<C: core::Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> u64 {
        core::Clock::unix_secs(&**self)
    }
}

/// How far back the clock may step (NTP corrections) before the gate refuses to decide.
pub const CLOCK_TOLERANCE_SECS: u64 = 5;
