//! The subcommands that have a file of their own.

pub mod proxy;
