//! Why a tool list could not be pinned.

use std::fmt;

use capability_core::manifest::ManifestError;

/// Why [`Lockfile::pin`](super::Lockfile::pin) refused a tool list. Nothing is pinned then.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PinError {
    /// The server's name is not a provider name (1 to 64 characters of `A-Z a-z 0-9 _ - .`), so
    /// it could not be written as a lockfile key that reads back.
    ServerName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// A tool of the list is not a valid MCP tool; the error names it.
    Tool(ManifestError),
    /// A re-pin of a tool the lockfile does not pin: pin the server first.
    NotPinned {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
    },
}

impl fmt::Display for PinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinError::ServerName { name, message } => {
                write!(f, "cannot pin server {name:?}: {message}")
            }
            PinError::Tool(error) => write!(f, "{error}"),
            PinError::NotPinned { server, tool } => write!(
                f,
                "cannot re-pin `{server}/{tool}`: the lockfile does not pin it; pin the server \
                 with `capability pin` first"
            ),
        }
    }
}

impl std::error::Error for PinError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PinError::Tool(error) => Some(error),
            PinError::ServerName { .. } | PinError::NotPinned { .. } => None,
        }
    }
}

impl From<ManifestError> for PinError {
    fn from(error: ManifestError) -> Self {
        PinError::Tool(error)
    }
}
