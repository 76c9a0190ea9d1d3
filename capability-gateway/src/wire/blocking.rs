//! Descriptors as blocking files, for the threads of the gateway's stdio lane: the client's
//! standard input and output, a spawned server's output.
//!
//! A thread that does nothing but wait on one descriptor sleeps in `read` and is woken by the
//! kernel the moment a line arrives, as a plain byte relay is; the runtime's reactor would add
//! an `epoll_wait`, a wake-up of its one thread and a hop between tasks to every message (see
//! the gateway's figures in the performance notebook, `benches/README.md`).

use std::fs::File;
use std::io;

/// `fd` as a blocking file: `O_NONBLOCK` is cleared on its open file description, which every
/// copy of the descriptor shares (nothing else in this process may count on it being
/// non-blocking).
#[cfg(unix)]
pub(crate) fn file(fd: std::os::fd::OwnedFd) -> io::Result<File> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(&fd, FcntlArg::F_GETFL)?);
    if flags.contains(OFlag::O_NONBLOCK) {
        fcntl(&fd, FcntlArg::F_SETFL(flags.difference(OFlag::O_NONBLOCK)))?;
    }
    Ok(File::from(fd))
}

/// A blocking copy of standard input.
#[cfg(unix)]
pub(crate) fn standard_input() -> io::Result<File> {
    use std::os::fd::AsFd;
    file(io::stdin().as_fd().try_clone_to_owned()?)
}

/// A blocking copy of standard output.
#[cfg(unix)]
pub(crate) fn standard_output() -> io::Result<File> {
    use std::os::fd::AsFd;
    file(io::stdout().as_fd().try_clone_to_owned()?)
}

/// Elsewhere the lane's threads are not used: the runtime's streams serve.
#[cfg(not(unix))]
pub(crate) fn standard_input() -> io::Result<File> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Elsewhere the lane's threads are not used: the runtime's streams serve.
#[cfg(not(unix))]
pub(crate) fn standard_output() -> io::Result<File> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}
