//! Where the runtime reads the time: a [`Clock`] it is given, the [`SystemClock`] unless told
//! otherwise, so a test moves a [`ManualClock`] past an expiry instead of sleeping until it.
//!
//! A clock answers two questions. [`Clock::now`] is the wall-clock time, for times someone else
//! wrote down (a token's `exp`, an approval's expiry): it can step when the system's clock is
//! set. [`Clock::instant`] is monotonic, for durations this process measures itself (how long
//! a session sat idle, how full a rate bucket is again): it never goes back.
//!
//! The one clock of the workspace: the HTTP edge reads it (`EdgeConfig::clock`,
//! `JwtAuth::discover_with_clock` in `capability-http`), and the write gate (`WriteGate::clock`)
//! and the agent loop's guards and breaker (`LoopGuard::clock`, `Breaker::with_clock`) take it
//! for their own clock traits, so one [`ManualClock`] drives them all in a test.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use capability_core::clock::{Clock, ManualClock, SharedClock};
//!
//! let manual = Arc::new(ManualClock::new());
//! let clock: SharedClock = manual.clone();
//! let (wall, mono) = (clock.now(), clock.instant());
//! manual.advance(Duration::from_secs(3_600));
//! assert_eq!(clock.now().duration_since(wall).ok(), Some(Duration::from_secs(3_600)));
//! assert_eq!(clock.instant() - mono, Duration::from_secs(3_600));
//! ```

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where time is read.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The wall-clock time: for times written elsewhere (a token's `exp`, an approval's
    /// expiry).
    fn now(&self) -> SystemTime;

    /// The monotonic time: for durations measured here (an idle session, a rate bucket).
    fn instant(&self) -> Instant;

    /// [`now`](Clock::now) in whole seconds since the Unix epoch (0 for a clock set before
    /// 1970), as JWTs and approvals write their times.
    fn unix_secs(&self) -> u64 {
        self.now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// A clock as the runtime holds it: shared by everything that reads it.
pub type SharedClock = Arc<dyn Clock>;

/// The system's clocks: [`SystemTime::now`] and [`Instant::now`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl SystemClock {
    /// The system clock, shared.
    pub fn shared() -> SharedClock {
        Arc::new(SystemClock)
    }
}

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn instant(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told to ([`advance`](ManualClock::advance)): for tests. Both of
/// its times move together.
#[derive(Debug)]
pub struct ManualClock {
    wall: SystemTime,
    start: Instant,
    elapsed: Mutex<Duration>,
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl ManualClock {
    /// A clock standing at the moment it is made.
    pub fn new() -> Self {
        ManualClock::at(SystemTime::now())
    }

    /// A clock whose wall-clock time stands at `wall`.
    pub fn at(wall: SystemTime) -> Self {
        ManualClock {
            wall,
            start: Instant::now(),
            elapsed: Mutex::new(Duration::ZERO),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut elapsed = self.elapsed.lock().unwrap_or_else(PoisonError::into_inner);
        *elapsed = elapsed.saturating_add(by);
    }

    fn elapsed(&self) -> Duration {
        *self.elapsed.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        let elapsed = self.elapsed();
        self.wall.checked_add(elapsed).unwrap_or(self.wall)
    }

    fn instant(&self) -> Instant {
        let elapsed = self.elapsed();
        self.start.checked_add(elapsed).unwrap_or(self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_stands_still_until_advanced() {
        let clock = ManualClock::at(UNIX_EPOCH + Duration::from_secs(1_000));
        let before = clock.instant();
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(clock.instant(), before, "real time does not move it");
        assert_eq!(clock.unix_secs(), 1_000);
        clock.advance(Duration::from_millis(1_500));
        assert_eq!(clock.unix_secs(), 1_001);
        assert_eq!(clock.instant() - before, Duration::from_millis(1_500));
    }

    #[test]
    fn the_system_clock_is_the_systems() {
        let before = SystemTime::now();
        let read = SystemClock.now();
        assert!(read >= before);
        assert!(SystemClock.unix_secs() >= 1_700_000_000);
        assert_eq!(
            ManualClock::at(UNIX_EPOCH - Duration::from_secs(5)).unix_secs(),
            0,
            "before 1970: 0"
        );
    }
}
