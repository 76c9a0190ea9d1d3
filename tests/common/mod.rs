//! The shared helpers moved to `capability_testkit::fixtures`: this re-export keeps `mod common;`
//! working until the root's tests are modules of `tests/it` (to be removed then).

#![allow(unused_imports)]

pub use capability_testkit::fixtures::*;
