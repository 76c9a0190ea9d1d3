//! Listing a live MCP server's tools: spawning it over stdio, cratevising the child process
//! (its exit status, its stderr, output that is not MCP) and a time limit.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use ::rmcp::model::{ClientConfig, ProtocolVersion};
use ::rmcp::service::{ClientInitializeError, RunningService};
use ::rmcp::transport::IntoTransport;
use ::rmcp::{RoleClient, ServiceError};
use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use capability::ManifestError;
use capability::Server;
use capability::rmcp::{ListError, connect_client, list_tools, tool_json};

pub mod strict;
mod watch;

use watch::Output;

/// A live server's tools, from [`list_server_tools`].
#[derive(Clone, Debug, PartialEq)]
pub struct LiveTools {
    /// The name the server gives itself (`serverInfo.name`); empty when it gives none (a
    /// `server/discover` answer need not).
    pub server_name: String,
    /// The protocol version in use: `2026-07-28`, `2025-11-25`, or an older one the server
    /// answered `initialize` with.
    pub protocol_version: String,
    /// Every tool, all pages, in the server's order, each as JSON. This is the tool as rmcp
    /// read it, written back: the fields the descriptor hash covers (`name`, `title`,
    /// `description`, `inputSchema`, `outputSchema`, `annotations`) are kept, except that an
    /// explicit `null` is dropped and `annotations` keeps only `title` and the four hints.
    pub tools: Vec<Value>,
}

/// Why [`list_server_tools`] failed. The `stderr` fields hold the last lines the server wrote
/// to its standard error (empty when it wrote nothing); [`Display`](fmt::Display) shows them
/// after the first line.
#[derive(Debug)]
#[non_exhaustive]
pub enum LiveError {
    /// The command could not be started (not found, not executable, ...).
    Spawn {
        /// The program.
        command: String,
        /// Why.
        error: std::io::Error,
    },
    /// The server exited, or closed its standard output, before it answered.
    Exited {
        /// The program.
        command: String,
        /// How it exited; `None` when it closed its output but was still running (it was then
        /// killed).
        status: Option<ExitStatus>,
        /// The end of its standard error.
        stderr: String,
    },
    /// The server wrote something that is not JSON-RPC to its standard output, and never
    /// anything that is: it does not speak MCP over stdio.
    NotMcp {
        /// The program.
        command: String,
        /// The first line it wrote (at most 200 bytes).
        stdout: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// No complete answer within the timeout (the server was then killed).
    Timeout {
        /// The program.
        command: String,
        /// The timeout.
        timeout: Duration,
        /// The end of its standard error.
        stderr: String,
    },
    /// The server speaks JSON-RPC but the exchange failed: the handshake was rejected, no
    /// protocol version is shared, `tools/list` answered with an error, a pagination loop, ...
    Protocol {
        /// The program.
        command: String,
        /// What went wrong.
        message: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// The server listed a tool that is not a valid MCP tool; the error names it.
    MalformedTool {
        /// The program.
        command: String,
        /// The tool and its problems.
        error: ManifestError,
    },
}

impl fmt::Display for LiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LiveError::Spawn { command, error } => {
                write!(f, "cannot start `{command}`: {}", io_message(error))
            }
            LiveError::Exited {
                command,
                status,
                stderr,
            } => {
                match status {
                    Some(status) => write!(f, "`{command}` exited before answering ({status})")?,
                    None => write!(f, "`{command}` closed its standard output before answering")?,
                }
                write_stderr(f, stderr)
            }
            LiveError::NotMcp {
                command,
                stdout,
                stderr,
            } => {
                write!(
                    f,
                    "`{command}` does not speak MCP over stdio: it wrote {stdout:?} to its \
                     standard output instead of JSON-RPC"
                )?;
                write_stderr(f, stderr)
            }
            LiveError::Timeout {
                command,
                timeout,
                stderr,
            } => {
                write!(
                    f,
                    "no answer from `{command}` within {}",
                    format_duration(*timeout)
                )?;
                write_stderr(f, stderr)
            }
            LiveError::Protocol {
                command,
                message,
                stderr,
            } => {
                write!(f, "`{command}`: {message}")?;
                write_stderr(f, stderr)
            }
            LiveError::MalformedTool { command, error } => {
                write!(f, "`{command}` listed an invalid tool: {error}")
            }
        }
    }
}

impl std::error::Error for LiveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LiveError::Spawn { error, .. } => Some(error),
            LiveError::MalformedTool { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// An I/O error's message without the `(os error N)` suffix.
fn io_message(error: &std::io::Error) -> String {
    let text = error.to_string();
    match error.raw_os_error() {
        Some(code) => text
            .strip_suffix(&format!(" (os error {code})"))
            .map_or_else(|| text.clone(), str::to_owned),
        None => text,
    }
}

fn write_stderr(f: &mut fmt::Formatter<'_>, stderr: &str) -> fmt::Result {
    if stderr.is_empty() {
        return Ok(());
    }
    f.write_str("\nits standard error ended with:")?;
    for line in stderr.lines() {
        write!(f, "\n  {line}")?;
    }
    Ok(())
}

/// `10 s`, `500 ms`, `1.5 s`.
fn format_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 && duration.as_secs() > 0 {
        format!("{} s", duration.as_secs())
    } else if duration < Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

/// How long a server that closed its output gets to exit before it counts as still running, and
/// how long one gets to exit after its input is closed before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// The deadline of a wait given no bound the clock can hold.
const FAR: Duration = Duration::from_secs(30 * 365 * 86_400);
/// How much of a server's standard error is kept for error messages.
const STDERR_TAIL_BYTES: usize = 4096;
/// How many lines of it an error shows.
const STDERR_TAIL_LINES: usize = 20;
/// How long to wait for the end of the server's output once it is gone.
const OUTPUT_SETTLE: Duration = Duration::from_millis(500);
/// How much of a line that is not JSON-RPC is kept.
const NOT_MCP_BYTES: usize = 200;

/// Spawns `program args...` with `env` added to the inherited environment, speaks MCP to it over
/// stdio and returns every tool it lists (all pages), then shuts it down: its standard input is
/// closed, and it is killed if it has not exited shortly after.
///
/// The connection is negotiated like [`connect_client`]: `server/discover` (2026-07-28), else
/// the `initialize` handshake (2025-11-25 or older). A server that neither answers nor rejects
/// `server/discover` costs rmcp's 10 s probe before the fallback, so give such servers a
/// timeout above 10 s.
///
/// `timeout` bounds the whole exchange, start to last page; then the server is killed. Its
/// standard error is captured, not shown: the end of it comes with a [`LiveError`]. Lines on its
/// standard output that are not JSON-RPC are ignored, as other MCP clients do; a server that
/// writes only such lines fails with [`LiveError::NotMcp`].
///
/// This is an `async fn` on tokio: call it inside a tokio runtime with the I/O and time drivers
/// enabled (`tokio::runtime::Builder::new_current_thread().enable_all().build()`).
///
/// ```no_run
/// use std::ffi::OsString;
/// use std::time::Duration;
///
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// let args = [OsString::from("-y"), OsString::from("@modelcontextprotocol/server-memory")];
/// let live = runtime.block_on(capability_gateway::live::list_server_tools(
///     "npx".as_ref(),
///     &args,
///     &[],
///     Duration::from_secs(30),
/// ))?;
/// println!("{} ({}): {} tools", live.server_name, live.protocol_version, live.tools.len());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub async fn list_server_tools(
    program: &OsStr,
    args: &[OsString],
    env: &[(String, String)],
    timeout: Duration,
) -> Result<LiveTools, LiveError> {
    // A timeout past what the clock can hold (`Duration::MAX`) waits as long as tokio's
    // timers can: about thirty years.
    let deadline = Instant::now()
        .checked_add(timeout)
        .unwrap_or_else(|| Instant::now() + FAR);
    let command = program.to_string_lossy().into_owned();
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(key, value)| (key, value)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| LiveError::Spawn {
            command: command.clone(),
            error,
        })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        // Cannot happen: all three are piped above.
        let _ = child.kill().await;
        return Err(LiveError::Spawn {
            command,
            error: std::io::Error::other("its standard streams could not be captured"),
        });
    };
    let (mut output, stdout) = Output::watch(stdout, stderr);
    let (stdout, checking) = strict::strict_lines(stdout, |why| {
        use std::io::Write;
        let _ = writeln!(std::io::stderr().lock(), "capability: {why}");
    });

    let outcome = tokio::time::timeout_at(deadline, session((stdout, stdin))).await;
    checking.abort();
    let result = match outcome {
        Ok(Ok((mut running, live))) => {
            // Close its input, give it a moment to exit, then kill it.
            let grace = deadline
                .saturating_duration_since(Instant::now())
                .min(EXIT_GRACE);
            let _ = tokio::time::timeout(grace, running.close()).await;
            drop(running);
            if tokio::time::timeout(grace, child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
            Ok(live)
        }
        Ok(Err(failure)) => Err(failed(command, failure, &mut child, &mut output).await),
        Err(_elapsed) => {
            let _ = child.kill().await;
            output.settle().await;
            Err(match output.not_mcp() {
                Some(stdout) => LiveError::NotMcp {
                    command,
                    stdout,
                    stderr: output.stderr(),
                },
                None => LiveError::Timeout {
                    command,
                    timeout,
                    stderr: output.stderr(),
                },
            })
        }
    };
    output.stop();
    result
}

/// Why the session with a live server failed.
enum SessionFailure {
    Handshake(Box<ClientInitializeError>),
    Listing(ListError),
    Json(ManifestError),
}

impl SessionFailure {
    /// Whether the failure is the connection closing under us (the server exited, or closed its
    /// output), rather than an answer.
    fn is_closed(&self) -> bool {
        match self {
            SessionFailure::Handshake(error) => handshake_closed(error),
            SessionFailure::Listing(ListError::Service(
                ServiceError::TransportClosed | ServiceError::TransportSend(_),
            )) => true,
            _ => false,
        }
    }
}

/// Connects over the child's stdio and lists every tool.
async fn session<T, E, A>(
    transport: T,
) -> Result<(RunningService<RoleClient, ClientConfig>, LiveTools), SessionFailure>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = connect_client(transport)
        .await
        .map_err(|error| SessionFailure::Handshake(Box::new(error)))?;
    let info = running.peer().peer_info();
    let server_name = info
        .as_ref()
        .and_then(|info| info.server_info.as_ref())
        .map(|implementation| implementation.name.clone())
        .unwrap_or_default();
    let protocol_version = info
        .as_ref()
        .map(|info| info.protocol_version.to_string())
        .unwrap_or_default();
    let declares_tools = info
        .as_ref()
        .is_none_or(|info| info.capabilities.tools.is_some());
    let tools = if declares_tools {
        // Only the names of bad tools are checked against the rules here, so any valid provider
        // name does.
        list_tools(running.peer(), &Server::untrusted("server"))
            .await
            .map_err(SessionFailure::Listing)?
    } else {
        Vec::new()
    };
    let tools = tools
        .iter()
        .map(tool_json)
        .collect::<Result<Vec<Value>, ManifestError>>()
        .map_err(SessionFailure::Json)?;
    Ok((
        running,
        LiveTools {
            server_name,
            protocol_version,
            tools,
        },
    ))
}

/// The error for a failed session; kills the server if it is still running.
async fn failed(
    command: String,
    failure: SessionFailure,
    child: &mut Child,
    output: &mut Output,
) -> LiveError {
    // Closing the connection closed the server's input, so it may be exiting now whatever went
    // wrong; its status tells something only when it went away first (`is_closed`).
    let closed = failure.is_closed();
    let status = if closed {
        // It closed its output: most likely it is exiting.
        tokio::time::timeout(EXIT_GRACE, child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    } else {
        child.try_wait().ok().flatten()
    };
    if status.is_none() {
        let _ = child.kill().await;
    }
    output.settle().await;
    if let Some(stdout) = output.not_mcp() {
        return LiveError::NotMcp {
            command,
            stdout,
            stderr: output.stderr(),
        };
    }
    if closed {
        return LiveError::Exited {
            command,
            status,
            stderr: output.stderr(),
        };
    }
    let message = match failure {
        SessionFailure::Handshake(error) => handshake_message(&error),
        SessionFailure::Listing(ListError::Service(ServiceError::McpError(error))) => format!(
            "`tools/list` answered with an error: {} (code {})",
            error.message, error.code.0
        ),
        SessionFailure::Listing(ListError::Service(error)) => {
            format!("`tools/list` failed: {error}")
        }
        SessionFailure::Listing(ListError::Answer(message)) => {
            format!("`tools/list` failed: {message}")
        }
        SessionFailure::Listing(ListError::Malformed(error)) | SessionFailure::Json(error) => {
            return LiveError::MalformedTool { command, error };
        }
        SessionFailure::Listing(other) => other.to_string(),
    };
    LiveError::Protocol {
        command,
        message,
        stderr: output.stderr(),
    }
}

/// Whether a handshake failed because the connection closed (the server exited, closed its
/// output, or could not be reached), rather than because of an answer.
pub(crate) fn handshake_closed(error: &ClientInitializeError) -> bool {
    match error {
        ClientInitializeError::ConnectionClosed(_)
        | ClientInitializeError::TransportError { .. } => true,
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => handshake_closed(fallback),
        _ => false,
    }
}

/// Why a handshake was refused or failed, in words (the connection closing is said by the
/// caller, which knows how the server ended).
pub(crate) fn handshake_message(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::JsonRpcError(data) => format!(
            "the MCP handshake was rejected: {} (code {})",
            data.message, data.code.0
        ),
        ClientInitializeError::NoCompatibleProtocolVersion {
            client_supported,
            server_supported,
        } => {
            let list = |versions: &[ProtocolVersion]| {
                versions
                    .iter()
                    .map(ProtocolVersion::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            format!(
                "no protocol version in common: the server speaks {}, this client {}",
                list(server_supported),
                list(client_supported)
            )
        }
        ClientInitializeError::LegacyFallbackFailed { discover, fallback } => format!(
            "the MCP handshake failed: `server/discover`: {discover}; `initialize`: {}",
            handshake_message(fallback)
        ),
        other => format!("the MCP handshake failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(Duration::from_secs(10)), "10 s");
        assert_eq!(format_duration(Duration::from_millis(500)), "500 ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(format_duration(Duration::ZERO), "0 ms");
    }

    #[test]
    fn os_error_codes_are_left_out() {
        let error = std::io::Error::from_raw_os_error(2);
        assert_eq!(io_message(&error), "No such file or directory");
    }
}
