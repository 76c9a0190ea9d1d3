//! Record times: the canonical text `YYYY-MM-DDTHH:MM:SS.mmmZ` to a `SystemTime` for the
//! `timestamptz` column, and the SQL that formats the column back to the same text.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Formats a `timestamptz` column `column` as the canonical text, in SQL.
pub(crate) fn sql_text(column: &str) -> String {
    format!("to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')")
}

/// The time a canonical text names, or `None` when the text is not canonical (then the column
/// cannot give it back byte for byte). Years 1970 to 9999.
pub(crate) fn parse(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() != 24 {
        return None;
    }
    let shape = b"dddd-dd-ddTdd:dd:dd.dddZ";
    for (c, s) in b.iter().zip(shape) {
        let ok = if *s == b'd' {
            c.is_ascii_digit()
        } else {
            c == s
        };
        if !ok {
            return None;
        }
    }
    let num = |from: usize, to: usize| {
        b[from..to]
            .iter()
            .fold(0u64, |n, c| n * 10 + u64::from(c - b'0'))
    };
    let (year, month, day) = (num(0, 4), num(5, 7), num(8, 10));
    let (hour, minute, second, milli) = (num(11, 13), num(14, 16), num(17, 19), num(20, 23));
    if year < 1970 || !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if day == 0 || day > days_in_month {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(milli))
}

/// Days since 1970-01-01 of a date from 1970 on (Howard Hinnant's algorithm).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_times_parse_and_others_do_not() {
        let t = parse("2026-03-01T12:34:56.789Z").expect("canonical");
        let since = t.duration_since(UNIX_EPOCH).expect("after the epoch");
        assert_eq!(since.as_millis(), 1_772_368_496_789);
        assert_eq!(
            parse("1970-01-01T00:00:00.000Z"),
            Some(UNIX_EPOCH),
            "the epoch"
        );
        assert!(parse("2024-02-29T00:00:00.000Z").is_some(), "a leap day");
        for bad in [
            "2023-02-29T00:00:00.000Z",
            "2026-13-01T00:00:00.000Z",
            "2026-01-01T24:00:00.000Z",
            "2026-01-01T00:00:00Z",
            "2026-01-01 00:00:00.000Z",
            "1969-12-31T23:59:59.999Z",
            "２026-01-01T00:00:00.000Z",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
