//! A server's standard output, line by line, with every message that writes a key twice
//! refused before rmcp reads it.
//!
//! rmcp reads a message into a JSON value first, which keeps the last of two equal keys: a
//! tool object with `"readOnlyHint": false, "readOnlyHint": true` would be read as read-only,
//! while another reader of the same bytes (a client, a log) sees the first. So each line is
//! read strictly first ([`capability::json::no_duplicate_keys`]): an answer that writes a key
//! twice is replaced by a JSON-RPC error for the same request, naming the key's path; any
//! other such message is dropped, with a note on standard error.
//!
//! A line longer than the bound (64 MiB, or `--max-message`) is not held: the server's
//! output is read no further (the note says why), so rmcp and the tap see it end, as if the
//! server had closed it, and the process's memory stays bounded whatever the server writes.

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWriteExt, BufReader, DuplexStream};
use tokio::task::JoinHandle;

use crate::wire::lines::Line;

/// The buffer of the in-process pipe rmcp reads from.
const PIPE_BYTES: usize = 256 * 1024;

/// What the check makes of one line.
#[derive(Debug, PartialEq, Eq)]
pub enum Checked {
    /// Passed on as it is (including lines that are not JSON: rmcp has its own answer).
    Pass,
    /// An answer that writes a key twice: this error answer goes instead.
    Replace(Vec<u8>),
    /// A request or notification that writes a key twice: dropped; the text says why.
    Drop(String),
}

/// Checks one line (without its newline).
///
/// ```
/// use capability_gateway::live::strict::{check_line, Checked};
///
/// assert_eq!(check_line(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#), Checked::Pass);
/// let twice = br#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"w","annotations":{"readOnlyHint":false,"readOnlyHint":true}}]}}"#;
/// let Checked::Replace(answer) = check_line(twice) else { panic!("not refused") };
/// let answer: serde_json::Value = serde_json::from_slice(&answer)?;
/// assert_eq!(answer["id"], 7);
/// assert!(answer["error"]["message"].as_str().unwrap().contains("$.result.tools[0].annotations.readOnlyHint"));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn check_line(line: &[u8]) -> Checked {
    let Ok(text) = std::str::from_utf8(line) else {
        return Checked::Pass;
    };
    let error = match capability::json::no_duplicate_keys(text) {
        Err(error)
            if error
                .to_string()
                .starts_with(capability::json::DUPLICATE_KEY) =>
        {
            error
        }
        _ => return Checked::Pass,
    };
    let why = format!(
        "the server's message writes a key twice ({error}); refused: two readers of it could \
         read two different values"
    );
    // serde_json keeps one of the values: enough to find the request it answers.
    let value: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    match (value.get("id"), value.get("method")) {
        (Some(id), None) if !id.is_null() => {
            let answer = json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32603, "message": why},
            });
            let mut bytes = answer.to_string().into_bytes();
            bytes.push(b'\n');
            Checked::Replace(bytes)
        }
        _ => Checked::Drop(why),
    }
}

/// Reads `input` (a server's standard output) line by line, checks each ([`check_line`]) and
/// writes what passes to the stream it returns, for rmcp. `note` is told of each message
/// dropped. The task ends when `input` ends (the stream then ends too) or rmcp's end is gone.
pub fn strict_lines<R>(
    input: R,
    note: impl Fn(&str) + Send + 'static,
) -> (DuplexStream, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    strict_lines_tapped(input, note, NoTap)
}

/// Takes some of the checked lines of a server before rmcp reads them: the answers to requests
/// that were not rmcp's (the gateway's forwarding path).
pub trait Tap: Send + 'static {
    /// Whether `line` (checked, or the error answer that replaces it) is taken: it then does
    /// not reach rmcp.
    fn take(&mut self, line: &[u8]) -> bool;
    /// The server's output ended (`why`, when it was cut off rather than closed).
    fn end(&mut self, _why: Option<&str>) {}
    /// Resolves once the next line may be read: a tap that passes lines on to a client that
    /// is behind holds the server's output until the client catches up.
    fn room(&mut self) -> impl std::future::Future<Output = ()> + Send {
        std::future::ready(())
    }
    /// Whether the next line may be read at once, without waiting for [`room`](Tap::room):
    /// the reader's thread then does not enter the runtime to ask.
    fn may_read(&mut self) -> bool {
        false
    }
}

struct NoTap;

impl Tap for NoTap {
    fn take(&mut self, _line: &[u8]) -> bool {
        false
    }
}

/// [`strict_lines`], with `tap` offered each line that passes (or replaces one) first.
pub fn strict_lines_tapped<R>(
    input: R,
    note: impl Fn(&str) + Send + 'static,
    mut tap: impl Tap,
) -> (DuplexStream, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let (for_rmcp, mut pipe) = tokio::io::duplex(PIPE_BYTES);
    let task = tokio::spawn(async move {
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        let mut cut = None;
        loop {
            tap.room().await;
            match crate::wire::lines::read_line(
                &mut input,
                &mut line,
                crate::wire::lines::max_message_bytes(),
            )
            .await
            {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::Whole) => {}
                Ok(Line::TooLong | Line::Overflowing) => {
                    cut = Some(cut_off(&note));
                    break;
                }
            }
            let written = match passed(&mut line, &mut tap, &note) {
                Some(passed) => pipe.write_all(&passed).await,
                None => Ok(()),
            };
            if written.is_err() {
                break;
            }
        }
        tap.end(cut.as_deref());
        let _ = pipe.shutdown().await;
    });
    (for_rmcp, task)
}

/// [`strict_lines_tapped`] on a thread of its own: `input` (a server's output, a blocking
/// file) is read there, each line checked and offered to `tap` there, so a line the tap takes
/// is handled where it is read, without a hop through the runtime; the lines that pass go to
/// rmcp through the stream returned, one at a time (the thread waits while rmcp is behind).
/// The bounds are [`strict_lines_tapped`]'s. Must be called within the runtime.
pub fn strict_lines_threaded(
    input: std::fs::File,
    note: impl Fn(&str) + Send + 'static,
    mut tap: impl Tap,
) -> std::io::Result<DuplexStream> {
    use std::io::BufReader;

    let runtime = tokio::runtime::Handle::current();
    let (for_rmcp, pipe) = tokio::io::duplex(PIPE_BYTES);
    let (to_rmcp, lines) = tokio::sync::mpsc::channel::<Vec<u8>>(1);
    std::thread::Builder::new()
        .name("server-reader".into())
        .spawn(move || {
            let mut input = BufReader::with_capacity(64 * 1024, input);
            let mut line = Vec::new();
            let mut cut = None;
            loop {
                if !tap.may_read() {
                    runtime.block_on(tap.room());
                }
                match crate::wire::lines::read_line_blocking(
                    &mut input,
                    &mut line,
                    crate::wire::lines::max_message_bytes(),
                ) {
                    Ok(Line::End) | Err(_) => break,
                    Ok(Line::Whole) => {}
                    Ok(Line::TooLong | Line::Overflowing) => {
                        cut = Some(cut_off(&note));
                        break;
                    }
                }
                let passed = passed(&mut line, &mut tap, &note);
                if let Some(passed) = passed
                    && to_rmcp.blocking_send(passed).is_err()
                {
                    break;
                }
            }
            tap.end(cut.as_deref());
            // Dropping the sender ends rmcp's input.
        })?;
    tokio::spawn(crate::wire::lines::forward_lines(lines, pipe));
    Ok(for_rmcp)
}

/// Says that the server's output is cut off (a line past the bound); why, for the tap.
fn cut_off(note: &impl Fn(&str)) -> String {
    let why = format!(
        "it wrote a message longer than {} (the most a message may hold); its output is read \
         no further",
        crate::wire::lines::max_message()
    );
    note(&format!("the server's output was cut off: {why}"));
    why
}

/// What of the server's `line` (read whole, with its newline) goes on to rmcp: the line, or
/// the error answer that replaces it, unless the tap takes it; nothing for a line dropped.
fn passed(line: &mut Vec<u8>, tap: &mut impl Tap, note: &impl Fn(&str)) -> Option<Vec<u8>> {
    let body = line.strip_suffix(b"\n").unwrap_or(line).trim_ascii();
    match check_line(body) {
        Checked::Pass if tap.take(body) => None,
        Checked::Pass => Some(std::mem::take(line)),
        Checked::Replace(answer) => {
            note("an answer of the server writes a key twice: refused");
            (!tap.take(answer.trim_ascii())).then_some(answer)
        }
        Checked::Drop(why) => {
            note(&why);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_or_notification_writing_a_key_twice_is_dropped() {
        let note = br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"a":1,"a":2}}"#;
        assert!(matches!(check_line(note), Checked::Drop(why) if why.contains("$.params.a")));
        let request = br#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","id":4}"#;
        assert!(matches!(check_line(request), Checked::Drop(_)));
        assert_eq!(check_line(b"not json at all"), Checked::Pass);
        assert_eq!(check_line(b""), Checked::Pass);
    }
}
