//! Missing checkpoints as findings: a writer whose sink signs a tree checkpoint at least every
//! interval, even when nothing was written (a store's sink does: `capability-store`), leaves no
//! stretch longer than that without one, until it stops and says so (`stopped`). So a cut that
//! also removes every checkpoint after the cut point, which leaves a trail consistent in itself,
//! still leaves the time since the last checkpoint it kept unaccounted for.
//!
//! [`checkpoint_gaps`] reads each checkpoint's `time` extension line; a gap longer than twice
//! the interval plus [`SLACK`] (a busy machine, a slow commit) is a finding, naming the writer
//! and the span. What it cannot tell apart: a cut from a writer killed (or its host stopped)
//! without signing its `stopped` checkpoint; both are worth a look.

use std::collections::BTreeMap;
use std::time::Duration;

use super::note::SignedCheckpoint;
use super::stored::{checkpoint_stopped, checkpoint_time, checkpoint_writer};
use crate::checkpoint::ChainProblem;

/// What a gap may exceed twice the interval by before it is a finding.
pub const SLACK: Duration = Duration::from_secs(5);

/// The gaps in each writer's checkpoints (`every`: the interval its sink signs at when idle),
/// up to `now` (RFC 3339 UTC, as the trail's times) for a writer whose last checkpoint does not
/// say it stopped. Checkpoints without a readable time are passed over.
pub fn checkpoint_gaps(
    checkpoints: &[SignedCheckpoint],
    every: Duration,
    now: &str,
) -> BTreeMap<String, Vec<ChainProblem>> {
    // Saturating: an interval past what a `Duration` holds twice allows any gap.
    let allowed = every.saturating_mul(2).saturating_add(SLACK);
    let mut by_writer: BTreeMap<&str, Vec<(i64, &str, bool, u64)>> = BTreeMap::new();
    for checkpoint in checkpoints {
        let (Some(writer), Some(time)) =
            (checkpoint_writer(checkpoint), checkpoint_time(checkpoint))
        else {
            continue;
        };
        if let Some(at) = epoch_millis(time) {
            by_writer.entry(writer).or_default().push((
                at,
                time,
                checkpoint_stopped(checkpoint),
                checkpoint.head.size,
            ));
        }
    }
    let now_at = epoch_millis(now);
    let mut found = BTreeMap::new();
    for (writer, mut times) in by_writer {
        times.sort_unstable();
        let mut gaps = Vec::new();
        let mut gap = |from: (i64, &str, u64), to: (i64, &str)| {
            let span = u64::try_from(to.0 - from.0).unwrap_or(0);
            if Duration::from_millis(span) > allowed {
                gaps.push(ChainProblem::CheckpointGap {
                    writer: writer.to_owned(),
                    after: from.2,
                    from: from.1.to_owned(),
                    to: to.1.to_owned(),
                    seconds: span / 1000,
                    every: every.as_secs(),
                });
            }
        };
        for pair in times.windows(2) {
            // A writer that stopped and started again leaves a gap on purpose.
            if !pair[0].2 {
                gap((pair[0].0, pair[0].1, pair[0].3), (pair[1].0, pair[1].1));
            }
        }
        if let (Some(&(at, time, false, size)), Some(now_at)) = (times.last(), now_at) {
            gap((at, time, size), (now_at, now));
        }
        if !gaps.is_empty() {
            found.insert(writer.to_owned(), gaps);
        }
    }
    found
}

/// The spans of each writer's records that no checkpoint covers although the writer signs one
/// at least every `every` records: between two checkpoints' sizes, or after the last one up to
/// `records` (each writer's count), longer than twice `every`. Records appended after a
/// writer's last checkpoint by someone without its key (the hash chain needs none) are such a
/// span once there are more than that; fewer read as a writer killed before its next one.
pub fn uncovered_records(
    checkpoints: &[SignedCheckpoint],
    records: &BTreeMap<String, u64>,
    every: u64,
) -> BTreeMap<String, Vec<ChainProblem>> {
    let allowed = every.saturating_mul(2);
    let mut sizes: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for checkpoint in checkpoints {
        if let Some(writer) = checkpoint_writer(checkpoint) {
            sizes.entry(writer).or_default().push(checkpoint.head.size);
        }
    }
    let mut found = BTreeMap::new();
    for (writer, mut sizes) in sizes {
        sizes.push(0);
        sizes.push(records.get(writer).copied().unwrap_or(0));
        sizes.sort_unstable();
        sizes.dedup();
        let spans: Vec<ChainProblem> = (sizes.windows(2))
            .filter(|pair| pair[1] - pair[0] > allowed)
            .map(|pair| ChainProblem::UncoveredRecords {
                writer: writer.to_owned(),
                from: pair[0] + 1,
                to: pair[1],
                every,
            })
            .collect();
        if !spans.is_empty() {
            found.insert(writer.to_owned(), spans);
        }
    }
    found
}

/// Milliseconds since the Unix epoch of `YYYY-MM-DDTHH:MM:SS[.fff]Z`, the trail's times.
pub fn epoch_millis(time: &str) -> Option<i64> {
    let b = time.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0i64, |n, d| {
            d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
        })
    };
    let shape = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if !time.ends_with('Z') || shape.iter().any(|&(i, c)| b.get(i) != Some(&c)) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let millis = match b.get(19) {
        Some(b'.') => {
            let digits = &time[20..time.len() - 1];
            let n = num(20, digits.len().min(3))?;
            n * 10i64.pow(3 - digits.len().min(3) as u32)
        }
        _ => 0,
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trails_times_read_as_milliseconds_since_the_epoch() {
        assert_eq!(epoch_millis("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(epoch_millis("1970-01-02T00:00:01.5Z"), Some(86_401_500));
        assert_eq!(
            epoch_millis("2026-12-05T02:46:38.123Z"),
            Some(1_796_438_798_123)
        );
        assert_eq!(epoch_millis("2026-12-05 02:46:38Z"), None);
        assert_eq!(epoch_millis("2026-13-05T02:46:38Z"), None);
    }

    #[test]
    fn an_interval_past_what_a_duration_holds_twice_allows_any_gap_and_panics_nothing() {
        assert!(checkpoint_gaps(&[], Duration::MAX, "2026-12-05T02:46:38.123Z").is_empty());
    }
}
