//! A spawned server's process, watched from the moment it starts: how it ended is known as soon
//! as it does (its output cut off past the bound, said first; then its exit status), so that a
//! call it leaves unanswered can say why; stopped, it is killed and waited for, so that no
//! server outlives the engine that spawned it.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use tokio::process::Child;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

/// Where the spawned servers' standard error goes when not the engine's own
/// ([`log_servers_to`]).
static SERVER_LOG: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Sends the standard error of every server spawned from now on to the end of `path` (created
/// if need be) instead of the process's own: a report (`capability gateway --check`,
/// `capability init`) then is not mixed with what the servers say. Set once per process; a
/// second call changes nothing and says so.
///
/// # Errors
///
/// [`GatewayError::Config`](crate::GatewayError::Config) when `path` cannot be opened for
/// appending, or when another path was set before.
pub fn log_servers_to(path: &std::path::Path) -> Result<(), crate::GatewayError> {
    open_log(path).map_err(|e| {
        crate::GatewayError::Config(format!(
            "cannot write the servers' log {}: {e}",
            path.display()
        ))
    })?;
    match SERVER_LOG.set(path.to_owned()) {
        Ok(()) => Ok(()),
        Err(_) if SERVER_LOG.get().map(std::path::PathBuf::as_path) == Some(path) => Ok(()),
        Err(_) => Err(crate::GatewayError::Config(
            "the servers' log was set before, to another file".to_owned(),
        )),
    }
}

/// A new file for the servers' log of one `--check` run, in `dir` (the temporary directory):
/// `capability-check-<pid>.log`, or with `-<n>` added when that name is taken. It is created
/// here, never opened when it exists, and readable by its owner only: a file someone planted
/// under a name in a shared directory (to read what the servers say, tokens among it) is never
/// written to.
///
/// # Errors
///
/// [`GatewayError::Config`](crate::GatewayError::Config) when no such file can be created.
pub fn fresh_log_in(dir: &std::path::Path) -> Result<std::path::PathBuf, crate::GatewayError> {
    let pid = std::process::id();
    let mut last = None;
    for n in 0..100u32 {
        let name = match n {
            0 => format!("capability-check-{pid}.log"),
            n => format!("capability-check-{pid}-{n}.log"),
        };
        let path = dir.join(name);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        match options.open(&path) {
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => {
                return Err(crate::GatewayError::Config(format!(
                    "cannot create the servers' log in {}: {e}",
                    dir.display()
                )));
            }
        }
    }
    Err(crate::GatewayError::Config(format!(
        "cannot create the servers' log in {}: {} (100 names taken)",
        dir.display(),
        last.map_or_else(String::new, |e| e.to_string())
    )))
}

/// The standard error a server spawned now gets: the servers' log when one is set and can be
/// opened, else the process's own.
pub(crate) fn server_stderr() -> std::process::Stdio {
    let Some(path) = SERVER_LOG.get() else {
        return std::process::Stdio::inherit();
    };
    match open_log(path) {
        Ok(file) => std::process::Stdio::from(file),
        Err(error) => {
            crate::note(format_args!(
                "cannot write the servers' log {}: {error}; their standard error is ours",
                path.display()
            ));
            std::process::Stdio::inherit()
        }
    }
}

/// Opens the servers' log for appending, created if need be. A path whose last component is a
/// symbolic link is refused, not followed (as the audit trail's): whoever can write the folder
/// must not turn the servers' output into a write to a file of their choosing.
fn open_log(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits());
    }
    options.open(path).map_err(|error| {
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            std::io::Error::other(
                "it is a symbolic link: the servers' log is written only to the file its own \
                 path names (give the link's target instead)",
            )
        } else {
            error
        }
    })
}

/// How long a call the server left unanswered waits to learn why (its exit comes a moment
/// after its output closes).
pub(crate) const LEARN_WHY: Duration = Duration::from_millis(800);

/// How long stopping a server waits for it to exit once killed.
const STOP_WITHIN: Duration = Duration::from_secs(5);

/// How a server ended, once it did.
#[derive(Default)]
pub(crate) struct Exit {
    why: Mutex<Option<String>>,
    said: Condvar,
    notify: Notify,
}

impl Exit {
    /// Says how the server ended; the first word stays (its output cut off comes before the
    /// exit it leads to, and says more).
    pub(crate) fn set(&self, why: String) {
        let mut kept = self.why.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.is_none() {
            *kept = Some(why);
        }
        drop(kept);
        self.said.notify_all();
        self.notify.notify_waiters();
    }

    /// How it ended, if it did.
    pub(crate) fn get(&self) -> Option<String> {
        self.why
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How it ended, waiting up to `within` for it (a thread's wait).
    pub(crate) fn wait_blocking(&self, within: Duration) -> Option<String> {
        let kept = self.why.lock().unwrap_or_else(PoisonError::into_inner);
        let (kept, _) = self
            .said
            .wait_timeout_while(kept, within, |why| why.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        kept.clone()
    }

    /// How it ended, waiting up to `within` for it (a task's wait).
    pub(crate) async fn wait(&self, within: Duration) -> Option<String> {
        let waiting = async {
            loop {
                let notified = self.notify.notified();
                if let Some(why) = self.get() {
                    return why;
                }
                notified.await;
            }
        };
        tokio::time::timeout(within, waiting).await.ok()
    }
}

/// How one server ends: a spawned one's process, said when it exits; an HTTP one's
/// connection, said by the first request that finds it gone.
#[derive(Clone)]
pub(crate) enum Ended {
    /// A spawned server.
    Spawned(Arc<Exit>),
    /// A server at this URL.
    Http(Arc<Exit>, String),
}

impl Ended {
    /// Why a request to the server got no answer (`error`, from its connection): how the
    /// server ended, when it did. A spawned server's exit comes a moment after its output
    /// closes, so it is waited for ([`LEARN_WHY`]); an HTTP server is gone when a request
    /// cannot reach it (the engine then stops, or reconnects). That request's own error is
    /// what it is answered: the connection serves on until it is replaced, so a later request
    /// that fails on it fails for its own reason, not the first one's.
    pub(crate) async fn why(&self, error: &rmcp::ServiceError) -> Option<String> {
        match self {
            Ended::Spawned(exit) => exit.wait(LEARN_WHY).await,
            Ended::Http(exit, url) => {
                let transport = matches!(
                    error,
                    rmcp::ServiceError::TransportSend(_) | rmcp::ServiceError::TransportClosed
                );
                transport.then(|| {
                    let why = format!("the connection to {url} failed: {error}");
                    exit.set(why.clone());
                    why
                })
            }
        }
    }
}

/// A spawned server's process, watched by a task of its own. Dropped, it is killed (without
/// waiting); [`Process::stop`] kills it and waits.
pub(crate) struct Process {
    stop: Option<oneshot::Sender<()>>,
    watching: Option<JoinHandle<()>>,
}

impl Process {
    /// Watches `child` (started as `program`): how it ends is said in `exit`.
    pub(crate) fn watch(mut child: Child, program: &str, exit: Arc<Exit>) -> Process {
        let (stop, stopped) = oneshot::channel::<()>();
        let program = program.to_owned();
        let said = Arc::clone(&exit);
        let watching = tokio::spawn(async move {
            tokio::select! {
                status = child.wait() => {
                    said.set(match status {
                        Ok(status) => format!("`{program}` exited ({status})"),
                        Err(e) => format!("`{program}` could not be waited for: {e}"),
                    });
                }
                // Asked to stop, or the handle dropped: killed, and reaped.
                _ = stopped => {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                    said.set(format!("`{program}` was stopped"));
                }
            }
        });
        Process {
            stop: Some(stop),
            watching: Some(watching),
        }
    }

    /// Kills the server and waits for it to exit (a few seconds at most).
    pub(crate) async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(watching) = self.watching.take() {
            let _ = tokio::time::timeout(STOP_WITHIN, watching).await;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // The watching task kills it when the sender goes.
        self.stop.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_word_of_how_it_ended_stays() {
        let exit = Exit::default();
        assert_eq!(exit.wait_blocking(Duration::from_millis(1)), None);
        exit.set("its output was cut off".to_owned());
        exit.set("`x` exited (exit status: 1)".to_owned());
        assert_eq!(exit.get().as_deref(), Some("its output was cut off"));
    }

    #[cfg(unix)]
    #[test]
    fn a_check_log_is_a_new_private_file_never_one_planted_under_its_name() {
        use std::os::unix::fs::PermissionsExt;
        let dir = capability_testkit::Scratch::new("check-log");
        // Someone plants the first name, world-readable, and a link under the second.
        let planted = dir.join(format!("capability-check-{}.log", std::process::id()));
        std::fs::write(&planted, "").expect("planted");
        let target = dir.join("precious");
        std::fs::write(&target, "kept\n").expect("the target");
        let link = dir.join(format!("capability-check-{}-1.log", std::process::id()));
        std::os::unix::fs::symlink(&target, &link).expect("a symbolic link");

        let log = fresh_log_in(&dir).expect("a log");
        assert_ne!(log, planted);
        assert_ne!(log, link);
        let meta = std::fs::symlink_metadata(&log).expect("made");
        assert!(meta.file_type().is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&planted).expect("planted"), "");
        assert_eq!(std::fs::read_to_string(&target).expect("target"), "kept\n");
    }

    #[cfg(unix)]
    #[test]
    fn a_servers_log_that_is_a_symbolic_link_is_refused_and_its_target_left_alone() {
        let dir = capability_testkit::Scratch::new("servers-log");
        let target = dir.join("precious");
        std::fs::write(&target, "kept\n").expect("the target");
        let link = dir.join("servers.log");
        std::os::unix::fs::symlink(&target, &link).expect("a symbolic link");

        let error = log_servers_to(&link).expect_err("a link is not followed");
        let message = error.to_string();
        assert!(message.contains("symbolic link"), "{message}");
        assert!(message.contains("servers.log"), "{message}");
        assert_eq!(
            std::fs::read_to_string(&target).expect("the target"),
            "kept\n"
        );
        assert!(SERVER_LOG.get().is_none(), "a refused log is not set");

        let plain = dir.join("plain.log");
        open_log(&plain).expect("a plain path is created");
        assert!(plain.is_file());
    }
}
