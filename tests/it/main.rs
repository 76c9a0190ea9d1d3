//! The facade's integration tests and the tests across crates, one module per former test file
//! (`cargo test -p capability --test it <module>::`). A crate's own tests are in its `tests/it`.
//! The registry's tests are a binary of their own (`tests/registry`): they assert on the whole
//! process-wide inventory, which every `#[derive(Capability)]` linked into the binary joins.

use capability_testkit::fixtures as common;

mod agent_loop_example;
mod architecture;
mod derive;
mod doc_links;
mod layout;
mod mcp_export;
mod mcp_meta;
mod method_table;
mod pinning;
mod readme_quickstart;
mod release_profile;
mod rmcp_server_example;
mod tiers;
