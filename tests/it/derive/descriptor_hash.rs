//! The descriptor hash changes with every part of the descriptor and with nothing else.
//!
//! Every tool here is named `probe` so that only the part under test differs.

#![allow(dead_code)]

use capability::Capability;

fn hash<T: Capability>() -> &'static str {
    T::manifest().descriptor_hash()
}

/// A probe.
#[derive(Capability)]
#[capability(name = "probe", read_only, scopes = ["a:read", "b:read"])]
struct Base {
    id: u64,
    label: String,
}

// The same descriptor, written differently: white space, comments, scope order, a repeated
// scope, keys split over two attributes and in another order.
/// A probe.
#[derive(Capability)]
#[capability(scopes = [ "b:read",  "a:read", "b:read" ])]
#[capability(read_only, name = "probe")]
struct BaseWrittenDifferently {
    id: u64, // the id
    label: String,
}

mod elsewhere {
    /// A probe.
    #[derive(capability::Capability)]
    #[capability(name = "probe", read_only, scopes = ["a:read", "b:read"])]
    pub struct Base {
        id: u64,
        label: String,
    }
}

#[test]
fn same_descriptor_same_hash() {
    assert_eq!(hash::<Base>(), hash::<BaseWrittenDifferently>());
    // The module and the type's name are not part of the descriptor; the tool name is.
    assert_eq!(hash::<Base>(), hash::<elsewhere::Base>());
}

macro_rules! variant {
    ($ty:ident, [$($attr:tt)*], { $($fields:tt)* }) => {
        /// A probe.
        #[derive(Capability)]
        #[capability($($attr)*)]
        struct $ty { $($fields)* }
    };
}

variant!(OtherName, [name = "probe2", read_only, scopes = ["a:read", "b:read"]], { id: u64, label: String });
variant!(NotReadOnly, [name = "probe", destructive = false, scopes = ["a:read", "b:read"]], { id: u64, label: String });
variant!(Idempotent, [name = "probe", read_only, idempotent, scopes = ["a:read", "b:read"]], { id: u64, label: String });
variant!(ClosedWorld, [name = "probe", read_only, open_world = false, scopes = ["a:read", "b:read"]], { id: u64, label: String });
variant!(Destructive, [name = "probe", scopes = ["a:read", "b:read"]], { id: u64, label: String });
variant!(FewerScopes, [name = "probe", read_only, scopes = ["a:read"]], { id: u64, label: String });
variant!(OtherScope, [name = "probe", read_only, scopes = ["a:read", "c:read"]], { id: u64, label: String });
variant!(FieldRenamed, [name = "probe", read_only, scopes = ["a:read", "b:read"]], { id: u64, name: String });
variant!(FieldRetyped, [name = "probe", read_only, scopes = ["a:read", "b:read"]], { id: u32, label: String });
variant!(FieldAdded, [name = "probe", read_only, scopes = ["a:read", "b:read"]], { id: u64, label: String, extra: bool });
variant!(FieldsReordered, [name = "probe", read_only, scopes = ["a:read", "b:read"]], { label: String, id: u64 });
variant!(WithTitle, [name = "probe", read_only, title = "Probe", scopes = ["a:read", "b:read"]], { id: u64, label: String });
variant!(WithProvider, [name = "probe", read_only, provider = "p", scopes = ["a:read", "b:read"]], { id: u64, label: String });
variant!(WithOutput, [name = "probe", read_only, output = String, scopes = ["a:read", "b:read"]], { id: u64, label: String });
variant!(WithVersion, [name = "probe", read_only, version = "1", scopes = ["a:read", "b:read"]], { id: u64, label: String });
variant!(OtherDescription, [name = "probe", read_only, description = "Another probe.", scopes = ["a:read", "b:read"]], { id: u64, label: String });

/// A probe.
#[derive(Capability)]
#[capability(name = "probe", read_only, scopes = ["a:read", "b:read"])]
struct Tuple(u64, String);

/// A probe.
#[derive(Capability)]
#[capability(name = "probe", read_only, scopes = ["a:read", "b:read"])]
struct Generic<T> {
    id: u64,
    label: T,
}

/// A probe.
#[derive(Capability)]
#[capability(name = "probe", read_only, scopes = ["a:read", "b:read"])]
enum Enum {
    Id(u64),
    Label { label: String },
}

/// A probe.
#[derive(Capability)]
#[capability(name = "probe", read_only, scopes = ["a:read", "b:read"])]
enum EnumVariantRenamed {
    Id(u64),
    Name { label: String },
}

#[test]
fn every_part_changes_the_hash() {
    let base = hash::<Base>();
    let variants = [
        ("name", hash::<OtherName>()),
        ("read_only", hash::<NotReadOnly>()),
        ("idempotent", hash::<Idempotent>()),
        ("open_world", hash::<ClosedWorld>()),
        ("destructive", hash::<Destructive>()),
        ("fewer scopes", hash::<FewerScopes>()),
        ("another scope", hash::<OtherScope>()),
        ("field renamed", hash::<FieldRenamed>()),
        ("field retyped", hash::<FieldRetyped>()),
        ("field added", hash::<FieldAdded>()),
        ("fields reordered", hash::<FieldsReordered>()),
        ("title", hash::<WithTitle>()),
        ("provider", hash::<WithProvider>()),
        ("output", hash::<WithOutput>()),
        ("version", hash::<WithVersion>()),
        ("description", hash::<OtherDescription>()),
        ("tuple struct", hash::<Tuple>()),
        ("generic", hash::<Generic<String>>()),
        ("enum", hash::<Enum>()),
        ("enum variant renamed", hash::<EnumVariantRenamed>()),
    ];
    for (part, changed) in variants {
        assert_ne!(base, changed, "changing the {part} must change the hash");
    }
    // And all of them differ from each other.
    let mut all: Vec<&str> = variants.iter().map(|(_, h)| *h).collect();
    all.push(base);
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), variants.len() + 1);
}

#[test]
fn schema_version_follows_the_hash_unless_given() {
    assert_eq!(Base::manifest().schema_version(), &hash::<Base>()[..12]);
    assert_ne!(
        Base::manifest().schema_version(),
        FieldRetyped::manifest().schema_version()
    );
    assert_eq!(WithVersion::manifest().schema_version(), "1");
}
