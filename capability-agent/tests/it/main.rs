//! The agent loop's integration tests: the driver, its guards and circuit breaker, the fleet, the
//! trail, shadow mode and the providers' formats. One module per former test file
//! (`cargo test -p capability-agent --test it <module>::`); `loop_support` is what they share.

mod loop_support;

mod breaker_circuit;
mod http_models;
mod loop_driver;
mod loop_fleet;
mod loop_guard;
mod loop_trail;
mod loop_visibility_prop;
mod provider_fixtures;
mod provider_malformed;
mod provider_visibility;
mod shadow_mode;
