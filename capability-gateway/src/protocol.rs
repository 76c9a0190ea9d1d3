//! The protocol revisions the proxy speaks to a server: 2026-07-28 first (`server/discover`),
//! 2025-11-25 for a server that does not know it.

use ::rmcp::model::ProtocolVersion;
use ::rmcp::service::ClientLifecycleMode;

/// How a connection to the server starts.
pub(crate) fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}
