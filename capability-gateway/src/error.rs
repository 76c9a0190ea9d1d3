//! Why the engine did not serve, or stopped.

/// Why the engine did not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GatewayError {
    /// The configuration is refused (the policy, a role, an address, the trail, the
    /// exporters): nothing was served.
    Config(String),
    /// A server's program could not be started (not found, not executable): nothing was
    /// served.
    Unstarted(String),
    /// A server was started or reached but did not connect, or could not be listed: nothing
    /// was served.
    Server(String),
}

impl std::fmt::Display for GatewayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GatewayError::Config(why)
            | GatewayError::Unstarted(why)
            | GatewayError::Server(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for GatewayError {}

impl GatewayError {
    /// The same error, its message said of `server`.
    pub(crate) fn of_server(self, server: &str) -> GatewayError {
        let said = |why: String| format!("server `{server}`: {why}");
        match self {
            GatewayError::Config(why) => GatewayError::Config(said(why)),
            GatewayError::Unstarted(why) => GatewayError::Unstarted(said(why)),
            GatewayError::Server(why) => GatewayError::Server(said(why)),
        }
    }
}
