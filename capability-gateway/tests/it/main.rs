//! The engine's integration tests: embedding it as a library, a live fleet, and the receipts of
//! audited calls. One module per former test file
//! (`cargo test -p capability-gateway --test it <module>::`).

mod embed;
mod live;
mod receipts;
