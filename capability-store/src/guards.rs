//! What the SQLite and PostgreSQL stores of the agent loop's guards share: times as the
//! databases' 64-bit integers, and their errors as the guard's.

use capability_agent::guard::GuardError;
use capability_gate::StoreError;

/// Milliseconds as an i64 column (SQLite INTEGER, PostgreSQL BIGINT): later than that is
/// "never".
pub(crate) fn ms(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A column read back: a negative value (an edited row) is 0, the past.
pub(crate) fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

pub(crate) fn guard_error(error: StoreError) -> GuardError {
    GuardError::new(error.store, error.message)
}
