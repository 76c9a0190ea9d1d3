//! How a command fails: its exit code and message.

use std::io;

/// A failure that ends the command, with its exit code.
#[derive(Debug)]
pub struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
    /// Standard output is a pipe whose reader has gone (`capability inspect | head -1`): it has
    /// all the output it wanted, so the program ends quietly, with exit code 0.
    pub(crate) closed_pipe: bool,
}

impl Failure {
    /// Bad input or usage: exit 2.
    pub fn input(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
            closed_pipe: false,
        }
    }
}

/// A write to standard output failed: the only I/O errors that reach `?` in the commands
/// (reading and writing files map their errors to a message naming the file).
impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Failure {
        Failure {
            closed_pipe: error.kind() == io::ErrorKind::BrokenPipe,
            ..Failure::input(format!("cannot write to standard output: {error}"))
        }
    }
}
