//! Why a guard could not answer: its store failed, or a value in it could not be read.

use std::fmt;

/// A lease store or a result cache failed (unreachable, locked, a bad row), or the guard's own
/// record could not be written. The loop did not start: fall back to the pre-gathered path, as
/// on any degrade.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardError {
    /// Where: the store (`sqlite:/path`, `postgres://host/db`, `memory`) or `audit`.
    pub place: String,
    /// What failed.
    pub message: String,
}

impl GuardError {
    /// An error of `place`.
    pub fn new(place: impl Into<String>, message: impl Into<String>) -> Self {
        GuardError {
            place: place.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for GuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.message)
    }
}

impl std::error::Error for GuardError {}
