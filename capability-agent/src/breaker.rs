//! The circuit breaker of each model provider: a failing provider is not hammered.
//!
//! `threshold` consecutive failed turns of one provider (keyed by [`Model::provider`]) open its
//! breaker for `cooldown`. While it is open, a loop over that provider degrades at once, without
//! calling the model. Once the cool-down has passed, one turn is let through as a probe
//! (half-open): a success closes the breaker, a failure opens it for another cool-down. A probe
//! that never reports (its loop panicked) is given up after a further cool-down, and another
//! probe is let through.
//!
//! One [`Breaker`] is shared by every loop of a process (`Arc<Breaker>`; it is thread-safe).
//! Time comes from a [`Clock`], so tests use a fake one.
//!
//! ```
//! use std::time::Duration;
//! use capability_agent::breaker::Breaker;
//!
//! let breaker = Breaker::new(2, Duration::from_secs(30));
//! assert!(breaker.admit("ollama").is_ok());
//! breaker.failure("ollama");
//! breaker.failure("ollama");
//! assert!(breaker.admit("ollama").is_err(), "open: the loop degrades at once");
//! assert!(breaker.admit("anthropic").is_ok(), "one breaker per provider");
//! ```
//!
//! [`Model::provider`]: crate::model::Model::provider

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Where the breaker reads the time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Instant;
}

/// The system's monotonic clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// The monotonic time of the workspace's clocks ([`capability_core::clock`]): one
/// [`ManualClock`](capability_core::clock::ManualClock) drives the breaker with the rest.
impl Clock for capability_core::clock::ManualClock {
    fn now(&self) -> Instant {
        capability_core::clock::Clock::instant(self)
    }
}

impl Clock for capability_core::clock::SystemClock {
    fn now(&self) -> Instant {
        capability_core::clock::Clock::instant(self)
    }
}

/// A shared clock ([`SharedClock`](capability_core::clock::SharedClock), or an `Arc` of one).
impl<C: capability_core::clock::Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Instant {
        capability_core::clock::Clock::instant(&**self)
    }
}

/// A clock that moves only when told to: for tests.
#[derive(Debug)]
pub struct FakeClock {
    start: Instant,
    elapsed: Mutex<Duration>,
}

impl Default for FakeClock {
    fn default() -> Self {
        FakeClock::new()
    }
}

impl FakeClock {
    /// A clock standing at the moment it is made.
    pub fn new() -> Self {
        FakeClock {
            start: Instant::now(),
            elapsed: Mutex::new(Duration::ZERO),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut elapsed = self.elapsed.lock().unwrap_or_else(PoisonError::into_inner);
        *elapsed = elapsed.saturating_add(by);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        let elapsed = *self.elapsed.lock().unwrap_or_else(PoisonError::into_inner);
        self.start.checked_add(elapsed).unwrap_or(self.start)
    }
}

/// The state of one provider's breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Turns go through; `failures` consecutive ones failed so far.
    Closed {
        /// Consecutive failures.
        failures: u32,
    },
    /// Turns are refused until `until`.
    Open {
        /// The end of the cool-down.
        until: Instant,
    },
    /// One probe turn is under way since `since`; other turns are refused.
    HalfOpen {
        /// When the probe was let through.
        since: Instant,
    },
}

/// The circuit breakers of every provider, shared between loops.
pub struct Breaker {
    threshold: u32,
    cooldown: Duration,
    clock: Arc<dyn Clock>,
    states: Mutex<HashMap<String, BreakerState>>,
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("threshold", &self.threshold)
            .field("cooldown", &self.cooldown)
            .finish_non_exhaustive()
    }
}

impl Default for Breaker {
    /// Five consecutive failures open a breaker for thirty seconds.
    fn default() -> Self {
        Breaker::new(5, Duration::from_secs(30))
    }
}

impl Breaker {
    /// Breakers that open after `threshold` consecutive failures (at least 1) for `cooldown`,
    /// on the system clock.
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Breaker {
            threshold: threshold.max(1),
            cooldown,
            clock: Arc::new(SystemClock),
            states: Mutex::new(HashMap::new()),
        }
    }

    /// The same breakers on another clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The state of `provider`'s breaker (closed, with no failure, when it has none yet).
    pub fn state(&self, provider: &str) -> BreakerState {
        self.lock()
            .get(provider)
            .copied()
            .unwrap_or(BreakerState::Closed { failures: 0 })
    }

    /// May a turn of `provider` go ahead? `Err` carries the moment the breaker lets a probe
    /// through again. After the cool-down, the first caller is let through as the probe.
    pub fn admit(&self, provider: &str) -> Result<(), Instant> {
        let now = self.clock.now();
        let mut states = self.lock();
        let state = states
            .entry(provider.to_owned())
            .or_insert(BreakerState::Closed { failures: 0 });
        match *state {
            BreakerState::Closed { .. } => Ok(()),
            BreakerState::Open { until } if now < until => Err(until),
            BreakerState::HalfOpen { since } => match since.checked_add(self.cooldown) {
                Some(until) if now < until => Err(until),
                // The probe never reported: let another one through.
                _ => {
                    *state = BreakerState::HalfOpen { since: now };
                    Ok(())
                }
            },
            BreakerState::Open { .. } => {
                *state = BreakerState::HalfOpen { since: now };
                Ok(())
            }
        }
    }

    /// A turn of `provider` succeeded: its breaker closes.
    pub fn success(&self, provider: &str) {
        self.lock()
            .insert(provider.to_owned(), BreakerState::Closed { failures: 0 });
    }

    /// A turn of `provider` failed: one more consecutive failure; at the threshold, or when the
    /// turn was the half-open probe, the breaker opens for the cool-down.
    pub fn failure(&self, provider: &str) {
        let now = self.clock.now();
        let until = now.checked_add(self.cooldown).unwrap_or(now);
        let mut states = self.lock();
        let state = states
            .entry(provider.to_owned())
            .or_insert(BreakerState::Closed { failures: 0 });
        *state = match *state {
            BreakerState::Closed { failures } if failures.saturating_add(1) < self.threshold => {
                BreakerState::Closed {
                    failures: failures + 1,
                }
            }
            _ => BreakerState::Open { until },
        };
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, BreakerState>> {
        self.states.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
