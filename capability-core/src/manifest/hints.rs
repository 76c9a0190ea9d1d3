//! The four behaviour hints, each with where it came from, and the one rule that turns what was
//! stated into the value decisions use.

use std::fmt;

use capability_rules::Flags;
use serde::{Deserialize, Serialize};

/// Where a hint's value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HintSource {
    /// Declared in code: `#[capability(...)]` or the manifest builder.
    Declared,
    /// Asserted by an operator, in a policy file. Wins over everything else.
    Asserted,
    /// Claimed by an MCP server the client trusts, in its tool annotations.
    TrustedClaim,
    /// Claimed by an MCP server, and pinned: the tool's descriptor matches the one a human
    /// approved in the lockfile. Believed while the hash matches.
    PinnedClaim,
    /// Claimed by an MCP server the client does not trust. The MCP specification says such
    /// annotations must not be believed: the effective value is the fail-closed default, and the
    /// claim stays visible.
    UntrustedClaim,
    /// Nobody said anything: the MCP default, which is the fail-closed reading.
    Defaulted,
}

impl HintSource {
    /// Whether a value from this source is believed.
    pub const fn is_believed(self) -> bool {
        matches!(
            self,
            HintSource::Declared
                | HintSource::Asserted
                | HintSource::TrustedClaim
                | HintSource::PinnedClaim
        )
    }

    /// A short lowercase name: `declared`, `asserted`, `trusted claim`, `pinned claim`,
    /// `untrusted claim`, `defaulted`.
    pub const fn as_str(self) -> &'static str {
        match self {
            HintSource::Declared => "declared",
            HintSource::Asserted => "asserted",
            HintSource::TrustedClaim => "trusted claim",
            HintSource::PinnedClaim => "pinned claim",
            HintSource::UntrustedClaim => "untrusted claim",
            HintSource::Defaulted => "defaulted",
        }
    }
}

impl fmt::Display for HintSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One hint: the value decisions use, where it came from, and what was stated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hint {
    effective: bool,
    source: HintSource,
    stated: Option<bool>,
}

impl Hint {
    /// The value decisions use.
    pub fn effective(self) -> bool {
        self.effective
    }

    /// Where the hint came from.
    pub fn source(self) -> HintSource {
        self.source
    }

    /// What was declared, asserted or claimed; `None` when nothing was. An untrusted claim is
    /// kept here even though [`effective`](Self::effective) ignores it.
    pub fn stated(self) -> Option<bool> {
        self.stated
    }
}

/// Which of the four hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HintKind {
    /// `readOnlyHint`.
    ReadOnly,
    /// `destructiveHint`.
    Destructive,
    /// `idempotentHint`.
    Idempotent,
    /// `openWorldHint`.
    OpenWorld,
}

impl HintKind {
    /// All four, in the order of the MCP annotations.
    pub const ALL: [HintKind; 4] = [
        HintKind::ReadOnly,
        HintKind::Destructive,
        HintKind::Idempotent,
        HintKind::OpenWorld,
    ];

    /// The key as written in `#[capability(...)]` and in policy files.
    pub const fn key(self) -> &'static str {
        match self {
            HintKind::ReadOnly => "read_only",
            HintKind::Destructive => "destructive",
            HintKind::Idempotent => "idempotent",
            HintKind::OpenWorld => "open_world",
        }
    }

    /// The MCP annotation's name.
    pub const fn mcp_name(self) -> &'static str {
        match self {
            HintKind::ReadOnly => "readOnlyHint",
            HintKind::Destructive => "destructiveHint",
            HintKind::Idempotent => "idempotentHint",
            HintKind::OpenWorld => "openWorldHint",
        }
    }
}

/// A value someone stated for one hint, and who.
pub(crate) type Stated = Option<(bool, HintSource)>;

/// The four hints of a manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Hints {
    pub(crate) read_only: Hint,
    pub(crate) destructive: Hint,
    pub(crate) idempotent: Hint,
    pub(crate) open_world: Hint,
}

impl Hints {
    /// The one rule from stated values to effective ones.
    ///
    /// A believed statement counts as given; an untrusted claim and silence count as absent, and
    /// the MCP defaults (`capability_rules::Flags::resolve`) fill in what is absent. For a tool
    /// whose effective `read_only` is true, `destructive` is false whatever was stated, unless it
    /// was *declared* true: that contradiction is the derive's and the builder's error, and they
    /// report it before getting here.
    pub(crate) fn resolve(stated: [Stated; 4]) -> Hints {
        let believed = |s: Stated| s.filter(|(_, source)| source.is_believed()).map(|(v, _)| v);
        let read_only = believed(stated[0]);
        let mut destructive = believed(stated[1]);
        if read_only == Some(true) {
            // MCP: destructiveHint is meaningful only when readOnlyHint is false.
            destructive = None;
        }
        let flags = Flags::resolve(
            read_only,
            destructive,
            believed(stated[2]),
            believed(stated[3]),
        )
        .unwrap_or(FAIL_CLOSED);
        let hint = |effective, s: Stated| Hint {
            effective,
            source: s.map_or(HintSource::Defaulted, |(_, source)| source),
            stated: s.map(|(value, _)| value),
        };
        Hints {
            read_only: hint(flags.read_only, stated[0]),
            destructive: hint(flags.destructive, stated[1]),
            idempotent: hint(flags.idempotent, stated[2]),
            open_world: hint(flags.open_world, stated[3]),
        }
    }

    /// What was stated, for re-resolving with some hints replaced.
    pub(crate) fn stated(&self) -> [Stated; 4] {
        let s = |h: Hint| h.stated.map(|v| (v, h.source));
        [
            s(self.read_only),
            s(self.destructive),
            s(self.idempotent),
            s(self.open_world),
        ]
    }

    pub(crate) fn get(&self, kind: HintKind) -> Hint {
        match kind {
            HintKind::ReadOnly => self.read_only,
            HintKind::Destructive => self.destructive,
            HintKind::Idempotent => self.idempotent,
            HintKind::OpenWorld => self.open_world,
        }
    }

    /// The effective values.
    pub(crate) fn flags(&self) -> Flags {
        Flags {
            read_only: self.read_only.effective,
            destructive: self.destructive.effective,
            idempotent: self.idempotent.effective,
            open_world: self.open_world.effective,
        }
    }
}

/// What an unknown tool is assumed to do: everything.
pub(crate) const FAIL_CLOSED: Flags = Flags {
    read_only: false,
    destructive: true,
    idempotent: false,
    open_world: true,
};

#[cfg(test)]
mod tests {
    use super::*;

    const D: HintSource = HintSource::Declared;
    const U: HintSource = HintSource::UntrustedClaim;
    const T: HintSource = HintSource::TrustedClaim;

    #[test]
    fn silence_is_the_fail_closed_default() {
        let h = Hints::resolve([None; 4]);
        assert_eq!(h.flags(), FAIL_CLOSED);
        assert_eq!(h.read_only.source(), HintSource::Defaulted);
        assert_eq!(h.read_only.stated(), None);
    }

    #[test]
    fn untrusted_claims_are_visible_but_not_believed() {
        let h = Hints::resolve([
            Some((true, U)),
            Some((false, U)),
            Some((true, U)),
            Some((false, U)),
        ]);
        assert_eq!(h.flags(), FAIL_CLOSED);
        assert_eq!(h.read_only.stated(), Some(true));
        assert_eq!(h.read_only.source(), U);
        assert_eq!(h.open_world.stated(), Some(false));
    }

    #[test]
    fn trusted_read_only_claim_makes_destructive_false() {
        let h = Hints::resolve([Some((true, T)), Some((true, T)), None, None]);
        assert!(h.read_only.effective() && !h.destructive.effective());
        assert_eq!(h.destructive.stated(), Some(true));
    }

    #[test]
    fn declared_values_are_believed() {
        let h = Hints::resolve([Some((false, D)), Some((false, D)), Some((true, D)), None]);
        assert!(!h.read_only.effective() && !h.destructive.effective());
        assert!(h.idempotent.effective() && h.open_world.effective());
        assert_eq!(Hints::resolve(h.stated()), h);
    }
}
