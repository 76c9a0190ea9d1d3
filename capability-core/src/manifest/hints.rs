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
///
/// It serializes as `{"effective", "source", "stated"}` but does not deserialize: provenance is
/// never read back from a file (see [`CapabilityManifest`](super::CapabilityManifest)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
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

/// One value for each of the four hints, by name.
///
/// A manifest's hints ([`CapabilityManifest::hints`](super::CapabilityManifest::hints)) are a
/// `HintSet<Hint>`; what someone states about a tool is a `HintSet<Option<bool>>`.
///
/// ```
/// use capability::manifest::{HintKind, HintSet};
///
/// let mut stated: HintSet<Option<bool>> = HintSet::default();
/// stated.set(HintKind::ReadOnly, Some(true));
/// assert_eq!(stated.read_only, Some(true));
/// assert_eq!(*stated.get(HintKind::OpenWorld), None);
/// let given = stated.map(|_, value| value.is_some());
/// assert_eq!(given, HintSet { read_only: true, destructive: false, idempotent: false, open_world: false });
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HintSet<T> {
    /// `readOnlyHint`.
    pub read_only: T,
    /// `destructiveHint`.
    pub destructive: T,
    /// `idempotentHint`.
    pub idempotent: T,
    /// `openWorldHint`.
    pub open_world: T,
}

impl<T> HintSet<T> {
    /// The value for one hint.
    pub const fn get(&self, kind: HintKind) -> &T {
        match kind {
            HintKind::ReadOnly => &self.read_only,
            HintKind::Destructive => &self.destructive,
            HintKind::Idempotent => &self.idempotent,
            HintKind::OpenWorld => &self.open_world,
        }
    }

    /// Replaces the value for one hint.
    pub fn set(&mut self, kind: HintKind, value: T) {
        let slot = match kind {
            HintKind::ReadOnly => &mut self.read_only,
            HintKind::Destructive => &mut self.destructive,
            HintKind::Idempotent => &mut self.idempotent,
            HintKind::OpenWorld => &mut self.open_world,
        };
        *slot = value;
    }

    /// Applies `f` to each hint's value, in the order of [`HintKind::ALL`].
    pub fn map<U>(self, mut f: impl FnMut(HintKind, T) -> U) -> HintSet<U> {
        HintSet {
            read_only: f(HintKind::ReadOnly, self.read_only),
            destructive: f(HintKind::Destructive, self.destructive),
            idempotent: f(HintKind::Idempotent, self.idempotent),
            open_world: f(HintKind::OpenWorld, self.open_world),
        }
    }
}

/// A value someone stated for one hint, and who.
pub(crate) type Stated = Option<(bool, HintSource)>;

impl HintSet<Option<bool>> {
    /// The same values, each stated by `source`.
    pub(crate) const fn stated_by(self, source: HintSource) -> HintSet<Stated> {
        const fn by(value: Option<bool>, source: HintSource) -> Stated {
            match value {
                Some(value) => Some((value, source)),
                None => None,
            }
        }
        HintSet {
            read_only: by(self.read_only, source),
            destructive: by(self.destructive, source),
            idempotent: by(self.idempotent, source),
            open_world: by(self.open_world, source),
        }
    }
}

impl HintSet<Stated> {
    /// The one rule from stated values to effective ones; every manifest's hints come from it.
    ///
    /// A believed statement counts as given; an untrusted claim and silence count as absent, and
    /// the MCP defaults fill in what is absent: not read-only, destructive unless read-only, not
    /// idempotent, open world (the fail-closed reading, written once in
    /// `capability_rules::Flags::defaulted`, which the derive uses too). For a tool whose effective `read_only` is true, `destructive` is
    /// false whatever was stated: a declaration saying both is the derive's and the builder's
    /// error, reported before getting here. A `const fn`, so a derived tool's manifest is
    /// resolved at compile time.
    pub(crate) const fn resolve(self) -> HintSet<Hint> {
        // The defaults live in one place, `capability_rules`, for the derive and the runtime.
        let flags = Flags::defaulted(
            believed(self.read_only),
            believed(self.destructive),
            believed(self.idempotent),
            believed(self.open_world),
        );
        HintSet {
            read_only: hint(flags.read_only, self.read_only),
            destructive: hint(flags.destructive, self.destructive),
            idempotent: hint(flags.idempotent, self.idempotent),
            open_world: hint(flags.open_world, self.open_world),
        }
    }
}

const fn believed(stated: Stated) -> Option<bool> {
    match stated {
        Some((value, source)) if source.is_believed() => Some(value),
        _ => None,
    }
}

const fn hint(effective: bool, stated: Stated) -> Hint {
    match stated {
        Some((value, source)) => Hint {
            effective,
            source,
            stated: Some(value),
        },
        None => Hint {
            effective,
            source: HintSource::Defaulted,
            stated: None,
        },
    }
}

impl HintSet<Hint> {
    /// What was stated, and by whom, for resolving again with some statements replaced.
    pub(crate) fn stated(self) -> HintSet<Stated> {
        self.map(|_, h| h.stated.map(|value| (value, h.source)))
    }

    /// The effective values.
    pub(crate) fn flags(self) -> Flags {
        Flags {
            read_only: self.read_only.effective,
            destructive: self.destructive.effective,
            idempotent: self.idempotent.effective,
            open_world: self.open_world.effective,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: HintSource = HintSource::Declared;
    const U: HintSource = HintSource::UntrustedClaim;
    const T: HintSource = HintSource::TrustedClaim;

    const FAIL_CLOSED: Flags = Flags {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    };

    fn set(values: [Stated; 4]) -> HintSet<Stated> {
        HintSet {
            read_only: values[0],
            destructive: values[1],
            idempotent: values[2],
            open_world: values[3],
        }
    }

    #[test]
    fn silence_is_the_fail_closed_default() {
        let h = HintSet::<Stated>::default().resolve();
        assert_eq!(h.flags(), FAIL_CLOSED);
        assert_eq!(h.read_only.source(), HintSource::Defaulted);
        assert_eq!(h.read_only.stated(), None);
    }

    #[test]
    fn untrusted_claims_are_visible_but_not_believed() {
        let h = set([
            Some((true, U)),
            Some((false, U)),
            Some((true, U)),
            Some((false, U)),
        ])
        .resolve();
        assert_eq!(h.flags(), FAIL_CLOSED);
        assert_eq!(h.read_only.stated(), Some(true));
        assert_eq!(h.read_only.source(), U);
        assert_eq!(h.open_world.stated(), Some(false));
    }

    #[test]
    fn trusted_read_only_claim_makes_destructive_false() {
        let h = set([Some((true, T)), Some((true, T)), None, None]).resolve();
        assert!(h.read_only.effective() && !h.destructive.effective());
        assert_eq!(h.destructive.stated(), Some(true));
    }

    #[test]
    fn declared_values_are_believed() {
        let h = set([Some((false, D)), Some((false, D)), Some((true, D)), None]).resolve();
        assert!(!h.read_only.effective() && !h.destructive.effective());
        assert!(h.idempotent.effective() && h.open_world.effective());
        assert_eq!(h.stated().resolve(), h);
    }

    #[test]
    fn the_defaults_are_the_rules_crate_ones_for_every_declaration() {
        // The derive computes its flags (and `READ_ONLY`) with `Flags::resolve`; the manifest's
        // effective hints come from `resolve`. They must agree on every declaration.
        let values = [None, Some(false), Some(true)];
        for ro in values {
            for de in values {
                for id in values {
                    for ow in values {
                        let declared = HintSet {
                            read_only: ro,
                            destructive: de,
                            idempotent: id,
                            open_world: ow,
                        };
                        let ours = declared.stated_by(D).resolve().flags();
                        match Flags::resolve(ro, de, id, ow) {
                            Ok(theirs) => assert_eq!(ours, theirs, "{declared:?}"),
                            // Refused by the rules before a manifest exists.
                            Err(_) => assert!(ro == Some(true) && de == Some(true)),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_hint_set_is_read_and_written_by_kind() {
        let mut s = HintSet::<u8>::default();
        for (i, kind) in HintKind::ALL.into_iter().enumerate() {
            s.set(kind, i as u8 + 1);
        }
        assert_eq!(
            (s.read_only, s.destructive, s.idempotent, s.open_world),
            (1, 2, 3, 4)
        );
        for (i, kind) in HintKind::ALL.into_iter().enumerate() {
            assert_eq!(*s.get(kind), i as u8 + 1);
        }
        let kinds = s.map(|kind, _| kind);
        assert_eq!(kinds.open_world, HintKind::OpenWorld);
    }
}
