//! The MCP side's integration tests: the method table, listings and visibility, the governed
//! client and server over rmcp, pinning and drift, the descriptor scan, and `#[tool_capabilities]`
//! on a real rmcp router. One module per former test file
//! (`cargo test -p capability-mcp --test it <module>::`). `tests/rmcp_server_telemetry.rs` stays a
//! binary of its own: it installs a global `tracing` subscriber and a global `Telemetry`, once per
//! process, and asserts on everything they record.

mod by_table;
mod cisco_yara;
mod drift;
mod fleet_listing;
mod rmcp_governed;
mod rmcp_server_bearer;
mod rmcp_server_governed;
mod rmcp_server_items;
mod router_manifests;
mod scan;
