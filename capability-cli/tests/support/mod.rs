//! The reference servers moved to `capability_testkit::servers`: this re-export keeps
//! `mod support;` working for test files that are not yet modules of `tests/it` (to be removed
//! then).

#![allow(unused_imports)]

pub use capability_testkit::servers::*;

/// `capability_testkit::require_servers!`, for test files at a crate root.
#[macro_export]
macro_rules! require_servers {
    ($name:expr) => {
        $crate::require_servers!($name, ())
    };
    ($name:expr, $skipped:expr) => {
        match $crate::support::require_servers($name) {
            ::std::option::Option::Some(servers) => servers,
            ::std::option::Option::None => return $skipped,
        }
    };
}
