//! `capability proxy`: the policy, the lockfile and the audit trail in front of any MCP server,
//! for any MCP client.
//!
//! The proxy is the governed server ([`GovernedServer`](capability::rmcp::GovernedServer)) as
//! the client's side, with a forwarding handler behind it that speaks to the server as an rmcp
//! client. So what the client sees and may call is decided by the one visibility function
//! (untrusted claims not believed, tools that drifted from the lockfile hidden, duplicate names
//! hidden), a refused call is answered with the governed server's JSON-RPC error and never
//! reaches the server, and every call, allowed or refused, goes through the audited dispatch
//! (its per-session budget, and fail-closed: a call whose record cannot be written is refused).
//!
//! [`Options::prepare`] reads and checks everything (policy, role, lockfile, audit trail) before
//! anything is spawned; [`Proxy::run`] spawns the server and serves the client over the
//! process's standard input and output. Messages go to standard error only.

mod audit;
mod forward;
mod front;
mod run;

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use capability::audit::{AuditSink, Budget};
use capability::mcp::Lockfile;
use capability::{CapabilityManifest, Policy, Server};

pub use forward::PROXY_NAME;
pub use run::RunError;

/// What `capability proxy` was asked to do, before anything is read.
#[derive(Clone, Debug)]
pub struct Options {
    /// The policy file (TOML).
    pub policy: PathBuf,
    /// The client's role: a role of the policy.
    pub role: String,
    /// The server's name: the provider its tools are known by in the policy and the lockfile.
    pub server: String,
    /// Whether the server's annotations are believed.
    pub trusted: bool,
    /// A lockfile: a tool that drifted from its pin is hidden.
    pub lock: Option<PathBuf>,
    /// The audit trail: a `.jsonl` file, a SQLite database path, or `postgres://...`.
    pub audit: String,
    /// The budget of the client's session.
    pub budget: Budget,
    /// The server's command and its arguments.
    pub command: Vec<OsString>,
}

/// A proxy ready to run: its files read and checked, its audit trail open.
pub struct Proxy {
    policy: Arc<Policy>,
    role: String,
    server: Server,
    lock: Option<Arc<Lockfile>>,
    sink: Arc<dyn AuditSink>,
    audit: String,
    budget: Budget,
    program: OsString,
    args: Vec<OsString>,
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proxy")
            .field("role", &self.role)
            .field("server", &self.server)
            .field("lockfile", &self.lock.is_some())
            .field("audit", &self.audit)
            .field("program", &self.program)
            .finish_non_exhaustive()
    }
}

/// Why the proxy cannot start: bad input, found before anything is spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupError(String);

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupError {}

impl Options {
    /// Reads the policy and the lockfile, checks the role and the server's name, and opens the
    /// audit trail; nothing is spawned.
    pub fn prepare(self) -> Result<Proxy, SetupError> {
        let fail = |message: String| SetupError(message);
        let Some((program, args)) = self.command.split_first() else {
            return Err(fail(
                "no server command: give it after `--`, e.g. `-- npx -y @modelcontextprotocol/server-memory`"
                    .to_owned(),
            ));
        };
        let policy = Policy::from_toml_file(&self.policy).map_err(|e| fail(e.to_string()))?;
        if !policy.roles().any(|r| r == self.role) {
            let roles: Vec<&str> = policy.roles().collect();
            return Err(fail(format!(
                "role `{}` is not in the policy {} (it has: {})",
                self.role,
                self.policy.display(),
                roles.join(", ")
            )));
        }
        if let Err(error) = CapabilityManifest::builder("tool")
            .provider(&self.server)
            .build()
        {
            return Err(fail(format!(
                "`--server {}` is not a valid server name: {error}",
                self.server
            )));
        }
        let server = if self.trusted {
            Server::trusted(&self.server)
        } else {
            Server::untrusted(&self.server)
        };
        let lock = match &self.lock {
            None => None,
            Some(path) => {
                let lock = Lockfile::load(path)
                    .map_err(|e| fail(e.to_string()))?
                    .ok_or_else(|| fail(format!("{}: no such lockfile", path.display())))?;
                if lock.server(&self.server).is_none() {
                    return Err(fail(format!(
                        "{} pins no tool of server `{}`: every tool would be hidden; pin them \
                         with `capability pin --server {} --lock {} -- <command>`",
                        path.display(),
                        self.server,
                        self.server,
                        path.display()
                    )));
                }
                Some(Arc::new(lock))
            }
        };
        let sink = audit::open(&self.audit, &self.server, &self.role).map_err(fail)?;
        Ok(Proxy {
            policy: Arc::new(policy),
            role: self.role,
            server,
            lock,
            sink,
            audit: self.audit,
            budget: self.budget,
            program: program.clone(),
            args: args.to_vec(),
        })
    }
}

impl Proxy {
    /// Spawns the server and serves the client on standard input and output until either side
    /// goes: `Ok` when the client disconnected (the server is then stopped), an error when the
    /// server could not be started or went away. The audit trail is closed (flushed) on every
    /// path.
    ///
    /// Call it inside a tokio runtime with the I/O and time drivers enabled.
    pub async fn run(self) -> Result<(), RunError> {
        let (input, output) = standard_streams();
        run::run(self, input, output).await
    }
}

/// Standard input and output for the async runtime. When they are pipes or sockets (a server
/// an MCP client spawns gets one or the other: Node.js, and so Electron, hands its children
/// sockets), the runtime's reactor drives them like the server's pipes; otherwise (a terminal,
/// a file) tokio's blocking threads do, whose hand-offs cost tens of microseconds a message.
fn standard_streams() -> (
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
                Some(Stream::Socket(socket)) => Box::new(socket),
                None => Box::new(tokio::io::stdin()),
            };
        let output: Box<dyn tokio::io::AsyncWrite + Unpin + Send> =
            match reactor_stream(std::io::stdout().as_fd()) {
                Some(Stream::Pipe(file)) => match tokio::net::unix::pipe::Sender::from_file(file) {
                    Ok(pipe) => Box::new(pipe),
                    Err(_) => Box::new(tokio::io::stdout()),
                },
                Some(Stream::Socket(socket)) => Box::new(socket),
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
    /// A socket, made non-blocking here.
    Socket(tokio::net::UnixStream),
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
        socket.set_nonblocking(true).ok()?;
        return tokio::net::UnixStream::from_std(socket)
            .ok()
            .map(Stream::Socket);
    }
    None
}

/// A message on standard error, prefixed with `capability proxy:`.
pub(crate) fn note(message: fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "capability proxy: {message}");
}
