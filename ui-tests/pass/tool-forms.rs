//! Every accepted form of `#[derive(Capability)]` builds, and its manifest says what was written.
#![allow(
    dead_code,
    reason = "the forms are declared to show they are accepted, not used"
)]
use capability::{Capability, ReadOnlyTool};

/// Named fields.
#[derive(Capability)]
#[capability(read_only, idempotent, open_world = false, scopes = ["metrics:read"])]
struct PromQuery {
    query: String,
}

/// Tuple struct.
#[derive(Capability)]
#[capability(read_only = true, destructive = false)]
struct GetPod(String, u32);

/// Unit struct, all defaults: mutating.
#[derive(Capability)]
struct Reboot;

/// Enum.
#[derive(Capability)]
#[capability(destructive = false, idempotent = true)]
enum SetMode {
    Off,
    On { level: u8 },
    Custom(String),
}

/// Generic, with a where clause, several attributes and every key.
#[derive(Capability)]
#[capability(read_only, idempotent)]
#[capability(scopes = ["docs:read", "docs:list", "docs:read"], provider = "docs")]
#[capability(name = "fetch.doc-v2", title = "Fetch a document", output = Vec<T>)]
#[capability(description = "Fetches one document.", version = "2026-07")]
#[capability(open_world = false, crate = "::capability")]
struct Fetch<'a, T: Clone, const N: usize>
where
    T: Default,
{
    id: &'a [T; N],
}

fn read_only<T: ReadOnlyTool>() -> bool {
    T::READ_ONLY
}

fn main() {
    // A tool and an agent defined inside a function register like any other.
    /// A local tool.
    #[derive(Capability)]
    #[capability(read_only)]
    struct Local;
    #[capability::advisor_agent(tools(Local))]
    struct LocalAgent;
    let registry = capability::Registry::from_inventory().expect("a consistent registry");
    assert!(registry.tool("local").is_some_and(|t| t.read_only()));
    assert_eq!(
        registry.agent("local_agent").map(|a| a.tools().len()),
        Some(1)
    );
    // The module path, not the function: trybuild names the crate `trybuildNNN`.
    assert!(Local::manifest().input_schema_id().ends_with("::Local"));

    let m = PromQuery::manifest();
    assert_eq!(m.name(), "prom_query");
    assert!(m.read_only() && !m.destructive() && m.idempotent() && !m.open_world());
    assert!(read_only::<PromQuery>() && read_only::<GetPod>());

    let m = Reboot::manifest();
    assert!(!m.read_only() && m.destructive() && !m.idempotent() && m.open_world());
    const { assert!(!<Reboot as Capability>::READ_ONLY) };

    let m = SetMode::manifest();
    assert!(!m.read_only() && !m.destructive() && m.idempotent());

    let m = Fetch::<'static, u8, 4>::manifest();
    assert_eq!(m.name(), "fetch.doc-v2");
    assert_eq!(m.title(), Some("Fetch a document"));
    assert_eq!(m.description(), Some("Fetches one document."));
    assert_eq!(m.provider(), Some("docs"));
    assert_eq!(m.required_scopes(), ["docs:list", "docs:read"]);
    assert_eq!(m.output_schema_id(), Some("Vec<T>"));
    assert_eq!(m.schema_version(), "2026-07");
    assert!(std::ptr::eq(m, Fetch::<'static, String, 1>::manifest()));
}
