//! The client's side of a stdio proxy: a thin line filter between the process's standard
//! streams and rmcp.
//!
//! rmcp ignores a line it cannot read (as the other MCP SDKs do) and gives the sender no
//! answer, or answers without its id. JSON-RPC 2.0 asks for a `-32700 Parse error` or a `-32600
//! Invalid Request`, so the filter reads each request as rmcp would and answers one rmcp cannot
//! read itself (under its id where it can be read), and passes every other line to rmcp
//! unchanged. A line longer than
//! the bound (64 MiB, or `--max-message`) is not held: it is dropped as it is read and answered `-32600` with `id: null`, and
//! the session goes on. Everything rmcp writes goes out whole lines at a time, through the
//! one writer that owns standard output; while more than 8 MiB wait there (a client that reads
//! slower than it is written to), rmcp's lines, the servers' progress and the client's next
//! line wait for room, so the writing stops rather than piling up in memory. A request in
//! flight, a hook's or rmcp's, holds room for its answer until answered: that room holds back
//! only the client's next line, never the output its answer comes in (`outbox.rs`).

#[cfg(unix)]
mod socket;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};

pub(crate) use crate::lane::Hook;
use crate::wire::outbox::InFlight;
use crate::wire::outbox::Outbox;

use crate::wire::lines::{Line, max_message, max_message_bytes};

/// The buffer of the in-process pipe between the filter and rmcp.
const PIPE_BYTES: usize = 256 * 1024;

/// rmcp's transport over its end of the in-process pipe.
pub(crate) type Rmcp = ::rmcp::transport::async_rw::AsyncRwTransport<
    ::rmcp::RoleServer,
    tokio::io::ReadHalf<DuplexStream>,
    tokio::io::WriteHalf<DuplexStream>,
>;

/// The filter, running.
pub(crate) struct Filter {
    /// rmcp's end: what the client sent (filtered), and where rmcp's answers go; it takes a
    /// line up to the bound, as the filter does.
    pub(crate) transport: Rmcp,
    /// The lines on their way to the client: the engine waits for them before it ends
    /// ([`Outbox::flushed`]).
    pub(crate) out: Outbox,
}

/// Answers a line longer than the bound, dropped unread: its id cannot be known without
/// reading it.
fn too_long(errors: &Outbox) {
    crate::note(format_args!(
        "a message from the client is longer than {}; dropped unread, answered with an error",
        max_message()
    ));
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32600,
            "message": format!(
                "Invalid Request: the message is longer than {} ({} bytes), the most a \
                 message may hold; it was not read",
                max_message(),
                max_message_bytes()
            ),
        },
    });
    let mut line = answer.to_string().into_bytes();
    line.push(b'\n');
    let _ = errors.send(line);
}

/// Whether the client's `line` (read whole) goes on to rmcp, with its newline: not when it is
/// blank, when `hook` takes it, or when it is a request rmcp cannot read, which the filter
/// answers itself ([`unreadable`]). A request that goes on holds room for its answer.
fn passes(
    line: &mut Vec<u8>,
    hook: Option<&dyn Hook>,
    errors: &Outbox,
    in_flight: &InFlight,
) -> bool {
    let text = line.trim_ascii();
    if text.is_empty() {
        return false;
    }
    // A line the hook takes it has read whole: it is JSON.
    if hook.is_some_and(|hook| hook.take(text, errors)) {
        return false;
    }
    if let Some(answer) = unreadable(text) {
        let _ = errors.send(answer);
        return false;
    }
    in_flight.sent(text, errors);
    if !line.ends_with(b"\n") {
        line.push(b'\n');
    }
    true
}

/// The answer to a message rmcp would not read, if it is one: a line that is not JSON, and a
/// request rmcp's own reader refuses (a number out of range such as `1e400`, a lone surrogate,
/// nesting past 128 levels, a shape that is not a client's message). rmcp drops such a line
/// unanswered (or answers without its id), so its client would wait forever and the room it
/// held would never come back. Answered here, under the request's id where it can be read:
/// `-32700 Parse error` for what is not JSON to serde_json, `-32600 Invalid Request` for JSON of
/// another shape. A notification or a response of the client rmcp cannot read goes on as it
/// is: nothing answers those, and they hold no room.
fn unreadable(text: &[u8]) -> Option<Vec<u8>> {
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    let error = serde_json::from_slice::<::rmcp::model::ClientJsonRpcMessage>(text).err()?;
    let envelope = serde_json::from_slice::<crate::wire::envelope::Envelope<'_>>(text).ok();
    let id = match envelope.map(|e| (e.id, e.method.is_some())) {
        Some((Some(raw), true)) => serde_json::from_str::<::rmcp::model::RequestId>(raw.get())
            .ok()
            .and_then(|id| serde_json::to_value(id).ok())
            .unwrap_or(Value::Null),
        // A notification or a response: nothing answers those.
        Some((None, true) | (Some(_), false)) => return None,
        // Not an object, or one with neither: answered as rmcp answers one.
        Some((None, false)) | None => Value::Null,
    };
    let (code, kind) = match error.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            (-32700, "Parse error")
        }
        serde_json::error::Category::Data | serde_json::error::Category::Io => {
            (-32600, "Invalid Request")
        }
    };
    crate::note(format_args!(
        "a message from the client cannot be read ({kind}: {error}); answered with an error"
    ));
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": format!("{kind}: {error}")},
    });
    let mut line = answer.to_string().into_bytes();
    line.push(b'\n');
    Some(line)
}

/// Starts the filter between `input` (the client's messages) and `output` (to the client),
/// with `hook` offered every message of the client first.
pub(crate) fn start_with<R, W>(
    input: R,
    output: W,
    hook: Option<std::sync::Arc<dyn Hook>>,
) -> Filter
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let watching = hook.clone();
    let (ours, transport) = tokio::io::duplex(PIPE_BYTES);
    let (from_rmcp, mut to_rmcp) = tokio::io::split(ours);
    let (out, mut lines) = Outbox::new();

    let errors = out.clone();
    // The writer holds no sender: it ends once every sender is gone.
    let written = out.waiting.clone();
    // The requests passed to rmcp, holding room until answered.
    let in_flight = std::sync::Arc::new(InFlight::default());
    let answered = in_flight.clone();
    tokio::spawn(async move {
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            // A client that does not read its answers is not read either.
            errors.room_to_read().await;
            match crate::wire::lines::read_line(&mut input, &mut line, max_message_bytes()).await {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::Whole) => {}
                Ok(read @ (Line::TooLong | Line::Overflowing)) => {
                    // Dropped as it comes, to its end: the next line is the client's next.
                    if read == Line::Overflowing
                        && crate::wire::lines::skip_line(&mut input).await.is_err()
                    {
                        break;
                    }
                    too_long(&errors);
                    continue;
                }
            }
            if !passes(&mut line, hook.as_deref(), &errors, &in_flight) {
                continue;
            }
            if to_rmcp.write_all(&line).await.is_err() {
                break;
            }
        }
        // The client's input ended: rmcp sees the end of its input and stops.
        let _ = to_rmcp.shutdown().await;
    });

    let flushing = out.clone();
    tokio::spawn(rmcp_to_client(from_rmcp, out, answered, watching));

    tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = lines.recv().await {
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                break;
            }
            written.written(line.len());
        }
        let _ = output.flush().await;
        // Nothing more is written: no one waits for room any longer.
        drop(lines);
        written.ended();
    });

    Filter {
        transport: {
            let (read, write) = tokio::io::split(transport);
            crate::wire::lines::rmcp_lines(read, write)
        },
        out: flushing,
    }
}

/// [`start_with`] over the process's own standard input and output, each driven by a thread
/// of its own with blocking reads and writes (the gateway's stdio lane): the client's lines are
/// read, and offered to `hook`, on the reading thread, so a call the hook takes is decided,
/// recorded and written to its server without a hop through the runtime; whatever `hook`
/// writes with [`Outbox::write_now`] goes to the client from the thread that writes it. The
/// lines for rmcp, and rmcp's, cross to the runtime and back as on [`start_with`]; the bounds
/// are the same (a line longer than `--max-message` is answered unread; past 8 MiB waiting for
/// the client, its next line is not read). Must be called within the runtime. `Err` when the
/// standard streams cannot be had as blocking files (not on Unix): [`start_with`] then serves.
pub(crate) fn start_threaded(hook: std::sync::Arc<dyn Hook>) -> std::io::Result<Filter> {
    let input = crate::wire::blocking::standard_input()?;
    let output = crate::wire::blocking::standard_output()?;
    let runtime = tokio::runtime::Handle::current();
    let direct = crate::wire::outbox::Direct::new(output);
    let (out, mut lines) = Outbox::with_direct(direct.clone());
    let (ours, transport) = tokio::io::duplex(PIPE_BYTES);
    let (from_rmcp, to_rmcp) = tokio::io::split(ours);
    // The client's lines for rmcp, one at a time: the reader waits while rmcp is behind.
    let (for_rmcp, rmcp_lines) = tokio::sync::mpsc::channel::<Vec<u8>>(1);
    let in_flight = std::sync::Arc::new(InFlight::default());
    let answered = in_flight.clone();
    let watching = hook.clone();

    // The queued lines (rmcp's, the filter's own answers), written through the same writer.
    let written = out.waiting.clone();
    std::thread::Builder::new()
        .name("client-writer".into())
        .spawn(move || {
            while let Some(line) = lines.blocking_recv() {
                if direct.write(&line).is_err() {
                    break;
                }
                written.written(line.len());
            }
            // Nothing more is written: no one waits for room any longer.
            drop(lines);
            written.ended();
        })?;

    let errors = out.clone();
    let reading = runtime.clone();
    std::thread::Builder::new()
        .name("client-reader".into())
        .spawn(move || {
            let mut input = std::io::BufReader::with_capacity(64 * 1024, input);
            let mut line = Vec::new();
            loop {
                // A client that does not read its answers is not read either.
                if !errors.may_read() {
                    reading.block_on(errors.room_to_read());
                }
                match crate::wire::lines::read_line_blocking(
                    &mut input,
                    &mut line,
                    max_message_bytes(),
                ) {
                    Ok(Line::End) | Err(_) => break,
                    Ok(Line::Whole) => {}
                    Ok(read @ (Line::TooLong | Line::Overflowing)) => {
                        if read == Line::Overflowing
                            && crate::wire::lines::skip_line_blocking(&mut input).is_err()
                        {
                            break;
                        }
                        too_long(&errors);
                        continue;
                    }
                }
                if !passes(&mut line, Some(&*hook), &errors, &in_flight) {
                    continue;
                }
                let whole = std::mem::take(&mut line);
                if for_rmcp.blocking_send(whole).is_err() {
                    break;
                }
            }
            // The client's input ended: rmcp sees the end of its input and stops.
        })?;

    tokio::spawn(crate::wire::lines::forward_lines(rmcp_lines, to_rmcp));
    let flushing = out.clone();
    tokio::spawn(rmcp_to_client(from_rmcp, out, answered, Some(watching)));
    let (read, write) = tokio::io::split(transport);
    Ok(Filter {
        transport: crate::wire::lines::rmcp_lines(read, write),
        out: flushing,
    })
}

/// What rmcp writes, to the client: whole lines, each seen by the hook, each letting go of
/// the room its request held, none while the client is behind.
async fn rmcp_to_client(
    from_rmcp: tokio::io::ReadHalf<DuplexStream>,
    out: Outbox,
    answered: std::sync::Arc<InFlight>,
    watching: Option<std::sync::Arc<dyn Hook>>,
) {
    let mut from_rmcp = BufReader::new(from_rmcp);
    let mut line = Vec::new();
    loop {
        line.clear();
        match from_rmcp.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if let Some(hook) = &watching {
                    hook.wrote(&line);
                }
                // rmcp waits (and so the servers it reads) while the client is behind.
                out.room().await;
                // The room its request held goes once the answer is queued, which then holds
                // it: the bytes waiting never read nought while an answer is on its way.
                let released = answered.wrote(&line);
                let sent = out.send(std::mem::take(&mut line));
                drop(released);
                if sent.is_err() {
                    break;
                }
            }
        }
    }
}

/// Standard input and output for the async runtime. When they are pipes or sockets (a server
/// an MCP client spawns gets one or the other: Node.js, and so Electron, hands its children
/// sockets), the runtime's reactor drives them like the server's pipes; otherwise (a terminal,
/// a file) tokio's blocking threads do, whose hand-offs cost tens of microseconds a message.
pub(crate) fn standard_streams() -> (
    Box<dyn tokio::io::AsyncRead + Unpin + Send>,
    Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
) {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let input: Box<dyn tokio::io::AsyncRead + Unpin + Send> =
            match reactor_stream(std::io::stdin().as_fd()) {
                Some(Stream::Pipe(file)) => {
                    match tokio::net::unix::pipe::Receiver::from_file(file) {
                        Ok(pipe) => Box::new(pipe),
                        Err(_) => Box::new(tokio::io::stdin()),
                    }
                }
                Some(Stream::Socket(socket)) => {
                    match crate::front::stdio::socket::Reading::new(socket) {
                        Ok(socket) => Box::new(socket),
                        Err(_) => Box::new(tokio::io::stdin()),
                    }
                }
                None => Box::new(tokio::io::stdin()),
            };
        let output: Box<dyn tokio::io::AsyncWrite + Unpin + Send> =
            match reactor_stream(std::io::stdout().as_fd()) {
                Some(Stream::Pipe(file)) => match tokio::net::unix::pipe::Sender::from_file(file) {
                    Ok(pipe) => Box::new(pipe),
                    Err(_) => Box::new(tokio::io::stdout()),
                },
                Some(Stream::Socket(socket)) => {
                    match crate::front::stdio::socket::Writing::new(socket) {
                        Ok(socket) => Box::new(socket),
                        Err(_) => Box::new(tokio::io::stdout()),
                    }
                }
                None => Box::new(tokio::io::stdout()),
            };
        (input, output)
    }
    #[cfg(not(unix))]
    {
        (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
    }
}

/// A standard stream the reactor can drive.
#[cfg(unix)]
enum Stream {
    /// A pipe: made non-blocking by tokio's `pipe::{Receiver, Sender}::from_file`, which checks
    /// the type and access mode before changing anything.
    Pipe(std::fs::File),
    /// A socket: made non-blocking by [`crate::front::stdio::socket`], each direction registered for itself.
    Socket(std::os::unix::net::UnixStream),
}

/// A copy of `fd` as a [`Stream`], or `None` when it is neither a pipe nor a Unix socket (it
/// is then left as it was, blocking).
#[cfg(unix)]
fn reactor_stream(fd: std::os::fd::BorrowedFd<'_>) -> Option<Stream> {
    use std::os::unix::fs::FileTypeExt;
    let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
    let kind = file.metadata().ok()?.file_type();
    if kind.is_fifo() {
        return Some(Stream::Pipe(file));
    }
    if kind.is_socket() {
        let socket = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(file));
        return Some(Stream::Socket(socket));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::unreadable;
    use serde_json::{Value, json};

    fn answer(line: &str) -> Option<Value> {
        unreadable(line.as_bytes()).map(|a| serde_json::from_slice(&a).expect("JSON"))
    }

    #[test]
    fn a_request_rmcp_cannot_read_is_answered_under_its_id() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{{"name":"x","arguments":{}1{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        for (line, id, code) in [
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"n":1e400}}}"#,
                json!(7),
                -32700,
            ),
            (
                r#"{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"\ud800"}}"#,
                json!("s"),
                -32700,
            ),
            (deep.as_str(), json!("deep"), -32700),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":"not an object"}"#,
                json!(8),
                -32600,
            ),
            ("[1, 2]", Value::Null, -32600),
            ("{not json", Value::Null, -32700),
        ] {
            let answer = answer(line).unwrap_or_else(|| panic!("answered: {line}"));
            assert_eq!(answer["id"], id, "{line}: {answer}");
            assert_eq!(answer["error"]["code"], code, "{line}: {answer}");
        }
    }

    #[test]
    fn what_rmcp_reads_and_what_nobody_answers_goes_on() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{"n":1e300}}}"#,
            // A notification or a response rmcp cannot read: nothing answers those.
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1e400}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"n":1e400}}"#,
        ] {
            assert!(answer(line).is_none(), "{line}");
        }
    }
}
