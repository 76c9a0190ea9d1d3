//! Where the command writes: standard output through one buffered writer, standard error
//! without ever failing.
//!
//! Nothing here panics, unlike `println!`: a failed write to standard output is an
//! [`io::Error`] that the command returns (`writeln!(out, ..)?`), and `main` decides what it
//! means. A closed pipe (`capability inspect tools.json | head -1`) ends the program quietly with
//! exit code 0; any other write error (a full disk) is a one-line message and exit code 2.

use std::fmt::Display;
use std::io::{self, BufWriter, IsTerminal, Stdout, Write};

use capability_gateway::escape::JsonEscaped;

/// Standard output, buffered: `writeln!(out, ..)?` in the commands, [`Out::flush`] at the end.
///
/// Not locked for the whole run: `Stdout` is locked only while the buffer is written out, so
/// nothing else in the process (a library's thread) can wait on that lock for the whole run.
pub struct Out {
    stdout: BufWriter<Stdout>,
}

impl Out {
    /// Standard output, buffered.
    pub fn stdout() -> Out {
        Out {
            stdout: BufWriter::new(io::stdout()),
        }
    }

    /// Whether standard output is a terminal (for colour).
    pub fn is_terminal(&self) -> bool {
        self.stdout.get_ref().is_terminal()
    }

    /// `value` as pretty-printed JSON, on a line of its own.
    /// Characters a terminal could hide or reorder with are written as JSON escapes
    /// ([`JsonEscaped`]): the same JSON value, safe to print.
    pub fn json(&mut self, value: &serde_json::Value) -> io::Result<()> {
        use serde::Serialize;
        let mut serializer = serde_json::Serializer::with_formatter(&mut *self, JsonEscaped::new());
        value.serialize(&mut serializer)?;
        writeln!(self)
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stdout.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.stdout.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stdout.flush()
    }
}

/// A line on standard error, best effort: when standard error itself cannot be written (a closed
/// pipe, a full disk) there is nowhere left to say so, and the command goes on.
pub fn note(line: impl Display) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}
