//! The core's integration tests, through the facade: the role permission matrix and the one
//! decision function, and a registry refused with every problem named. One module per former
//! test file (`cargo test -p capability-core --test it <module>::`).
//!
//! `registry_errors` asserts on the whole process-wide inventory: no other module here may derive
//! a tool or an agent that the registry would refuse (a second `export` or `twin`, a lying tool,
//! an advisor binding a mutating tool). The registry's other tests are binaries of the facade.

use capability_testkit::fixtures as common;

mod policy;
mod registry_errors;
