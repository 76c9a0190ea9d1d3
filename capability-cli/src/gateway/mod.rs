//! `capability gateway`: many MCP servers, the policy's `[servers]`, behind one listing.
//!
//! This build has the configuration check (`--check`): every server of the fleet is started
//! (or reached) and listed, each tool shown under its server's prefix, and what each role
//! would see is printed, with every hidden tool's reasons and every name two servers' tools
//! would share. Serving the fleet to clients is not in this build: `capability proxy` serves one
//! server.

mod check;
mod fleet;

use std::io::Write;
use std::path::PathBuf;

pub use check::check;
pub use fleet::{FleetServer, ServerSource, read_fleet};

/// What `capability gateway` takes.
#[derive(clap::Args, Debug)]
pub struct GatewayArgs {
    /// The policy file (TOML): its `[servers]` are the fleet, its roles decide what each
    /// caller sees.
    #[arg(long, value_name = "FILE")]
    pub policy: PathBuf,
    /// Check the configuration: start and list every server, print what each role would see
    /// (exit 1 when tools of two servers would share a shown name), serve nothing.
    #[arg(long, required = true)]
    pub check: bool,
    /// Only this role (default: every role of the policy).
    #[arg(long)]
    pub role: Option<String>,
    /// Seconds to wait for each server to answer.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub timeout: u64,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// Why the gateway did not do what it was asked: bad input, a server that cannot be listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayError(pub String);

impl std::fmt::Display for GatewayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GatewayError {}

/// Runs `capability gateway`: the exit code (0 clean, 1 findings), or why it could not.
pub fn run(args: &GatewayArgs, out: &mut dyn Write) -> Result<u8, GatewayError> {
    check(args, out)
}
