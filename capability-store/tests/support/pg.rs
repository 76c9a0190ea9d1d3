//! The throwaway PostgreSQL moved to `capability_testkit::pg`: this re-export keeps the test
//! files that include it working until they are modules of `tests/it` (to be removed then).

#![allow(unused_imports)]

pub use capability_testkit::pg::*;
