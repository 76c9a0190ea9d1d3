//! Connections: a small pool of `postgres::Client`s, errors that name the store without its
//! password, and the schema check every operation makes once.

use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use capability_gate::StoreError;
use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};

use crate::{SCHEMA_VERSION, redact_url};

/// How long a connection attempt may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Idle connections kept: one per thread of an 8-thread process.
const MAX_IDLE: usize = 8;

/// Connections to one database, shared by the ledger, the revocations and the reads.
pub(crate) struct Pool {
    config: Config,
    /// The URL without its password, for messages.
    pub(crate) name: String,
    /// The password, to take it out of any message that might repeat it.
    password: Option<String>,
    idle: Mutex<Vec<Client>>,
    schema_ok: AtomicBool,
}

impl Pool {
    /// Parses `url`; a malformed one is a clear error (that never repeats the password).
    pub(crate) fn new(url: &str) -> Result<Pool, StoreError> {
        let name = redact_url(url);
        let mut config = Config::from_str(url).map_err(|e| {
            StoreError::new(
                name.clone(),
                format!("not a valid PostgreSQL URL: {}", chain(&e)),
            )
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("capability");
        }
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .filter(|p| !p.is_empty());
        // A password given as a parameter (`?password=...`) is taken out of the name too.
        let name = match &password {
            Some(password) => name.replace(password.as_str(), "***"),
            None => name,
        };
        let pool = Pool {
            config,
            name,
            password,
            idle: Mutex::new(Vec::new()),
            schema_ok: AtomicBool::new(false),
        };
        Ok(pool)
    }

    /// A new connection. A caller on a runtime's thread must not drop it there (see
    /// [`Pool::with`]): the migrations and the committer's thread are not on one.
    pub(crate) fn connect(&self) -> Result<Client, StoreError> {
        self.config
            .connect(NoTls)
            .map_err(|e| self.error("cannot connect", &e))
    }

    /// Runs `f` on a pooled connection. A pooled connection found closed (the server was
    /// restarted) is replaced once: `f` must be safe to run again after a failure.
    ///
    /// Called from a thread of an async runtime (a gateway's, an rmcp server's), it runs on a
    /// thread of its own that the caller waits for: the blocking client drives a runtime of its
    /// own, which cannot start on a runtime's thread.
    pub(crate) fn with<T: Send>(
        &self,
        what: &str,
        f: impl FnMut(&mut Client) -> Result<T, postgres::Error> + Send,
    ) -> Result<T, StoreError> {
        off_runtime(|| self.with_here(what, f))
    }

    fn with_here<T>(
        &self,
        what: &str,
        mut f: impl FnMut(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let pooled = crate::postgres::lock(&self.idle).pop();
        let fresh = pooled.is_none();
        let mut client = match pooled {
            Some(client) => client,
            None => self.connect()?,
        };
        let mut result = f(&mut client);
        if result.is_err() && client.is_closed() && !fresh {
            client = self.connect()?;
            result = f(&mut client);
        }
        if !client.is_closed() {
            let mut idle = crate::postgres::lock(&self.idle);
            if idle.len() < MAX_IDLE {
                idle.push(client);
            }
        }
        result.map_err(|e| self.error(what, &e))
    }

    /// Checks once (and then remembers) that the database is migrated to this build's schema.
    pub(crate) fn ensure_schema(&self) -> Result<(), StoreError> {
        if self.schema_ok.load(Ordering::Acquire) {
            return Ok(());
        }
        let version = self.with("cannot read the schema version", |c| {
            c.query_one(
                "SELECT COALESCE(max(version), 0) FROM capability_schema_version",
                &[],
            )
            .map(|row| row.get::<_, i32>(0))
        })?;
        let version = u32::try_from(version).unwrap_or(0);
        check_version(&self.name, version)?;
        self.schema_ok.store(true, Ordering::Release);
        Ok(())
    }

    /// A store error for `e`, with the schema hint when the tables are missing, and the
    /// password taken out.
    pub(crate) fn error(&self, what: &str, e: &postgres::Error) -> StoreError {
        if e.code() == Some(&SqlState::UNDEFINED_TABLE) {
            return not_migrated(&self.name);
        }
        StoreError::new(
            self.name.clone(),
            self.scrub(format!("{what}: {}", chain(e))),
        )
    }

    /// `message` without the password.
    pub(crate) fn scrub(&self, message: String) -> String {
        match &self.password {
            Some(password) => message.replace(password.as_str(), "***"),
            None => message,
        }
    }
}

/// The error of an unmigrated database.
pub(crate) fn not_migrated(name: &str) -> StoreError {
    StoreError::new(
        name,
        format!(
            "the database has no capability schema (version {SCHEMA_VERSION} needed): run \
             `capability db migrate {name}`"
        ),
    )
}

/// Refuses a schema version other than this build's.
pub(crate) fn check_version(name: &str, version: u32) -> Result<(), StoreError> {
    if version == 0 {
        return Err(not_migrated(name));
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::new(
            name,
            format!(
                "the database is at schema version {version}, newer than this build's \
                 version {SCHEMA_VERSION}: upgrade capability"
            ),
        ));
    }
    if version < SCHEMA_VERSION {
        return Err(StoreError::new(
            name,
            format!(
                "the database is at schema version {version}, this build needs version \
                 {SCHEMA_VERSION}: run `capability db migrate {name}`"
            ),
        ));
    }
    Ok(())
}

/// An error and its causes, as one line (the server's message, detail and hint included).
pub(crate) fn chain(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!("{}: {}", db.severity(), db.message());
        if let Some(detail) = db.detail() {
            text.push_str(&format!(" ({detail})"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Idle connections are closed where closing may block (see [`off_runtime`]).
impl Drop for Pool {
    fn drop(&mut self) {
        let idle = std::mem::take(
            self.idle
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        off_runtime(move || drop(idle));
    }
}

/// Runs `f` here, or, on a thread of an async runtime, on a scoped thread that this one waits
/// for (a panic in `f` goes on here).
pub(crate) fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|scope| match scope.spawn(f).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}
