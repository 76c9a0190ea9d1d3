//! An MCP server as the operator names it, and how far its claims are believed.

use std::fmt;

use capability_core::manifest::HintSource;

/// An MCP server: its name (the provider of its tools) and whether its annotations are believed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Server {
    name: String,
    trust: Trust,
}

/// Whether a server's tool annotations are believed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trust {
    /// Its annotations count as what they say.
    Trusted,
    /// Its annotations are recorded but count as absent (the MCP specification: clients must
    /// treat annotations from untrusted servers as untrusted).
    Untrusted,
    /// Its annotations are believed for one tool because a human approved that tool's exact
    /// descriptor (a lockfile pin whose hash matches).
    Pinned,
}

impl Trust {
    /// The source of a hint this server claims.
    pub const fn claim_source(self) -> HintSource {
        match self {
            Trust::Trusted => HintSource::TrustedClaim,
            Trust::Untrusted => HintSource::UntrustedClaim,
            Trust::Pinned => HintSource::PinnedClaim,
        }
    }

    /// `trusted`, `untrusted` or `pinned`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
            Trust::Pinned => "pinned",
        }
    }
}

impl Server {
    /// A server whose annotations are believed.
    pub fn trusted(name: impl Into<String>) -> Server {
        Server {
            name: name.into(),
            trust: Trust::Trusted,
        }
    }

    /// A server whose annotations are not believed: every tool it lists is treated as mutating,
    /// destructive and open-world until an operator asserts otherwise.
    pub fn untrusted(name: impl Into<String>) -> Server {
        Server {
            name: name.into(),
            trust: Trust::Untrusted,
        }
    }

    /// The server's name, which is the provider of its tools.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How far its annotations are believed.
    pub fn trust(&self) -> Trust {
        self.trust
    }

    /// The same server with another trust level.
    pub fn with_trust(&self, trust: Trust) -> Server {
        Server {
            name: self.name.clone(),
            trust,
        }
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.trust.as_str())
    }
}
