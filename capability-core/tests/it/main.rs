//! The core's integration tests, through the facade: the role permission matrix and the one
//! decision function. One module per former test file
//! (`cargo test -p capability-core --test it <module>::`).

use capability_testkit::fixtures as common;

mod policy;
