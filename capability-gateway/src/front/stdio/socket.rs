//! A Unix socket as standard input and output (what Node.js, and so Electron, hands the
//! servers it spawns), each half registered with the reactor for its own direction only.
//!
//! tokio's `UnixStream` registers for readable and writable at once, with edge-triggered
//! epoll. A socket reports writable again each time the peer reads from it, so the copy that
//! is only ever written to woke the process once for every answer the client read: an
//! `epoll_wait` and a wake-up with nothing to do, on every call. Here the reading half waits
//! for readable only, and the writing half writes straight away and registers for writable
//! only while a write waits for room (the client not reading), dropping that registration
//! once the write goes through.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// `socket` registered with the reactor for `interest` only.
///
/// tokio 1.54 deprecated the safe `AsyncFd::with_interest` for `register_with_interest`, an
/// `unsafe fn` this crate cannot call (`forbid(unsafe_code)`). The deprecation is about a type
/// whose descriptor can be closed or changed while registered (tokio#8587); a `UnixStream`
/// the `AsyncFd` owns is closed only when the `AsyncFd` is dropped, after it deregisters.
#[allow(deprecated)]
fn registered(socket: UnixStream, interest: Interest) -> io::Result<AsyncFd<UnixStream>> {
    AsyncFd::with_interest(socket, interest)
}

/// The half of the socket that is read: registered for readable only.
pub(crate) struct Reading(AsyncFd<UnixStream>);

impl Reading {
    /// Makes `socket` non-blocking and registers it for readable.
    pub(crate) fn new(socket: UnixStream) -> io::Result<Reading> {
        socket.set_nonblocking(true)?;
        registered(socket, Interest::READABLE).map(Reading)
    }
}

impl AsyncRead for Reading {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let wanted = unfilled.len();
            match guard.try_io(|socket| socket.get_ref().read(unfilled)) {
                Ok(Ok(n)) => {
                    // Less than asked for: the socket is drained (as tokio's own streams
                    // assume), so the next read waits for the next edge instead of asking the
                    // kernel only to hear "would block".
                    if n > 0 && n < wanted {
                        guard.clear_ready();
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(error)) if error.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(error)) => return Poll::Ready(Err(error)),
                // Would block: readiness cleared, wait for the next edge.
                Err(_) => {}
            }
        }
    }
}

/// The half of the socket that is written: written straight away, registered for writable
/// only while a write waits for room.
pub(crate) struct Writing {
    socket: UnixStream,
    /// A copy of the socket registered for writable, while a write waits.
    waiting: Option<AsyncFd<UnixStream>>,
}

impl Writing {
    /// Makes `socket` non-blocking (it registers nothing yet).
    pub(crate) fn new(socket: UnixStream) -> io::Result<Writing> {
        socket.set_nonblocking(true)?;
        Ok(Writing {
            socket,
            waiting: None,
        })
    }
}

impl AsyncWrite for Writing {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            if let Some(waiting) = &this.waiting {
                let mut guard = ready!(waiting.poll_write_ready(cx))?;
                match guard.try_io(|socket| socket.get_ref().write(buf)) {
                    Ok(Err(error)) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(written) => {
                        drop(guard);
                        // Room again: the registration goes until a write waits again.
                        this.waiting = None;
                        return Poll::Ready(written);
                    }
                    // Still no room: readiness cleared, wait for the next edge.
                    Err(_) => continue,
                }
            }
            match (&this.socket).write(buf) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    // Registered now, epoll reports the socket's state at once: room that
                    // opened since the write is not missed.
                    let copy = this.socket.try_clone()?;
                    this.waiting = Some(registered(copy, Interest::WRITABLE)?);
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                written => return Poll::Ready(written),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing is buffered here: each write went to the socket.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.socket.shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    /// A write larger than the socket holds waits for the reader and loses nothing; the
    /// reading half reads everything the peer wrote, in order, then the end.
    #[test]
    fn a_write_that_waits_for_room_loses_nothing_and_reads_see_everything() {
        runtime().block_on(async {
            let (ours, theirs) = UnixStream::pair().expect("a socket pair");
            let mut writing = Writing::new(ours.try_clone().expect("a copy")).expect("writing");
            let mut reading = Reading::new(ours).expect("reading");
            let (mut peer_read, mut peer_write) = tokio::net::UnixStream::from_std({
                theirs.set_nonblocking(true).expect("non-blocking");
                theirs
            })
            .expect("the peer")
            .into_split();
            let sent: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
            let expected = sent.clone();
            let writer = tokio::spawn(async move {
                writing.write_all(&sent).await.expect("written");
                writing.flush().await.expect("flushed");
                writing
            });
            // The peer reads slowly at first: the writer must wait for room, more than once.
            let mut got = Vec::new();
            let mut chunk = vec![0; 4096];
            while got.len() < expected.len() {
                if got.len() < 256 * 1024 {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                let n = peer_read.read(&mut chunk).await.expect("read");
                assert!(n > 0, "the stream ended after {} bytes", got.len());
                got.extend_from_slice(&chunk[..n]);
            }
            assert!(got == expected, "the bytes arrived changed or out of order");
            let mut writing = writer.await.expect("the writer");
            assert!(
                writing.waiting.is_none(),
                "the registration outlived the wait"
            );

            peer_write.write_all(b"one line\n").await.expect("sent");
            peer_write.write_all(b"and another\n").await.expect("sent");
            peer_write.shutdown().await.expect("the peer's end");
            let mut text = String::new();
            reading.read_to_string(&mut text).await.expect("read");
            assert_eq!(text, "one line\nand another\n");
            writing.shutdown().await.expect("our end");
            assert_eq!(peer_read.read(&mut chunk).await.expect("read"), 0);
        });
    }
}
