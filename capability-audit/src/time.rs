//! Timestamps of records: UTC, to the millisecond, formatted by the `time` crate.

use std::num::NonZeroU8;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;
use time::format_description::well_known::Iso8601;
use time::format_description::well_known::iso8601::{Config, EncodedConfig, TimePrecision};

/// ISO 8601 as records write it: `YYYY-MM-DDTHH:MM:SS.mmmZ` (the milliseconds truncated, never
/// rounded up into the next second).
const RECORD_TIME: EncodedConfig = Config::DEFAULT
    .set_time_precision(TimePrecision::Second {
        decimal_digits: NonZeroU8::new(3),
    })
    .encode();

/// The latest time the format can hold, written when the clock is past it.
const LATEST: &str = "9999-12-31T23:59:59.999Z";

/// The current time, UTC, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn utc_now() -> String {
    // A clock set before 1970 gives the epoch, as it always has.
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    format_utc(since.as_secs(), since.subsec_millis())
}

/// [`utc_now`], but never `previous`: within the millisecond of `previous`, the next one
/// (waited for: at most a millisecond). A writer gives its checkpoints times this way, so two of
/// them of one size (the last on its record count and the `stopped` one as it closes) never
/// share their time, which a store keeps unique per writer and size.
pub fn utc_now_after(previous: Option<&str>) -> String {
    loop {
        let now = utc_now();
        if previous != Some(now.as_str()) {
            return now;
        }
        std::thread::yield_now();
    }
}

/// A Unix time in seconds, UTC, as records write times (`YYYY-MM-DDTHH:MM:SS.000Z`).
pub fn utc_at(secs: u64) -> String {
    format_utc(secs, 0)
}

fn format_utc(secs: u64, millis: u32) -> String {
    let nanos = i128::from(secs) * 1_000_000_000 + i128::from(millis.min(999)) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|time| time.format(&Iso8601::<RECORD_TIME>).ok())
        .unwrap_or_else(|| LATEST.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting() {
        assert_eq!(format_utc(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_utc(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(format_utc(1_795_999_999, 999), "2026-11-30T00:53:19.999Z");
        assert_eq!(format_utc(4_102_444_800, 0), "2100-01-01T00:00:00.000Z");
    }

    #[test]
    fn leap_days_and_the_edges_of_the_format() {
        // 1900 and 2100 are not leap years; 2000 and 2024 are.
        assert_eq!(format_utc(951_868_799, 999), "2000-02-29T23:59:59.999Z");
        assert_eq!(format_utc(1_709_164_800, 0), "2024-02-29T00:00:00.000Z");
        assert_eq!(format_utc(4_107_542_400, 0), "2100-03-01T00:00:00.000Z");
        assert_eq!(format_utc(253_402_300_799, 999), LATEST);
        // Past year 9999 (or a nonsense clock): the latest time, not a panic or a longer text.
        assert_eq!(format_utc(253_402_300_800, 0), LATEST);
        assert_eq!(format_utc(u64::MAX, 999), LATEST);
        assert_eq!(format_utc(0, 5_000), "1970-01-01T00:00:00.999Z");
        let now = utc_now();
        assert_eq!(now.len(), LATEST.len(), "{now}");
        assert!(now.as_str() > "2025" && now.ends_with('Z'), "{now}");
    }
}
