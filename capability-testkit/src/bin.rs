//! A harness that runs the `capability` binary.
//!
//! Cargo sets `CARGO_BIN_EXE_capability` only when it builds `capability-cli`'s own tests and
//! benchmarks, so the caller passes the path in: `Binary::new(env!("CARGO_BIN_EXE_capability"))`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `capability` binary.
#[derive(Debug, Clone)]
pub struct Binary(PathBuf);

impl Binary {
    /// The binary at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Binary {
        Binary(path.into())
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A [`Command`] running it with `args` in `dir`, without colours.
    pub fn command(&self, dir: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(&self.0);
        command.args(args).current_dir(dir).env("NO_COLOR", "1");
        command
    }

    /// Runs it with `args` in `dir`, without colours, and waits for its output.
    pub fn run(&self, dir: &Path, args: &[&str]) -> Output {
        self.command(dir, args).output().expect("run capability")
    }
}
