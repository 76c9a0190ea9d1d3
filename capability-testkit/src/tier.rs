//! Which tier of `.ci/tiers` a test runs in, so that a test needing more than Rust cannot run
//! unnoticed in the default tier: `.ci/interop-tests` is kept by hand, and this is what checks it.
//!
//! `.ci/tiers default` sets [`TIER_ENV`] to `default`; there, what installs or starts Node.js
//! packages (the reference servers, the SDK clients, the conformance suite, Chromium's driver),
//! the Python SDK's environment or Prometheus refuses with [`interop_only`]'s reason, and the
//! test fails (or says SKIPPED, when nothing is required), naming the list to add it to.

/// The variable `.ci/tiers` sets to the tier it runs: `default` or `interop`.
pub const TIER_ENV: &str = "CAPABILITY_TIER";

/// `Err` with what to do when the test runs in the default tier and wants `what` (which only
/// the interop tier provides); `Ok` in the interop tier and outside `.ci/tiers`.
pub fn interop_only(what: &str) -> Result<(), String> {
    match std::env::var(TIER_ENV) {
        Ok(tier) if tier.trim() == "default" => Err(format!(
            "this test needs {what}, which only the interop tier provides, and runs in the \
             default tier ({TIER_ENV}=default, `.ci/tiers default`): name it in \
             .ci/interop-tests"
        )),
        _ => Ok(()),
    }
}
