//! The manifest rules' integration tests, through the facade: run-time manifests follow the
//! derive's rules, and provenance cannot be raised by editing data. One module per former test
//! file (`cargo test -p capability-rules --test it <module>::`).

mod provenance;
mod runtime_manifest;
