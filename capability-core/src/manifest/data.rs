//! A manifest's storage, and the one function that assembles it.
//!
//! Every source of a manifest (the derive, the builder, and through the builder MCP import,
//! lockfiles and deserialization) ends in [`ManifestData::assemble`]: it is the only code that
//! makes a `ManifestData`, and it takes the hints as *stated*, so the effective values always
//! come from the one resolution rule. A derived tool's data is assembled at compile time and
//! borrows every string from the binary: the manifest needs no allocation.

use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;

use serde::{Serialize, Serializer};

use super::hints::{Hint, HintSet, Stated};

/// Text of a manifest: borrowed from the binary for a derived tool, owned otherwise.
pub(crate) type Text = Cow<'static, str>;

/// A sorted list of short strings (scopes, sensitive field names).
///
/// A derived tool's list is borrowed from the binary; the `String`s that
/// [`CapabilityManifest::required_scopes`](super::CapabilityManifest::required_scopes) returns
/// are made on the first call that asks for them, once per tool and process, so building the
/// manifest (and the registry) allocates nothing.
pub(crate) enum Names {
    /// Borrowed from the binary, with its owned copy once asked for.
    Static(&'static [&'static str], OnceLock<Vec<String>>),
    /// Owned.
    Owned(Vec<String>),
}

impl Names {
    /// A list borrowed from the binary; usable in a `static`.
    pub(crate) const fn borrowed(names: &'static [&'static str]) -> Names {
        Names::Static(names, OnceLock::new())
    }

    /// The names as `String`s.
    pub(crate) fn strings(&self) -> &[String] {
        match self {
            Names::Static(names, owned) => {
                owned.get_or_init(|| names.iter().map(|name| (*name).to_owned()).collect())
            }
            Names::Owned(names) => names,
        }
    }

    /// The names, without allocating.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        let (borrowed, owned): (&[&str], &[String]) = match self {
            Names::Static(names, _) => (names, &[]),
            Names::Owned(names) => (&[], names),
        };
        borrowed
            .iter()
            .copied()
            .chain(owned.iter().map(String::as_str))
    }

    /// How many names.
    pub(crate) fn len(&self) -> usize {
        match self {
            Names::Static(names, _) => names.len(),
            Names::Owned(names) => names.len(),
        }
    }
}

impl Clone for Names {
    fn clone(&self) -> Self {
        match self {
            Names::Static(names, _) => Names::borrowed(names),
            Names::Owned(names) => Names::Owned(names.clone()),
        }
    }
}

impl PartialEq for Names {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Names {}

impl Hash for Names {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_usize(self.len());
        for name in self.iter() {
            name.hash(state);
        }
    }
}

impl fmt::Debug for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for Names {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

/// What describes a tool apart from its hints, validated by whoever gathered it: the derive at
/// compile time, [`ManifestBuilder::build`](super::ManifestBuilder::build) at run time.
// `repr(C)`, in this order: what every decision reads (name, provider, scopes) comes first, so
// that it shares cache lines with the hints (see `ManifestData`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub(crate) struct Described {
    pub(crate) name: Text,
    pub(crate) provider: Option<Text>,
    /// Sorted and de-duplicated.
    pub(crate) required_scopes: Names,
    pub(crate) title: Option<Text>,
    pub(crate) description: Option<Text>,
    pub(crate) input_schema_id: Text,
    pub(crate) output_schema_id: Option<Text>,
    pub(crate) schema_version: Text,
    /// 64 lowercase hex digits.
    pub(crate) descriptor_hash: Text,
    /// Sorted and de-duplicated.
    pub(crate) sensitive_fields: Names,
}

/// The storage of a [`CapabilityManifest`](super::CapabilityManifest). Not a public API: it is
/// reachable only through `capability::__private`, for the statics `#[derive(Capability)]`
/// emits, and only `ManifestData::assemble` makes one.
// `repr(C)`: the hints first, next to the fields of `Described` that decisions read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct ManifestData {
    pub(super) hints: HintSet<Hint>,
    pub(super) described: Described,
}

impl ManifestData {
    /// The one constructor: the validated description, and the hints as stated (value and who
    /// stated it), resolved here by the one rule. A `const fn`, so that a derived tool's data is
    /// assembled at compile time.
    pub(crate) const fn assemble(described: Described, stated: HintSet<Stated>) -> ManifestData {
        ManifestData {
            hints: stated.resolve(),
            described,
        }
    }
}
