//! The macros' integration tests, through the facade (generated code names `::capability`):
//! manifests as the derive builds them and the descriptor hash. One module per former test file
//! (`cargo test -p capability-derive --test it <module>::`). The compile errors are checked by the
//! UI cases of `ui-tests/` (`capability-ui-tests`).

mod descriptor_hash;
mod manifest;
