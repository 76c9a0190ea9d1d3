//! The engine's integration tests: embedding it as a library, and a live fleet. One module per
//! former test file (`cargo test -p capability-gateway --test it <module>::`).

mod embed;
mod live;
