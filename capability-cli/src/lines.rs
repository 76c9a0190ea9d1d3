//! Reading a peer's messages line by line over stdio, with a bound on each line.
//!
//! `read_until` keeps reading until it sees a newline: a client or a server that writes
//! without ever ending its line (by mistake, or to exhaust the process) makes it hold
//! everything in memory. Here a line longer than [`MAX_MESSAGE_BYTES`] is not kept: what is
//! read of it is dropped as it comes, up to its end, and the reader hears that it was too long.
//! The bound is well above rmcp's for a Streamable HTTP request body (4 MiB): a tool's result
//! may carry a file or an image.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest message (one line, its newline not counted) read from a client or a server
/// over stdio: 64 MiB.
pub(crate) const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// The bound, as said to people.
pub(crate) const MAX_MESSAGE: &str = "64 MiB";

/// What [`read_line`] read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A line (in the buffer, with its newline if it had one: the last line of the input
    /// may not).
    Whole,
    /// A line longer than the bound, read to its newline (or the end of the input) and
    /// dropped; the buffer is empty.
    TooLong,
    /// A line that passed the bound: read no further (the rest of it is still to come:
    /// [`skip_line`] drops it); the buffer is empty.
    Overflowing,
    /// The input ended.
    End,
}

/// Reads the next line of `input` into `line` (cleared first), holding at most `max` bytes of
/// it before its newline: a longer one stops being read as soon as it passes the bound. An
/// error of the input is returned as it is.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    line.clear();
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.is_empty() {
                Line::End
            } else {
                Line::Whole
            });
        }
        let (taken, ends) = match memchr::memchr(b'\n', available) {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        if line.len() + taken - usize::from(ends) > max {
            input.consume(taken);
            line.clear();
            line.shrink_to(0);
            return Ok(if ends {
                Line::TooLong
            } else {
                Line::Overflowing
            });
        }
        line.extend_from_slice(&available[..taken]);
        input.consume(taken);
        if ends {
            return Ok(Line::Whole);
        }
    }
}

/// Reads and drops the rest of a line, up to and including its newline (or the end of the
/// input), holding none of it.
pub(crate) async fn skip_line<R: AsyncBufRead + Unpin>(input: &mut R) -> std::io::Result<()> {
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(());
        }
        match memchr::memchr(b'\n', available) {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let all = available.len();
                input.consume(all);
            }
        }
    }
}

/// rmcp's line transport for `Role`'s side over `read` and `write`, taking a message of up to
/// [`MAX_MESSAGE`] as the rest of the edge does. rmcp's own bound is 16 MiB, and a longer line
/// it drops without a word: a call whose answer (or a client's call) held 20 MiB would never be
/// answered.
pub(crate) fn rmcp_lines<Role, R, W>(
    read: R,
    write: W,
) -> ::rmcp::transport::async_rw::AsyncRwTransport<Role, R, W>
where
    Role: ::rmcp::service::ServiceRole,
    R: Send + tokio::io::AsyncRead + Unpin,
    W: Send + tokio::io::AsyncWrite + Unpin + 'static,
{
    ::rmcp::transport::async_rw::AsyncRwTransport::new(read, write)
        .with_max_line_length(MAX_MESSAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    /// Every line of `input` read through a buffer of `capacity` bytes with bound `max`, each
    /// line that overflows skipped to its end (`Err` for a line too long either way).
    fn lines(input: &[u8], capacity: usize, max: usize) -> Vec<Result<String, Line>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let mut reader = BufReader::with_capacity(capacity, input);
            let mut line = Vec::new();
            let mut seen = Vec::new();
            loop {
                let read = read_line(&mut reader, &mut line, max).await.expect("read");
                match read {
                    Line::End => return seen,
                    Line::Whole => seen.push(Ok(String::from_utf8(line.clone()).expect("utf-8"))),
                    Line::TooLong | Line::Overflowing => {
                        assert!(line.is_empty());
                        if read == Line::Overflowing {
                            skip_line(&mut reader).await.expect("skip");
                        }
                        seen.push(Err(Line::TooLong));
                    }
                }
            }
        })
    }

    #[test]
    fn a_line_up_to_the_bound_is_whole_and_a_longer_one_is_dropped_to_its_end() {
        for capacity in [1, 2, 3, 5, 8, 64] {
            let read = lines(b"abcd\nabcde\nab\nabcdefghij\n\nxyz", capacity, 4);
            assert_eq!(
                read,
                vec![
                    Ok("abcd\n".to_owned()),
                    Err(Line::TooLong),
                    Ok("ab\n".to_owned()),
                    Err(Line::TooLong),
                    Ok("\n".to_owned()),
                    Ok("xyz".to_owned()),
                ],
                "buffer of {capacity}"
            );
        }
    }

    #[test]
    fn a_last_line_past_the_bound_without_its_newline_is_too_long_then_the_end() {
        for capacity in [1, 4, 64] {
            assert_eq!(
                lines(b"ok\n0123456789", capacity, 4),
                vec![Ok("ok\n".to_owned()), Err(Line::TooLong)],
                "buffer of {capacity}"
            );
        }
        assert_eq!(lines(b"", 8, 4), Vec::new());
    }

    #[test]
    fn an_overflowing_line_stops_being_read_at_the_bound() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let input = b"0123456789abcdef\nnext\n";
            let mut reader = BufReader::with_capacity(4, &input[..]);
            let mut line = Vec::new();
            let read = read_line(&mut reader, &mut line, 6).await.expect("read");
            assert_eq!(read, Line::Overflowing);
            // Read no further than the buffer that passed the bound: "89ab..." is still there.
            let mut rest = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut reader, &mut rest)
                .await
                .expect("rest");
            assert_eq!(rest, b"89abcdef\nnext\n");
        });
    }
}
