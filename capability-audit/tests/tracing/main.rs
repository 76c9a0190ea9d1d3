//! The audit trail as `tracing` sees it: every record an event, every audited call an
//! OpenTelemetry span. A binary of their own: tracing caches each call site's interest globally,
//! so events hit by other tests' threads before a test's subscriber is installed could switch a
//! call site off for it; here every test installs its subscriber before it records anything.
//! One module per former test file (`cargo test -p capability-audit --test tracing <module>::`).

use capability_testkit::fixtures as common;

mod audit_otel;
mod audit_tracing;
