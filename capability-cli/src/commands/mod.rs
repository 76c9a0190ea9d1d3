//! One file per subcommand (`capability inspect`, `check`, `pin` and `verify` share
//! `source.rs` and `output.rs`).

pub mod approve;
pub mod audit;
pub mod gateway;
pub mod grant;
pub mod init;
pub mod proofs;
pub mod proposals;
pub mod proxy;
pub mod replay;
pub mod tools;
