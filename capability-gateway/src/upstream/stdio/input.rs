//! A spawned server's standard input, shared by every writer of the lane: the lane's calls on
//! the client's thread, rmcp's lines, cancellations. Each line goes whole, in the order given,
//! and no writer waits for the server: a line the pipe has no room for waits, with those after
//! it, for a task of the runtime that writes them as the pipe takes them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::Notify;

/// The most bytes of rmcp's lines waiting for the server's input before rmcp waits too.
const INPUT_ROOM: usize = 1024 * 1024;

/// A server's standard input, written by every writer (the lane's calls on the client's
/// thread, rmcp's lines, cancellations) one whole line at a time, in the order given. A line
/// goes to the pipe at once when it has room, as it has unless the server stops reading; then
/// it waits, in order, with the lines after it, for a task of the runtime that writes them as
/// the pipe takes them. No writer waits for the server.
pub(crate) struct Input {
    /// The pipe; `None` once closed.
    state: Mutex<InputState>,
    /// Wakes the task that writes the lines waiting.
    queued: Notify,
    /// Wakes rmcp's lines waiting for room.
    drained: Notify,
}

#[derive(Default)]
struct InputState {
    pipe: Option<Arc<tokio::net::unix::pipe::Sender>>,
    /// The lines (or the rest of one) waiting for room in the pipe, in order.
    waiting: VecDeque<Vec<u8>>,
    bytes: usize,
    /// No line is taken any more; the pipe closes once those waiting are written.
    closing: bool,
}

/// The server's input is closed (the server is gone, or rmcp let go of it).
pub(crate) struct Closed;

impl Input {
    /// The input over `stdin`, and the task that writes what waits. Within the runtime.
    pub(crate) fn start(stdin: tokio::process::ChildStdin) -> std::io::Result<Arc<Input>> {
        let pipe = tokio::net::unix::pipe::Sender::from_owned_fd(stdin.into_owned_fd()?)?;
        let input = Arc::new(Input {
            state: Mutex::new(InputState {
                pipe: Some(Arc::new(pipe)),
                ..InputState::default()
            }),
            queued: Notify::new(),
            drained: Notify::new(),
        });
        tokio::spawn(write_waiting(input.clone()));
        Ok(input)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, InputState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `line` (whole, with its newline) after every line given before it: at once when
    /// the pipe has room and nothing waits, else queued for the writing task.
    pub(crate) fn write(&self, line: Vec<u8>) -> Result<(), Closed> {
        let mut state = self.state();
        if state.closing {
            return Err(Closed);
        }
        let Some(pipe) = state.pipe.clone() else {
            return Err(Closed);
        };
        let mut written = 0;
        if state.waiting.is_empty() {
            while written < line.len() {
                match pipe.try_write(&line[written..]) {
                    Ok(0) => break,
                    Ok(n) => written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        state.close();
                        return Err(Closed);
                    }
                }
            }
            if written == line.len() {
                return Ok(());
            }
        }
        let rest = if written == 0 {
            line
        } else {
            line[written..].to_vec()
        };
        state.bytes += rest.len();
        state.waiting.push_back(rest);
        drop(state);
        self.queued.notify_one();
        Ok(())
    }

    /// Takes no more lines: the pipe closes (the server reads the end of its input) once
    /// those waiting are written.
    pub(crate) fn close(&self) {
        let mut state = self.state();
        state.closing = true;
        if state.waiting.is_empty() {
            state.close();
        }
        drop(state);
        self.queued.notify_one();
    }

    /// Resolves once at most [`INPUT_ROOM`] bytes wait (at once if the pipe is closed).
    async fn room(&self) {
        loop {
            let drained = self.drained.notified();
            let mut drained = std::pin::pin!(drained);
            drained.as_mut().enable();
            {
                let state = self.state();
                if state.bytes <= INPUT_ROOM || state.pipe.is_none() {
                    return;
                }
            }
            drained.await;
        }
    }
}

impl InputState {
    fn close(&mut self) {
        self.pipe = None;
        self.waiting.clear();
        self.bytes = 0;
    }
}

/// Writes the lines waiting for the server's input as its pipe takes them, until it closes.
async fn write_waiting(input: Arc<Input>) {
    loop {
        let queued = input.queued.notified();
        let mut queued = std::pin::pin!(queued);
        queued.as_mut().enable();
        let pipe = {
            let state = input.state();
            match &state.pipe {
                None => return,
                Some(_) if state.waiting.is_empty() => None,
                Some(pipe) => Some(pipe.clone()),
            }
        };
        let Some(pipe) = pipe else {
            queued.await;
            continue;
        };
        let ready = pipe.writable().await;
        let mut state = input.state();
        if ready.is_err() {
            state.close();
        }
        while let Some(front) = state.waiting.front_mut() {
            match pipe.try_write(front) {
                Ok(n) if n == front.len() => {
                    state.bytes -= n;
                    state.waiting.pop_front();
                }
                Ok(n) => {
                    front.drain(..n);
                    state.bytes -= n;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => state.close(),
            }
        }
        if state.closing && state.waiting.is_empty() {
            state.close();
        }
        drop(state);
        drop(pipe);
        input.drained.notify_waiters();
    }
}

/// Copies whole lines from rmcp's pipe to the server's input, waiting while the server does
/// not read; closes the input when rmcp's pipe ends.
pub(crate) async fn copy_lines(from: impl AsyncRead + Unpin, input: Arc<Input>) {
    let mut from = BufReader::new(from);
    loop {
        let mut line = Vec::new();
        match from.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        input.room().await;
        if input.write(line).is_err() {
            break;
        }
    }
    input.close();
}
