//! The gated write path's integration tests, through the facade: proposals and approvals, the
//! attacks on them, authority grants, and the advisor seals checked again at run time. One module
//! per former test file (`cargo test -p capability-gate --test it <module>::`).

use capability_testkit::fixtures as common;

mod advisor_seals;
mod grants;
mod write_gate;
