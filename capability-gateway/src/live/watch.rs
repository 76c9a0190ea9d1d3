//! The server's output as it comes: its standard output sorted into lines that look like
//! JSON-RPC and lines that do not, and the tail of its standard error.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::process::{ChildStderr, ChildStdout};

use crate::live::{NOT_MCP_BYTES, OUTPUT_SETTLE, STDERR_TAIL_BYTES, STDERR_TAIL_LINES};

/// What the server wrote on its standard output, as far as telling MCP from anything else goes.
#[derive(Default)]
pub(crate) struct StdoutSeen {
    /// Lines that start like JSON (`{` or `[`).
    json_lines: usize,
    /// The start of the first line that does not.
    first_other: Option<Vec<u8>>,
}

#[derive(Clone, Copy)]
pub(crate) enum LineState {
    /// At the start of a line (leading white space skipped).
    Start,
    /// In a line that starts like JSON.
    Json,
    /// In a line that does not; `capture` when it is the first such line.
    Other { capture: bool },
}

/// Sorts the server's standard output into lines that look like JSON and lines that do not.
pub(crate) struct LineWatcher {
    seen: StdoutSeen,
    line: LineState,
}

impl LineWatcher {
    pub(crate) fn new() -> Self {
        LineWatcher {
            seen: StdoutSeen::default(),
            line: LineState::Start,
        }
    }

    pub(crate) fn observe(&mut self, bytes: &[u8]) {
        let seen = &mut self.seen;
        for &byte in bytes {
            self.line = match (self.line, byte) {
                (_, b'\n') => LineState::Start,
                (LineState::Start, b' ' | b'\t' | b'\r') => LineState::Start,
                (LineState::Start, b'{' | b'[') => {
                    seen.json_lines += 1;
                    LineState::Json
                }
                (LineState::Start, _) => {
                    let capture = seen.first_other.is_none();
                    if capture {
                        seen.first_other = Some(vec![byte]);
                    }
                    LineState::Other { capture }
                }
                (LineState::Other { capture: true }, _) => {
                    if let Some(line) = seen.first_other.as_mut()
                        && line.len() < NOT_MCP_BYTES
                    {
                        line.push(byte);
                    }
                    self.line
                }
                (state, _) => state,
            };
        }
    }

    /// The first line that is not JSON-RPC, when no line was.
    pub(crate) fn not_mcp(&self) -> Option<String> {
        if self.seen.json_lines > 0 {
            return None;
        }
        let line = self.seen.first_other.as_ref()?;
        Some(String::from_utf8_lossy(line).trim_end().to_owned())
    }
}

/// The server's output, read as it comes, so that what it wrote is known even when rmcp stopped
/// reading (a failed write to a server that exited ends the session before its output is read),
/// and so that it never blocks on a full standard error pipe. Standard output is watched and
/// passed on to rmcp; the last few KiB of standard error are kept.
pub(crate) struct Output {
    watcher: Arc<Mutex<LineWatcher>>,
    stdout_pump: tokio::task::JoinHandle<()>,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    stderr_reader: tokio::task::JoinHandle<()>,
}

impl Output {
    /// Starts reading; returns the stream rmcp reads the server's standard output from.
    pub(crate) fn watch(
        mut stdout: ChildStdout,
        mut stderr: ChildStderr,
    ) -> (Output, DuplexStream) {
        let watcher = Arc::new(Mutex::new(LineWatcher::new()));
        let (for_rmcp, mut pipe) = tokio::io::duplex(64 * 1024);
        let watch = Arc::clone(&watcher);
        let stdout_pump = tokio::spawn(async move {
            let mut chunk = vec![0u8; 16 * 1024];
            let mut forwarding = true;
            while let Ok(n) = stdout.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                let bytes = &chunk[..n];
                watch
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .observe(bytes);
                // Once rmcp is gone, keep watching until the server closes its output.
                if forwarding && pipe.write_all(bytes).await.is_err() {
                    forwarding = false;
                }
            }
        });
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&stderr_tail);
        let stderr_reader = tokio::spawn(async move {
            let mut chunk = [0u8; 1024];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                let mut tail = keep.lock().unwrap_or_else(PoisonError::into_inner);
                tail.extend_from_slice(&chunk[..n]);
                if tail.len() > STDERR_TAIL_BYTES {
                    let excess = tail.len() - STDERR_TAIL_BYTES;
                    tail.drain(..excess);
                }
            }
        });
        let output = Output {
            watcher,
            stdout_pump,
            stderr_tail,
            stderr_reader,
        };
        (output, for_rmcp)
    }

    /// Waits a moment for the rest of what the server wrote (it has exited or been killed; a
    /// process it started may still hold the pipes open, hence the limit).
    pub(crate) async fn settle(&mut self) {
        let both = async {
            let _ = (&mut self.stdout_pump).await;
            let _ = (&mut self.stderr_reader).await;
        };
        let _ = tokio::time::timeout(OUTPUT_SETTLE, both).await;
    }

    /// The first line the server wrote that is not JSON-RPC, when it never wrote one that is.
    pub(crate) fn not_mcp(&self) -> Option<String> {
        self.watcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .not_mcp()
    }

    /// The last lines of its standard error, trimmed.
    pub(crate) fn stderr(&self) -> String {
        let tail = self
            .stderr_tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let text = String::from_utf8_lossy(&tail);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim_end)
            .filter(|line| !line.is_empty())
            .collect();
        let start = lines.len().saturating_sub(STDERR_TAIL_LINES);
        lines[start..].join("\n")
    }

    pub(crate) fn stop(self) {
        self.stdout_pump.abort();
        self.stderr_reader.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(crate) fn the_watcher_tells_json_from_other_output() {
        let mut watcher = LineWatcher::new();
        watcher.observe(b"Server running on std");
        assert_eq!(watcher.not_mcp().as_deref(), Some("Server running on std"));
        watcher.observe(b"io\n  {\"jsonrpc\"");
        watcher.observe(b":\"2.0\"}\nanother line\n");
        assert_eq!(watcher.seen.json_lines, 1);
        assert_eq!(
            watcher.seen.first_other.as_deref(),
            Some(&b"Server running on stdio"[..])
        );
        assert_eq!(watcher.not_mcp(), None, "it also wrote JSON");
    }
}
