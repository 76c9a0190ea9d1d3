//! The client's side of a stdio proxy: a thin line filter between the process's standard
//! streams and rmcp.
//!
//! rmcp ignores a line that is not JSON (as the other MCP SDKs do) and gives the sender no
//! answer. JSON-RPC 2.0 asks for a `-32700 Parse error` with `id: null`, so the filter answers
//! such a line itself and passes every other line to rmcp unchanged; a line that is JSON but
//! not a JSON-RPC message is rmcp's (it answers `-32600 Invalid Request`). A line longer than
//! the bound (64 MiB, or `--max-message`) is not held: it is dropped as it is read and answered `-32600` with `id: null`, and
//! the session goes on. Everything rmcp writes goes out whole lines at a time, through the
//! one writer that owns standard output; while more than 8 MiB wait there (a client that reads
//! slower than it is written to), rmcp's lines, the servers' progress and the client's next
//! line wait for room, so the writing stops rather than piling up in memory. A request in
//! flight, a hook's or rmcp's, holds room for its answer until answered: that room holds back
//! only the client's next line, never the output its answer comes in (`outbox.rs`).

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::task::JoinHandle;

use super::outbox::InFlight;
pub(crate) use super::outbox::{Held, Outbox};

use crate::lines::{Line, max_message, max_message_bytes};

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
    /// Reads the client's lines until its input ends.
    pub(crate) reader: JoinHandle<()>,
    /// Writes everything to the client; ends once rmcp's end is dropped and the reader is done.
    pub(crate) writer: JoinHandle<()>,
}

/// The answer to a line that is not JSON.
fn parse_error(error: &serde_json::Error) -> Vec<u8> {
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("Parse error: {error}")},
    });
    let mut line = answer.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Answers a line longer than the bound, dropped unread: its id cannot be known without
/// reading it.
fn too_long(errors: &Outbox) {
    crate::proxy::note(format_args!(
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
/// blank, when `hook` takes it, or when it is not JSON (answered with a parse error). A request
/// that goes on holds room for its answer.
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
    if let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(text) {
        crate::proxy::note(format_args!(
            "a message from the client is not JSON; answered with a parse error"
        ));
        let _ = errors.send(parse_error(&error));
        return false;
    }
    in_flight.sent(text, errors);
    if !line.ends_with(b"\n") {
        line.push(b'\n');
    }
    true
}

/// What may take a client's message before rmcp does, and answer it itself (the gateway's
/// forwarding lane), and watches what rmcp writes.
pub(crate) trait Hook: Send + Sync + 'static {
    /// Whether the client's `line` (without its newline) is taken: it then does not reach rmcp,
    /// and its answer (whole lines) goes to `answer`. A line taken must have been read whole as
    /// JSON; any other is checked (and, if it is not JSON, answered) by the filter.
    fn take(&self, line: &[u8], answer: &Outbox) -> bool;
    /// A line rmcp writes to the client.
    fn wrote(&self, line: &[u8]);
}

/// Starts the filter between `input` (the client's messages) and `output` (to the client).
pub(crate) fn start<R, W>(input: R, output: W) -> Filter
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    start_with(input, output, None)
}

/// [`start`], with `hook` offered every message of the client first.
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
    let reader = tokio::spawn(async move {
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            // A client that does not read its answers is not read either.
            errors.room_to_read().await;
            match crate::lines::read_line(&mut input, &mut line, max_message_bytes()).await {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::Whole) => {}
                Ok(read @ (Line::TooLong | Line::Overflowing)) => {
                    // Dropped as it comes, to its end: the next line is the client's next.
                    if read == Line::Overflowing
                        && crate::lines::skip_line(&mut input).await.is_err()
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

    tokio::spawn(rmcp_to_client(from_rmcp, out, answered, watching));

    let writer = tokio::spawn(async move {
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
            crate::lines::rmcp_lines(read, write)
        },
        reader,
        writer,
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
pub(crate) fn start_threaded(hook: std::sync::Arc<dyn Hook>) -> std::io::Result<Rmcp> {
    let input = crate::blocking::standard_input()?;
    let output = crate::blocking::standard_output()?;
    let runtime = tokio::runtime::Handle::current();
    let direct = super::outbox::Direct::new(output);
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
                match crate::lines::read_line_blocking(&mut input, &mut line, max_message_bytes()) {
                    Ok(Line::End) | Err(_) => break,
                    Ok(Line::Whole) => {}
                    Ok(read @ (Line::TooLong | Line::Overflowing)) => {
                        if read == Line::Overflowing
                            && crate::lines::skip_line_blocking(&mut input).is_err()
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

    tokio::spawn(crate::lines::forward_lines(rmcp_lines, to_rmcp));
    tokio::spawn(rmcp_to_client(from_rmcp, out, answered, Some(watching)));
    let (read, write) = tokio::io::split(transport);
    Ok(crate::lines::rmcp_lines(read, write))
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
                answered.wrote(&line);
                if out.send(std::mem::take(&mut line)).is_err() {
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
                Some(Stream::Socket(socket)) => match super::socket::Reading::new(socket) {
                    Ok(socket) => Box::new(socket),
                    Err(_) => Box::new(tokio::io::stdin()),
                },
                None => Box::new(tokio::io::stdin()),
            };
        let output: Box<dyn tokio::io::AsyncWrite + Unpin + Send> =
            match reactor_stream(std::io::stdout().as_fd()) {
                Some(Stream::Pipe(file)) => match tokio::net::unix::pipe::Sender::from_file(file) {
                    Ok(pipe) => Box::new(pipe),
                    Err(_) => Box::new(tokio::io::stdout()),
                },
                Some(Stream::Socket(socket)) => match super::socket::Writing::new(socket) {
                    Ok(socket) => Box::new(socket),
                    Err(_) => Box::new(tokio::io::stdout()),
                },
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
    /// A socket: made non-blocking by [`super::socket`], each direction registered for itself.
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
