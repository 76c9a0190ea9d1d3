//! Wall-clock time for leases and cache entries, in milliseconds since the Unix epoch: shared
//! by processes (and hosts), so not the monotonic clock of the breaker. Tests use a fake one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use capability_core::clock as core;

/// Where a guard reads the time.
pub trait WallClock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system's clock. Replicas on several hosts need clocks that agree to well within the
/// lease's TTL (NTP does).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// Milliseconds of a [`capability_core::clock`] clock's wall-clock time (0 before 1970).
fn core_ms(clock: &(impl core::Clock + ?Sized)) -> u64 {
    clock
        .now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The one clock of the workspace ([`capability_core::clock`]) is a guard's clock too: one
/// [`ManualClock`](capability_core::clock::ManualClock) drives the guards, the gate and the HTTP
/// edge in a test.
impl WallClock for core::ManualClock {
    fn now_ms(&self) -> u64 {
        core_ms(self)
    }
}

impl WallClock for core::SystemClock {
    fn now_ms(&self) -> u64 {
        core_ms(self)
    }
}

/// A shared clock ([`SharedClock`](capability_core::clock::SharedClock), or an `Arc` of one).
impl<C: core::Clock + ?Sized> WallClock for Arc<C> {
    fn now_ms(&self) -> u64 {
        core_ms(&**self)
    }
}

/// A clock that moves only when told to.
///
/// ```
/// use std::time::Duration;
/// use capability_agent::guard::{FakeWallClock, WallClock};
///
/// let clock = FakeWallClock::at(1_000);
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.now_ms(), 3_000);
/// ```
#[derive(Debug, Default)]
pub struct FakeWallClock {
    now: AtomicU64,
}

impl FakeWallClock {
    /// A clock reading `ms`.
    pub fn at(ms: u64) -> Self {
        FakeWallClock {
            now: AtomicU64::new(ms),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.now.fetch_add(by, Ordering::SeqCst);
    }
}

impl WallClock for FakeWallClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}
