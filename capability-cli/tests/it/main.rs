//! The command line's integration tests, against the built `capability` binary and the real
//! servers (the MCP reference servers, the SDK clients, PostgreSQL, Prometheus, Chromium: see
//! `capability_testkit`). One module per former test file
//! (`cargo test -p capability-cli --test it <module>::`); `proxy_common` is what the proxy and
//! gateway tests share, `support` the kit's servers.

// `require_servers!`.
#[macro_use]
extern crate capability_testkit;

use capability_testkit::servers as support;

mod proxy_common;

mod approvals_page;
mod audit_proofs;
mod audit_rotate;
mod audit_trees;
mod audit_witness;
mod audit_witnessed;
mod cli;
mod cli_hygiene;
mod conformance;
mod edge_hostile;
mod gateway;
mod gateway_approvals;
mod gateway_bridge_lane;
mod gateway_drift_review;
mod gateway_example;
mod gateway_fast;
mod gateway_headers;
mod gateway_http_lane;
mod gateway_http_restart;
mod gateway_items;
mod gateway_json_texts;
mod gateway_methods;
mod gateway_metrics;
mod governed;
mod init;
mod otlp;
mod pg_verify;
mod pin_review;
mod proxy_drift;
mod proxy_faults;
mod proxy_forward;
mod proxy_http;
mod proxy_oauth;
mod proxy_revisions;
mod proxy_server_requests;
mod proxy_stdio;
mod proxy_trail;
mod receipts;
mod reference;
mod tool_versions;
mod trails;
mod witness_feed;
