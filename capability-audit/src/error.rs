//! An audit trail that could not be written or read.

use std::fmt;

use crate::*;

/// An audit trail that could not be written or read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditError {
    /// The file could not be opened or written to record (full disk, read-only file, ...).
    Io {
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// A trail could not be opened or read to be verified or counted (a missing file, no
    /// permission): nothing was written.
    Unread {
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// An existing trail is broken: appending to it is refused.
    Broken {
        /// The file.
        path: String,
        /// Where it broke.
        problem: TrailProblem,
    },
    /// A database sink could not be reached or refused a write.
    Store {
        /// Which store (`sqlite:/path`, `postgres://host/db` without credentials).
        store: String,
        /// What went wrong.
        message: String,
    },
    /// The sink has no digest key (none configured, and no randomness for one): no record can
    /// be made without exposing the values the key protects.
    DigestKey(KeyError),
    /// A record cannot be made as asked: a call's (an incident id longer than a record
    /// stores: the call is refused rather than recorded with something cut off), or a line
    /// that is not this writer's to store (a cosigned checkpoint of another log).
    InvalidRecord {
        /// What cannot be recorded, and why (the whole sentence).
        message: String,
    },
}

impl fmt::Display for AuditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditError::Io { path, message } => {
                write!(f, "cannot write the audit trail {path}: {message}")
            }
            AuditError::Unread { path, message } => {
                write!(f, "cannot read the audit trail {path}: {message}")
            }
            AuditError::Broken { path, problem } => write!(
                f,
                "the audit trail {path} is broken ({problem}); verify it with `capability audit \
                 verify` and start a new file"
            ),
            AuditError::Store { store, message } => {
                write!(f, "cannot write the audit trail in {store}: {message}")
            }
            AuditError::DigestKey(error) => {
                write!(f, "the audit trail has no digest key: {error}")
            }
            AuditError::InvalidRecord { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for AuditError {}
