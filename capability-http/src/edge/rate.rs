//! A rate limit per principal: a token bucket of `burst` requests, refilled at `per_second`.
//! Beyond it a request is answered `429` with how long to wait (`Retry-After`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use capability_core::clock::SharedClock;

/// Buckets kept before the full ones are forgotten (a full bucket is the same as none).
const FORGET_ABOVE: usize = 10_000;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// The rate limits of one edge.
#[derive(Debug)]
pub(crate) struct RateLimits {
    buckets: std::sync::Arc<Mutex<HashMap<String, Bucket>>>,
    per_second: f64,
    burst: f64,
    /// Where the buckets' refills are timed.
    clock: SharedClock,
}

impl RateLimits {
    pub(crate) fn new(per_second: u32, burst: u32, clock: SharedClock) -> Self {
        RateLimits {
            buckets: std::sync::Arc::default(),
            per_second: f64::from(per_second.max(1)),
            burst: f64::from(burst.max(1)),
            clock,
        }
    }

    /// The same buckets under a new rate and burst (a bucket over the new burst is cut to it
    /// at its next request).
    pub(crate) fn with_limits(&self, per_second: u32, burst: u32) -> Self {
        RateLimits {
            buckets: std::sync::Arc::clone(&self.buckets),
            per_second: f64::from(per_second.max(1)),
            burst: f64::from(burst.max(1)),
            clock: std::sync::Arc::clone(&self.clock),
        }
    }

    /// Takes one request of `principal`'s budget, or says how long until there is one.
    pub(crate) fn take(&self, principal: &str) -> Result<(), Duration> {
        let now: Instant = self.clock.instant();
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() > FORGET_ABOVE {
            let (rate, burst) = (self.per_second, self.burst);
            buckets.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.updated).as_secs_f64() * rate < burst
            });
        }
        let bucket = buckets.entry(principal.to_owned()).or_insert(Bucket {
            tokens: self.burst,
            updated: now,
        });
        let refilled =
            now.saturating_duration_since(bucket.updated).as_secs_f64() * self.per_second;
        bucket.tokens = (bucket.tokens + refilled).min(self.burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                (1.0 - bucket.tokens) / self.per_second,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capability_core::clock::{ManualClock, SystemClock};

    #[test]
    fn a_burst_then_the_rate_and_principals_apart() {
        let clock = std::sync::Arc::new(ManualClock::new());
        let limits = RateLimits::new(1, 3, clock.clone());
        for _ in 0..3 {
            assert!(limits.take("alice").is_ok());
        }
        let wait = limits.take("alice").expect_err("over the burst");
        assert_eq!(wait, Duration::from_secs(1));
        clock.advance(Duration::from_millis(600));
        let wait = limits.take("alice").expect_err("not refilled yet");
        assert!(
            wait > Duration::from_millis(399) && wait <= Duration::from_millis(400),
            "{wait:?}"
        );
        clock.advance(Duration::from_millis(401));
        assert!(
            limits.take("alice").is_ok(),
            "one token back after a second"
        );
        clock.advance(Duration::from_secs(3_600));
        for _ in 0..3 {
            assert!(limits.take("alice").is_ok(), "refilled up to the burst");
        }
        assert!(limits.take("alice").is_err(), "and no further");
        assert!(
            limits.take("bob").is_ok(),
            "one principal's use is not another's"
        );
    }

    #[test]
    fn new_limits_keep_what_each_principal_spent() {
        let before = RateLimits::new(1, 3, SystemClock::shared());
        for _ in 0..3 {
            assert!(before.take("alice").is_ok());
        }
        let after = before.with_limits(1, 5);
        assert!(
            after.take("alice").is_err(),
            "a reload gives no one a fresh budget"
        );
        let lowered = before.with_limits(1, 1);
        assert!(lowered.take("bob").is_ok());
        assert!(lowered.take("bob").is_err(), "the new burst holds");
    }
}
