//! Reading a peer's messages line by line over stdio, with a bound on each line.
//!
//! `read_until` keeps reading until it sees a newline: a client or a server that writes
//! without ever ending its line (by mistake, or to exhaust the process) makes it hold
//! everything in memory. Here a line longer than the bound (`max_message_bytes`) is not
//! kept: what is read of it is dropped as it comes, up to its end, and the reader hears that
//! it was too long. The bound is 64 MiB unless `--max-message` says otherwise (one bound for
//! the process: every line from a client or a server, and an HTTP server's answer); the default
//! is well above rmcp's for a Streamable HTTP request body (4 MiB): a tool's result may carry a
//! file or an image.

use std::sync::OnceLock;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The bound when `--max-message` is not given: 64 MiB.
pub(crate) const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// The smallest bound `--max-message` takes: below it a server's tool list may not fit.
const LEAST: usize = 64 * 1024;

/// The largest: past it, one message could make the process hold gigabytes.
const MOST: usize = 1024 * 1024 * 1024;

static MAX_MESSAGE_BYTES: OnceLock<usize> = OnceLock::new();

/// Sets the bound for the rest of the process (before anything is read; a second setting is
/// ignored): `capability proxy` and `capability gateway`'s `--max-message`.
pub fn set_max_message(bytes: usize) {
    let _ = MAX_MESSAGE_BYTES.set(bytes);
}

/// The longest message (one line, its newline not counted) read from a client or a server
/// over stdio, and the longest answer taken from an HTTP server.
pub(crate) fn max_message_bytes() -> usize {
    *MAX_MESSAGE_BYTES
        .get()
        .unwrap_or(&DEFAULT_MAX_MESSAGE_BYTES)
}

/// The bound, as said to people ("64 MiB", "512 KiB", "100000 bytes").
pub(crate) fn max_message() -> String {
    said(max_message_bytes())
}

fn said(bytes: usize) -> String {
    match bytes {
        b if b % (1024 * 1024 * 1024) == 0 => format!("{} GiB", b / (1024 * 1024 * 1024)),
        b if b % (1024 * 1024) == 0 => format!("{} MiB", b / (1024 * 1024)),
        b if b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} bytes"),
    }
}

/// Reads `--max-message`: a number of bytes, or one with `KiB`, `MiB` or `GiB` after it
/// (`512KiB`, `8 MiB`), between 64 KiB and 1 GiB.
pub fn parse_max_message(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1024,
        "MiB" => 1024 * 1024,
        "GiB" => 1024 * 1024 * 1024,
        other => {
            return Err(format!(
                "`{other}` is not a unit of size here: give bytes, or KiB, MiB or GiB (e.g. 8MiB)"
            ));
        }
    };
    let bytes = number
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("`{text}` is not a size: give e.g. 8MiB, 512KiB or 1048576"))?;
    if !(LEAST..=MOST).contains(&bytes) {
        return Err(format!(
            "{} is out of range: the bound of a message is between {} and {}",
            said(bytes),
            said(LEAST),
            said(MOST)
        ));
    }
    Ok(bytes)
}

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
        let (taken, read) = step(available, line, max);
        input.consume(taken);
        if let Some(read) = read {
            return Ok(read);
        }
    }
}

/// [`read_line`] for a blocking reader (the stdio threads of the gateway's lane).
pub(crate) fn read_line_blocking<R: std::io::BufRead>(
    input: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    line.clear();
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let (taken, read) = step(available, line, max);
        input.consume(taken);
        if let Some(read) = read {
            return Ok(read);
        }
    }
}

/// One step of reading a line: what of `available` (the reader's buffer, empty at the end of
/// the input) is taken into `line` or dropped, and the line once it is read.
fn step(available: &[u8], line: &mut Vec<u8>, max: usize) -> (usize, Option<Line>) {
    if available.is_empty() {
        let read = if line.is_empty() {
            Line::End
        } else {
            Line::Whole
        };
        return (0, Some(read));
    }
    let (taken, ends) = match memchr::memchr(b'\n', available) {
        Some(at) => (at + 1, true),
        None => (available.len(), false),
    };
    if line.len() + taken - usize::from(ends) > max {
        line.clear();
        line.shrink_to(0);
        let read = if ends {
            Line::TooLong
        } else {
            Line::Overflowing
        };
        return (taken, Some(read));
    }
    line.extend_from_slice(&available[..taken]);
    (taken, ends.then_some(Line::Whole))
}

/// Reads and drops the rest of a line, up to and including its newline (or the end of the
/// input), holding none of it.
pub(crate) async fn skip_line<R: AsyncBufRead + Unpin>(input: &mut R) -> std::io::Result<()> {
    loop {
        let available = input.fill_buf().await?;
        let (taken, done) = skipped(available);
        input.consume(taken);
        if done {
            return Ok(());
        }
    }
}

/// [`skip_line`] for a blocking reader.
pub(crate) fn skip_line_blocking<R: std::io::BufRead>(input: &mut R) -> std::io::Result<()> {
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let (taken, done) = skipped(available);
        input.consume(taken);
        if done {
            return Ok(());
        }
    }
}

/// What of `available` a line being skipped drops, and whether the line (or the input) ended.
fn skipped(available: &[u8]) -> (usize, bool) {
    match memchr::memchr(b'\n', available) {
        Some(at) => (at + 1, true),
        None => (available.len(), available.is_empty()),
    }
}

/// Writes each line received (whole lines, from a thread that reads a peer) to `to`, an
/// in-process pipe to rmcp, in order; shuts `to` down when the sender is gone, so rmcp sees
/// the end of its input.
pub(crate) async fn forward_lines(
    mut lines: tokio::sync::mpsc::Receiver<Vec<u8>>,
    mut to: impl tokio::io::AsyncWrite + Unpin,
) {
    use tokio::io::AsyncWriteExt;
    while let Some(line) = lines.recv().await {
        if to.write_all(&line).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// rmcp's line transport for `Role`'s side over `read` and `write`, taking a message of up to
/// the bound (`max_message_bytes`) as the rest of the edge does. rmcp's own bound is 16 MiB, and a longer line
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
        .with_max_line_length(max_message_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    #[test]
    fn a_bound_is_read_in_bytes_or_binary_units_and_refused_out_of_range_saying_why() {
        assert_eq!(parse_max_message("8MiB"), Ok(8 * 1024 * 1024));
        assert_eq!(parse_max_message(" 512 KiB "), Ok(512 * 1024));
        assert_eq!(parse_max_message("1GiB"), Ok(1024 * 1024 * 1024));
        assert_eq!(parse_max_message("100000"), Ok(100_000));
        assert_eq!(said(100_000), "100000 bytes");
        assert_eq!(said(DEFAULT_MAX_MESSAGE_BYTES), "64 MiB");
        let small = parse_max_message("1KiB").expect_err("too small");
        assert!(
            small.contains("1 KiB is out of range") && small.contains("64 KiB"),
            "{small}"
        );
        let large = parse_max_message("2GiB").expect_err("too large");
        assert!(large.contains("2 GiB is out of range"), "{large}");
        let unit = parse_max_message("8MB").expect_err("not a binary unit");
        assert!(unit.contains("`MB` is not a unit"), "{unit}");
        for bad in [
            "",
            "MiB",
            "99999999999999999999999",
            "18446744073709551615GiB",
        ] {
            assert!(parse_max_message(bad).is_err(), "{bad:?}");
        }
    }

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

    /// [`lines`], read through the blocking reader: it must read the same.
    fn lines_blocking(input: &[u8], capacity: usize, max: usize) -> Vec<Result<String, Line>> {
        let mut reader = std::io::BufReader::with_capacity(capacity, input);
        let mut line = Vec::new();
        let mut seen = Vec::new();
        loop {
            let read = read_line_blocking(&mut reader, &mut line, max).expect("read");
            match read {
                Line::End => return seen,
                Line::Whole => seen.push(Ok(String::from_utf8(line.clone()).expect("utf-8"))),
                Line::TooLong | Line::Overflowing => {
                    assert!(line.is_empty());
                    if read == Line::Overflowing {
                        skip_line_blocking(&mut reader).expect("skip");
                    }
                    seen.push(Err(Line::TooLong));
                }
            }
        }
    }

    #[test]
    fn the_blocking_reader_reads_what_the_async_one_reads() {
        for input in [
            &b"abcd\nabcde\nab\nabcdefghij\n\nxyz"[..],
            b"ok\n0123456789",
            b"",
            b"\n\n0123456789abcdef\nnext\n",
        ] {
            for capacity in [1, 2, 3, 5, 8, 64] {
                assert_eq!(
                    lines_blocking(input, capacity, 4),
                    lines(input, capacity, 4),
                    "{input:?} through a buffer of {capacity}"
                );
            }
        }
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
